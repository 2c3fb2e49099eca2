"""One measurement, one process: a fresh spawned interpreter per call, so its memory, timing mode and crashes
stay its own.

Every such process keeps the memory it frees (``ALLOCATOR_ENV``, glibc's malloc settings, read at
the process's start): by default glibc hands large freed blocks back to the kernel, so PyTorch
eager, which allocates its activations afresh in every inference, page-faults them back in on the
next one, at a cost the host decides: on the Zen 4 VM its batch-1 latency moved between 45 and 113
ms from process to process with it, and stayed at 43-47 ms without it (bench/archive/fastest_artifact/allocator.py).
ONNX Runtime and OpenVINO reuse their own arenas and do not notice. PyTorch's CPU tuning guide has deployments swap in
jemalloc or tcmalloc for the same reason. A user's own MALLOC_* settings win.
The settings are in the environment only while a child starts (``child_environment``): the parent's
own environment, and every process it starts later for other reasons, stay as they were.

Every child applies ``environment.configure`` before anything else (``configured_child``), and exits as soon as
the process that started it is gone, however it went (SIGKILL included): no worker outlives its build or
evaluation. Children are started by ``SPAWN``, multiprocessing's spawn that never runs the caller's
``__main__`` again (the API is called from unguarded scripts, notebooks and ``python -c``/stdin), and end as forked
children do, without the interpreter's teardown.
"""

from __future__ import annotations

import contextlib
import errno
import multiprocessing
import os
import re
import signal
import sys
import threading
import types
from collections.abc import Callable, Iterator
from multiprocessing.connection import wait
from multiprocessing.context import SpawnContext, SpawnProcess
from pathlib import Path
from typing import Any, NoReturn, TypeVar

T = TypeVar("T")

ALLOCATOR_ENV = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(2**40)}  # no mmap'd blocks, never trimmed


ANSI_CODE = re.compile(r"\x1b\[[0-9;]*m")


def one_line(err: BaseException, limit: int | None = 200) -> str:
    """An exception as the one line a report row shows (its first ``limit`` characters; None: all of them), without
    the terminal colour codes some tools put in their messages (torch.onnx's)."""
    text = ANSI_CODE.sub("", str(err)).strip()
    return text.splitlines()[0][:limit] if text else type(err).__name__


OUT_OF_MEMORY, DISK_FULL = "out of memory", "disk full"
_OUT_OF_MEMORY_SIGNS = ("out of memory", "bad_alloc", "cannot allocate memory", "can't allocate memory", "memoryerror",
                        "failed to allocate")
_DISK_FULL_SIGNS = ("no space left on device", "disk quota exceeded")


def resource_shortage(err: BaseException) -> str | None:
    """OUT_OF_MEMORY or DISK_FULL when ``err`` says this machine ran out of one (whichever tool raised it, in its own
    words), else None: the class a failure's one line starts with."""
    text = f"{type(err).__name__}: {err}".lower()
    if isinstance(err, MemoryError) or any(sign in text for sign in _OUT_OF_MEMORY_SIGNS):
        return OUT_OF_MEMORY
    disk = isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT)
    if disk or any(sign in text for sign in _DISK_FULL_SIGNS):
        return DISK_FULL
    return None


def classified(err: BaseException) -> str:
    """A failure in one whole line, ``out of memory: `` or ``disk full: `` first where the machine ran out of one."""
    shortage, line = resource_shortage(err), one_line(err, limit=None)
    return f"{shortage}: {line}" if shortage else line


def oom_kills() -> int | None:
    """Processes the kernel's out-of-memory killer has ended since boot, any cgroup's included (``/proc/vmstat``;
    None where the kernel does not count them)."""
    try:
        found = re.search(r"^oom_kill (\d+)$", Path("/proc/vmstat").read_text(), re.MULTILINE)
    except OSError:
        return None
    return int(found.group(1)) if found else None


def ended(exitcode: int | None, oom_kills_before: int | None) -> str:
    """How a child ended, in one line: ``out of memory`` when the kernel's out-of-memory killer ended a process since
    ``oom_kills_before`` was read and this one was killed (or its exit is unknown), else ``crashed`` with the signal
    or exit code."""
    killed = exitcode is None or exitcode == -signal.SIGKILL
    if killed and oom_kills_before is not None and (oom_kills() or 0) > oom_kills_before:
        return f"{OUT_OF_MEMORY}: the kernel's out-of-memory killer ended the process"
    if exitcode is None:
        return "crashed: the process died"
    if exitcode < 0:
        return f"crashed: the process was killed by {signal.Signals(-exitcode).name}"
    return f"crashed: the process died (exit code {exitcode})"


