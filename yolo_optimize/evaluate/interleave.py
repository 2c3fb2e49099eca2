"""Every row's process alive at once, taking turns in short blocks: each row samples the same stretch of time.

Why: on some hosts the speed of every multi-threaded runtime changes for seconds at a time
(README, "Reproducibility, Zen 4"), and the report compares rows in the host's fast state
(``results.fast_state``). A row measured in one go of a second or two per process can miss the
fast state in all its processes while the baseline catches it, and the speedup is then off by
up to 1.7x. Here a round starts one process per row (the baseline first) and keeps them all
alive; at each batch size the rows take turns, one block of at least BLOCK_S each (after one
warm-up run, since another process just had the cores and caches), turn after turn, so every
row's blocks are spread over the same tens of seconds and see the same host states. Each
process still measures only its own row: its load, first inference, peak memory and
predictions stay its own, as in ``measure.py``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from multiprocessing import get_context
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from yolo_optimize.evaluate.measure import (
    MIN_RUNS,
    WARMUP_RUNS,
    MeasureJob,
    activated,
    batch_input,
    batch_result,
    finished,
    unsupported,
)
from yolo_optimize.evaluate.results import BLOCK_S, BatchResult, Measurement
from yolo_optimize.processes import keep_freed_memory_in_children, one_line


def turns_for(min_time_s: float) -> int:
    """Turns per batch size: blocks of BLOCK_S adding up to ``min_time_s``, at least one (``take_turns`` adds
    turns for a row with fewer than MIN_RUNS runs)."""
    return max(1, math.ceil(min_time_s / BLOCK_S))


def take_turns(rows: list[LiveRow], batch: int, turns: int, show: Callable[[int], None]) -> None:
    """``turns`` turns of one block per row at ``batch`` (``show(turn)`` before each), and more until every row
    that takes this batch size has MIN_RUNS runs at it."""
    runs: list[int | None] = [0] * len(rows)  # None: the row failed or refuses this batch size
    turn = 0
    while turn < turns or any(count is not None and count < MIN_RUNS for count in runs):
        show(turn)
        for index, row in enumerate(rows):
            if (count := runs[index]) is not None:
                taken = row.block(batch)
                runs[index] = count + taken if taken is not None else None
        turn += 1


class LiveRow:
    """One row's measurement process, driven block by block; ``error`` is set once it has failed."""

    def __init__(self, job: MeasureJob) -> None:
        keep_freed_memory_in_children()
        context = get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(target=serve, args=(job, child), daemon=True)
        self._process.start()
        child.close()
        self.error = ""
        self._answer()  # "ready", after its load and first inference

    def block(self, batch: int) -> int | None:
        """One block at ``batch``: the runs it timed; None when the row has failed or refuses this batch size."""
        if self.error:
            return None
        self._conn.send(("block", batch))
        taken = self._answer()
        return taken or None

    def finish(self) -> tuple[Measurement, list[np.ndarray] | None] | None:
        """The process's measurement and predictions (None once it has failed); the process ends."""
        found = None
        if not self.error:
            self._conn.send(("finish", 0))
            found = self._answer()
        self._process.join(timeout=60)
        if self._process.is_alive():
            self._process.kill()
        return found

    def _answer(self) -> Any:
        try:
            kind, payload = self._conn.recv()
        except (EOFError, ConnectionError):
            kind, payload = "error", "runtime failed: the runtime crashed its process"
        if kind == "error":
            self.error = payload
            return None
        return payload


def serve(job: MeasureJob, conn: Connection) -> None:
    """The measurement process: activate, then answer blocks until asked to finish."""
    try:
        with activated(job) as (runner, images, started):
            timed = _Timed(runner, images, job.batch_sizes)
            conn.send(("ready", None))
            while (request := conn.recv())[0] == "block":
                conn.send(("block", timed.block(request[1])))
            found = finished(job, runner, images, started, timed.results())
        conn.send(("done", found))
    except Exception as err:  # noqa: BLE001 - the parent marks the row failed and goes on
        conn.send(("error", f"runtime failed: {one_line(err)}"))


class _Timed:
    """A process's timed runs per batch size, block by block; a batch size the runtime refuses keeps its error."""

    def __init__(self, runner: Any, images: np.ndarray, batch_sizes: tuple[int, ...]) -> None:
        self.runner = runner
        self.inputs = {size: batch_input(images, size) for size in batch_sizes}
        self.samples: dict[int, list[float]] = {size: [] for size in batch_sizes}
        self.phases: dict[int, dict[str, list[float]]] = {size: {} for size in batch_sizes}
        self.errors: dict[int, str] = {}
        for size in batch_sizes:
            try:
                for _ in range(WARMUP_RUNS):
                    runner.infer(self.inputs[size])
            except Exception as err:  # noqa: BLE001 - reported per batch size, the others still run
                self.errors[size] = unsupported(err)

    def block(self, size: int) -> int:
        """One warm-up run, then runs until they add up to BLOCK_S (the cut ``results.blocks`` makes again): how
        many; 0 for a batch size the runtime refused."""
        if size in self.errors:
            return 0
        infer, phases = self.runner.infer, self.runner.phases
        infer(self.inputs[size])
        if phases:
            phases.take()
        taken: list[float] = []
        while sum(taken) < BLOCK_S:
            started = time.perf_counter()
            infer(self.inputs[size])
            taken.append(time.perf_counter() - started)
        self.samples[size] += taken
        if phases:
            for phase, values in phases.take().items():
                self.phases[size].setdefault(phase, []).extend(values)
        return len(taken)

    def results(self) -> list[BatchResult]:
        return [batch_result(size, self.samples[size], self.phases[size], self.errors.get(size, ""))
                for size in self.samples]

