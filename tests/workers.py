"""What the pytest-xdist workers of one test run share, so that two of them split the suite's work without changing
what it checks:

- **turns**: every test runs in a shared turn; a test marked ``alone`` (its assertions read this machine's speed: a
  quiet host, peaks, per-layer times summing to their pass) runs in a turn of its own, while no other test runs;
- **builds made once**: a session fixture's build or evaluation is made by the first worker that needs it, into a
  folder every worker then reads; the others wait for it (out of their turn, so that nobody waits on a waiter).

Without workers (``pytest -n 0``) there is one process: turns are free and everything is made where it is asked for.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import pytest

SHARED, ALONE = fcntl.LOCK_SH, fcntl.LOCK_EX


def worker_name() -> str | None:
    """This process's name among the run's workers (gw0, gw1...), or None outside xdist."""
    return os.environ.get("PYTEST_XDIST_WORKER")


class Turns:
    """A readers-writer lock made of two lock files in the run's shared folder. A test holds ``room`` shared, or
    exclusively when it must be alone; both are taken through ``gate``, so that a test waiting to be alone is not
    overtaken by shared ones forever (flock has no writer preference). Nested uses restore the turn they found."""

    def __init__(self, folder: Path) -> None:
        self._gate: IO[str] = open(folder / "turns.gate", "a+")  # both held for the worker's life
        self._room: IO[str] = open(folder / "turns.room", "a+")
        self.held: int | None = None

    def _take(self, mode: int) -> None:
        fcntl.flock(self._gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._room, mode)
        finally:
            fcntl.flock(self._gate, fcntl.LOCK_UN)
        self.held = mode

    def _leave(self) -> None:
        fcntl.flock(self._room, fcntl.LOCK_UN)
        self.held = None

    def keep(self, mode: int) -> None:
        """From now on, a turn of ``mode``: the one held already, when it is that."""
        if self.held != mode:
            if self.held is not None:
                self._leave()
            self._take(mode)

    def drop(self) -> None:
        """No turn from now on."""
        if self.held is not None:
            self._leave()

    @contextlib.contextmanager
    def taking(self, mode: int | None) -> Iterator[None]:
        """Within: a turn of ``mode`` (None: no turn at all, to wait for another worker); after: the turn before."""
        before = self.held
        if before == mode:
            yield
            return
        if before is not None:
            self._leave()
        try:
            if mode is not None:
                self._take(mode)
            yield
        finally:
            if mode is not None:
                self._leave()
            if before is not None:
                self._take(before)


class _NoTurns(Turns):
    """One process: nothing to take turns with."""

    def __init__(self) -> None:
        self.held = None

    def keep(self, mode: int) -> None:
        return None

    def drop(self) -> None:
        return None

    @contextlib.contextmanager
    def taking(self, mode: int | None) -> Iterator[None]:
        yield


_turns: Turns | None = None


def turns(config: pytest.Config) -> Turns:
    """This process's turns."""
    global _turns
    if _turns is None:
        _turns = Turns(shared_folder(config)) if worker_name() else _NoTurns()
    return _turns


def alone(request: pytest.FixtureRequest) -> contextlib.AbstractContextManager[None]:
    """Within: no other test runs, for the part of a test whose assertions read this machine's speed."""
    return turns(request.config).taking(ALONE)


def shared_folder(config: pytest.Config) -> Path:
    """The folder every worker of this run sees: the parent of the workers' own base folders (xdist starts each
    worker with ``--basetemp <run's base>/popen-gwN``)."""
    folder = Path(config.option.basetemp).parent / "shared"
    folder.mkdir(exist_ok=True)
    return folder


def made_once(request: pytest.FixtureRequest, name: str, make: Callable[[Path], None], alone: bool = False) -> Path:
    """``make(folder)`` run once in the whole run, by the first worker that asks, in a shared turn (a build
    overlaps other tests), or ``alone`` (a measurement that tests read as a quiet host's); the folder it filled. A
    make that failed fails every later asker with its message, unmade again."""
    if not worker_name():
        folder = request.getfixturevalue("tmp_path_factory").mktemp(name)
        make(folder)
        return folder
    root, mine = shared_folder(request.config), turns(request.config)
    folder, done, failed = root / name, root / f"{name}.done", root / f"{name}.failed"
    with open(root / f"{name}.lock", "a+") as lock:
        with mine.taking(None):
            fcntl.flock(lock, fcntl.LOCK_EX)
        if failed.exists():
            pytest.fail(failed.read_text(), pytrace=False)
        if not done.exists():
            folder.mkdir()
            try:
                with mine.taking(ALONE if alone else SHARED):
                    make(folder)
            except (Exception, pytest.fail.Exception) as err:
                failed.write_text(f"{name}, made by {worker_name()}, failed: {err}")
                raise
            done.touch()
    return folder
