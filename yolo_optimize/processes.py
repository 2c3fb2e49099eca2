"""One measurement, one process: a fresh spawned interpreter per call, so its memory, timing mode and crashes
stay its own.

Every such process keeps the memory it frees (``ALLOCATOR_ENV``, glibc's malloc settings, read at
the process's start): by default glibc hands large freed blocks back to the kernel, so PyTorch
eager, which allocates its activations afresh in every inference, page-faults them back in on the
next one, at a cost the host decides: on the Zen 4 VM its batch-1 latency moved between 45 and 113
ms from process to process with it, and stayed at 43-47 ms without it (bench/allocator.py). ONNX
Runtime and OpenVINO reuse their own arenas and do not notice. PyTorch's CPU tuning guide has
deployments swap in jemalloc or tcmalloc for the same reason. A user's own MALLOC_* settings win.
"""

from __future__ import annotations

import os
from collections.abc import Callable
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


def keep_freed_memory_in_children() -> None:
    """ALLOCATOR_ENV for every process spawned from now on, unless the environment sets those variables already
    (this interpreter's malloc is set up: only children read them)."""
    for name, value in ALLOCATOR_ENV.items():
        os.environ.setdefault(name, value)


def in_own_process(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` in a fresh spawned process (a module-level function with picklable arguments), with
    ALLOCATOR_ENV (``keep_freed_memory_in_children``)."""
    keep_freed_memory_in_children()
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        try:
            return pool.submit(function, *args).result()
        except BrokenProcessPool:
            raise RuntimeError("the runtime crashed its process") from None
