"""One measurement, one process: a fresh spawned interpreter per call, so its memory, timing mode and crashes
stay its own."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from typing import Any, TypeVar

T = TypeVar("T")


def in_own_process(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` in a fresh spawned process (a module-level function with picklable arguments)."""
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        try:
            return pool.submit(function, *args).result()
        except BrokenProcessPool:
            raise RuntimeError("the runtime crashed its process") from None
