"""One measurement, one process: a fresh spawned interpreter per call, so its memory, timing mode and crashes
stay its own.

Every such process keeps the memory it frees (``ALLOCATOR_ENV``, glibc's malloc settings, read at
the process's start): by default glibc hands large freed blocks back to the kernel, so PyTorch
eager, which allocates its activations afresh in every inference, page-faults them back in on the
next one, at a cost the host decides: on the Zen 4 VM its batch-1 latency moved between 45 and 113
ms from process to process with it, and stayed at 43-47 ms without it (bench/allocator.py). ONNX
Runtime and OpenVINO reuse their own arenas and do not notice. PyTorch's CPU tuning guide has
deployments swap in jemalloc or tcmalloc for the same reason. A user's own MALLOC_* settings win.
The settings are in the environment only while a child starts (``child_environment``): the parent's
own environment, and every process it starts later for other reasons, stay as they were.

Every child applies ``runtime_env.configure`` before anything else (``configured_child``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from typing import Any, TypeVar

T = TypeVar("T")

ALLOCATOR_ENV = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(2**40)}  # no mmap'd blocks, never trimmed


def one_line(err: BaseException, limit: int = 200) -> str:
    """An exception as the one line a report row shows."""
    text = str(err).strip()
    return text.splitlines()[0][:limit] if text else type(err).__name__


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


def configured_child() -> None:
    """What every process this package starts runs first (a pool's initializer, a process target's first line)."""
    from yolo_optimize.runtime_env import configure

    configure()


def in_own_process(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` in a fresh spawned process (a module-level function with picklable arguments), with
    ALLOCATOR_ENV (``child_environment``) and the package's process settings (``configured_child``)."""
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn"), initializer=configured_child) as pool:
        try:
            with child_environment():
                future = pool.submit(function, *args)
            return future.result()
        except BrokenProcessPool:
            raise RuntimeError("the runtime crashed its process") from None