@contextlib.contextmanager
def child_environment() -> Iterator[None]:
    """ALLOCATOR_ENV, where the environment does not set those variables already, for the processes started inside
    (glibc reads them when a process starts); removed again afterwards."""
    added = {name: value for name, value in ALLOCATOR_ENV.items() if name not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


def allocator_settings() -> dict[str, str]:
    """The MALLOC_* values the measuring processes start with: the user's own where set, else ALLOCATOR_ENV."""
    return {name: os.environ.get(name, value) for name, value in ALLOCATOR_ENV.items()}


_MAIN_SWAP = threading.Lock()


@contextlib.contextmanager
def _callers_main_hidden() -> Iterator[None]:
    """``sys.modules['__main__']`` is a bare module while a child starts, as ``runpy`` swaps it to run one.

    Why: spawn hands the child the parent's main script (or module) to import again first, so that
    functions defined there can be unpickled. Ours live in this package, so that only costs: an
    unguarded script (the README's example saved to a file) runs again in every worker and dies in
    multiprocessing's bootstrap check, and a main read from stdin cannot be imported at all.
    """
    with _MAIN_SWAP:
        callers = sys.modules["__main__"]
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            yield
        finally:
            sys.modules["__main__"] = callers


class _OwnProcess(SpawnProcess):
    """A spawned process that imports only what its target needs, never the caller's ``__main__``, and ends as a
    forked one does."""

    @staticmethod
    def _Popen(process_obj: Any) -> Any:  # noqa: N802 - multiprocessing's name
        with _callers_main_hidden():
            return SpawnProcess._Popen(process_obj)

    def _bootstrap(self, parent_sentinel: int | None = None) -> NoReturn:
        """The target, multiprocessing's own cleanup (its finalizers, this process's children) and the flushed
        standard streams, then ``os._exit``, as multiprocessing ends a forked child: spawn's ``sys.exit`` would
        tear the interpreter down module by module, about 2 s of a CPU once yolov5n is loaded and 2.5 s after its
        ONNX export (bench/archive/test_suite_time/README.md, "How a child ends"), which the parent waits for at
        every worker's and row's end."""
        code = super()._bootstrap(parent_sentinel)  # type: ignore[misc]  # typeshed omits _bootstrap
        _flush_native_streams()
        os._exit(code)


def _flush_native_streams() -> None:
    """C's buffered output streams (a native library's printf, C++'s cout), which ``exit`` flushes and ``os._exit``
    does not: without this, what a runtime wrote to a piped stdout (fully buffered there) since its last flush would
    be lost."""
    if os.name == "posix":
        import ctypes

        ctypes.CDLL(None).fflush(None)


@contextlib.contextmanager
def native_output_to(log: Path, descriptors: tuple[int, ...] = (1, 2)) -> Iterator[None]:
    """``descriptors`` (stdout and stderr by default) written to ``log`` for the block, C-level writes included: a
    tool's own prints go to its node's log instead of the live display, and a runtime's C++ report (NCNN's per-layer
    timer on stderr) can be read back."""
    log.parent.mkdir(parents=True, exist_ok=True)
    saved = [os.dup(descriptor) for descriptor in descriptors]
    with open(log, "w") as handle:
        for descriptor in descriptors:
            os.dup2(handle.fileno(), descriptor)
        try:
            yield
        finally:
            _flush_native_streams()
            for descriptor, copy in zip(descriptors, saved, strict=True):
                os.dup2(copy, descriptor)
                os.close(copy)


class _OwnSpawnContext(SpawnContext):
    Process = _OwnProcess


SPAWN = _OwnSpawnContext()  # the context of every process this package starts (pools and single processes)


def configured_child() -> None:
    """What every process this package starts runs first (a pool's initializer, a process target's first line): the
    package's settings and, in a process multiprocessing started (not a Ray worker, whose runtime owns its
    signals and watches its parent), an exit as soon as its parent is gone (``_exit_with``) and SIGINT
    ignored: a terminal's Ctrl-C reaches the whole process group, and the parent decides what stops (a build
    node that must clean up takes it while it builds, ``node_worker.build_node``)."""
    from yolo_optimize.host.environment import configure

    parent = multiprocessing.parent_process()
    if parent is not None:
        _exit_with(parent)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    configure()


ORPHAN_EXIT = 70  # the exit code of a child whose parent died


def _exit_with(parent: Any) -> None:
    """A thread that ends this process when its parent is gone: the pipe multiprocessing keeps open from parent to
    child (``parent.sentinel``) reads end-of-file once the parent is gone, whether it exited, crashed or was killed
    with SIGKILL. Without it a build's idle pool worker waits on its job queue forever (it holds the queue's other
    end itself), holding its memory, and the resource tracker with it. A staging folder a killed node leaves is
    swept by the next build (``artifact.sweep_leftovers``)."""

    def watch() -> None:
        wait([parent.sentinel])
        os._exit(ORPHAN_EXIT)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def in_own_process(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` in a fresh spawned process (a module-level function with picklable arguments), with
    ALLOCATOR_ENV (``child_environment``) and the package's process settings (``configured_child``). What it raises
    is raised here; a process that dies is a RuntimeError saying how (``ended``); Ctrl-C here ends the process at
    once (it ignores SIGINT itself, as every child does)."""
    receiver, sender = SPAWN.Pipe(duplex=False)
    process = SPAWN.Process(target=_call_and_send, args=(sender, function, args), daemon=True)
    before = oom_kills()
    with child_environment():
        process.start()
    sender.close()
    try:
        kind, payload = receiver.recv()
    except EOFError:
        process.join()
        raise RuntimeError(ended(process.exitcode, before)) from None
    except BaseException:  # Ctrl-C: the child does not wait for its result to be read
        process.kill()
        raise
    finally:
        receiver.close()
        process.join()
    if kind == "error":
        raise payload
    return payload


def _call_and_send(sender: Any, function: Callable[..., Any], args: tuple[Any, ...]) -> None:
    """The child's side of ``in_own_process``."""
    configured_child()
    try:
        answer = ("ok", function(*args))
    except Exception as err:  # noqa: BLE001 - raised again in the parent
        answer = ("error", err)
    try:
        sender.send(answer)
    except OSError:  # the parent is gone (interrupted): nobody to answer
        return
    except Exception:  # noqa: BLE001 - an exception that does not pickle: its type and words
        with contextlib.suppress(OSError):
            sender.send(("error", RuntimeError(f"{type(answer[1]).__name__}: {answer[1]}")))
