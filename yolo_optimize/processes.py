"""One measurement, one process: a fresh spawned interpreter per call, so its memory, timing mode and crashes
stay its own."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from typing import Any, TypeVar

T = TypeVar("T")


def one_line(err: BaseException, limit: int = 200) -> str:
    """An exception as the one line a report row shows."""
    text = str(err).strip()
    return text.splitlines()[0][:limit] if text else type(err).__name__


def in_own_process(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` in a fresh spawned process (a module-level function with picklable arguments)."""
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        try:
            return pool.submit(function, *args).result()
        except BrokenProcessPool:
            raise RuntimeError("the runtime crashed its process") from None
