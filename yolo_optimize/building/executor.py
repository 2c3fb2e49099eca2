"""Where the build's nodes run: the worker pool behind ``scheduling.Build``, which keeps the one scheduling loop.

An executor runs a picklable function on one job and hands back a ``concurrent.futures.Future``, so
the loop waits on this machine's processes and a cluster's tasks alike. ``LocalExecutor`` is this
machine's pool of spawned processes; ``ray_executor.py`` runs the same function as Ray
tasks on a cluster's nodes. An executor also says how many threads a node gets and reads the
facts the cache keys need (``probe``) where the nodes will run, not where the command was typed.
"""

from __future__ import annotations

import contextlib
import os
import signal
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, wait
from typing import TYPE_CHECKING, Any, TypeVar

from yolo_optimize.host.cpu import usable_cpus
from yolo_optimize.host.processes import SPAWN, configured_child

if TYPE_CHECKING:
    from yolo_optimize.building.dag import NodeResult
    from yolo_optimize.building.node_worker import NodeJob

T = TypeVar("T")
INTERRUPT_GRACE_S, INTERRUPT_WAIT_S = 2, 30
# Nodes built at once when --jobs is not given. Each worker imports PyTorch and the model's package first (seconds);
# on a 2-CPU host a second worker's imports cost more than running two nodes at once wins back: one job took a median
# 0.83-0.97x the wall time and 0.80-0.88x the CPU time of two, over three build shapes
# (bench/archive/build_time/build_jobs.py).
JOBS, SMALL_HOST_JOBS, SMALL_HOST_CPUS = 2, 1, 2


class Workers(ABC):
    """A running pool: submit jobs, stop them on Ctrl-C."""

    @abstractmethod
    def submit(self, function: Callable[[NodeJob], NodeResult], job: NodeJob) -> Future[NodeResult]:
        """``function(job)`` on a worker."""

    @abstractmethod
    def interrupt(self, running: dict[Future[NodeResult], str]) -> None:
        """Ctrl-C: stop the jobs in flight (each removes its staging folder) and wait for them to say so."""


class Executor(ABC):
    """Runs a build's nodes somewhere; ``workers(n)`` opens a pool for ``n`` pending nodes."""

    models_at_once = False  # True: every model's DAG is run at once (a cluster has room for them)

    @property
    @abstractmethod
    def threads(self) -> int:
        """Threads each node's work gets."""

    @abstractmethod
    def probe(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` where the nodes will be built: the facts the cache keys hold come from there."""

    @abstractmethod
    def workers(self, needed: int) -> contextlib.AbstractContextManager[Workers]:
        """A pool for ``needed`` nodes (none opened when nothing is needed)."""

    def before_nodes(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` before any node runs (a check of the user's input): here, unless the nodes' workers
        do it for less."""
        return function(*args)

    def close(self) -> None:
        """Ends what ``before_nodes`` left open for the nodes when no build took it (the check refused, Ctrl-C)."""
        return None


class LocalExecutor(Executor):
    """This machine: ``jobs`` spawned processes (None: ``default_jobs``), ``cpus`` shared between them (None: the
    CPUs this process may use)."""

    def __init__(self, jobs: int | None, cpus: int | None = None) -> None:
        self.jobs, self.cpus = max(1, jobs or default_jobs(cpus or usable_cpus())), cpus
        self._opened: ProcessPoolExecutor | None = None  # by before_nodes, for the next workers()

    @property
    def threads(self) -> int:
        return max(1, (self.cpus or usable_cpus()) // self.jobs)

    def probe(self, function: Callable[..., T], *args: Any) -> T:
        return function(*args)

    def before_nodes(self, function: Callable[..., T], *args: Any) -> T:
        """In a worker that then builds the nodes: a check that loads the model imports what the nodes import (torch
        and the family's package, about 10 s of a 2-core machine), and this process then never imports them."""
        if self._opened is None:
            self._opened = _pool(self.jobs)
        return self._opened.submit(function, *args).result()

    @contextlib.contextmanager
    def workers(self, needed: int) -> Iterator[Workers]:
        if not needed:
            yield _NoWorkers()
            return
        pool, self._opened = self._opened or _pool(min(self.jobs, needed)), None
        try:
            yield _LocalWorkers(pool)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def close(self) -> None:
        """The pool ``before_nodes`` opened, ended at once (its workers ignore SIGINT and may be mid-load)."""
        pool, self._opened = self._opened, None
        if pool is not None:
            processes = list(getattr(pool, "_processes", {}).values())  # the executor keeps no public handle
            pool.shutdown(wait=False, cancel_futures=True)
            for process in processes:
                process.terminate()
                process.join()


def default_jobs(cpus: int) -> int:
    """Nodes built at once on ``cpus`` CPUs when the user does not say."""
    return SMALL_HOST_JOBS if cpus <= SMALL_HOST_CPUS else JOBS


def _pool(workers: int) -> ProcessPoolExecutor:
    """Spawned workers (started as jobs arrive), each configured by ``configured_child``."""
    return ProcessPoolExecutor(max_workers=workers, mp_context=SPAWN, initializer=configured_child)


class _LocalWorkers(Workers):
    def __init__(self, pool: ProcessPoolExecutor) -> None:
        self.pool = pool

    def submit(self, function: Callable[[NodeJob], NodeResult], job: NodeJob) -> Future[NodeResult]:
        return self.pool.submit(function, job)

    def interrupt(self, running: dict[Future[NodeResult], str]) -> None:
        """A terminal's Ctrl-C reaches the workers too; a SIGINT sent to this process alone does not, so workers
        still busy after a moment are sent one."""
        _, busy = wait(running, timeout=INTERRUPT_GRACE_S)
        if busy:
            for process in list(getattr(self.pool, "_processes", {}).values()):  # the executor keeps no public handle
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGINT)
            wait(busy, timeout=INTERRUPT_WAIT_S)


class _NoWorkers(Workers):
    """Nothing to build: nothing is started."""

    def submit(self, function: Callable[[NodeJob], NodeResult], job: NodeJob) -> Future[NodeResult]:
        raise RuntimeError("no workers were opened for this build")

    def interrupt(self, running: dict[Future[NodeResult], str]) -> None:
        return None
