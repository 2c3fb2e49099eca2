"""Every row's process alive at once, taking turns in short blocks: each row samples the same stretch of time.

Why: on some hosts the speed of every multi-threaded runtime changes for seconds at a time
(README, "Reproducibility, Zen 4"), and the report compares rows in the host's fast state
(``run_statistics.fast_state``). A row measured in one go of a second or two per process can miss the
fast state in all its processes while the baseline catches it, and the speedup is then off by
up to 1.7x. Here a round starts one process per row (the baseline first) and keeps them all
alive; at each batch size the rows take turns, one block of at least BLOCK_S each (after one
warm-up run, since another process just had the cores and caches), turn after turn, so every
row's blocks are spread over the same tens of seconds and see the same host states. Each
process still measures only its own row: its load, first inference, peak memory and
predictions stay its own, as in ``measure.py``. After the inference turns at every batch size come
the same turns of the pipelined end-to-end path (``end_to_end.py``), when the job names image files;
the peak memory is the runtime's, read before the path brings its decoder and post-processing in.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from yolo_optimize.evaluation.measuring.end_to_end import EndToEnd, decoders_for, single_threaded_helpers
from yolo_optimize.evaluation.measuring.measure import (
    MIN_RUNS,
    WARMUP_RUNS,
    MeasureJob,
    activated,
    batch_input,
    batch_result,
    execution_of,
    failure,
    finished,
    peak_rss,
)
from yolo_optimize.evaluation.options import ROW_TIMEOUT_S
from yolo_optimize.evaluation.results import (
    END_TO_END,
    INFERENCE,
    BatchResult,
    Measurement,
    ThreadChoice,
    VariantChoice,
)
from yolo_optimize.evaluation.run_statistics import BLOCK_S, TIE_MARGIN
from yolo_optimize.host.busy import HostMeter
from yolo_optimize.host.processes import SPAWN, child_environment, configured_child, ended, oom_kills
from yolo_optimize.runtime.runners.base import Runner


def turns_for(min_time_s: float) -> int:
    """Turns per batch size: blocks of BLOCK_S adding up to ``min_time_s``, at least one (``take_turns`` adds
    turns for a row with fewer than MIN_RUNS runs)."""
    return max(1, math.ceil(min_time_s / BLOCK_S))


def take_turns(rows: list[LiveRow], batch: int, turns: int, show: Callable[[int], None],
               part: str = INFERENCE) -> None:
    """``turns`` turns of one block of ``part`` per row at ``batch`` (``show(turn)`` before each), and more until
    every row that takes this batch size has MIN_RUNS runs at it. What else ran on the CPUs during each block is added
    to its row's ``host`` (every row's process and this one count as the measurement's own)."""
    runs: list[int | None] = [0] * len(rows)  # None: the row failed or refuses this batch size
    meter = HostMeter(tuple(row.pid for row in rows if row.pid))
    turn = 0
    while turn < turns or any(count is not None and count < MIN_RUNS for count in runs):
        show(turn)
        for index, row in enumerate(rows):
            if (count := runs[index]) is not None:
                before = meter.read()
                taken = row.block(batch, part)
                if taken is not None:
                    row.host.add(before, meter.read())
                runs[index] = count + taken if taken is not None else None
        turn += 1




CHOICE_TURNS = 2  # blocks of each option when a row's threads or variant are chosen by measurement


class LiveRow:
    """One row's measurement process, driven block by block; ``error`` is set once it has failed: ``crashed``
    (its process died), ``timed out`` (no answer within ``timeout_s``: it is killed), or what ``serve`` reported."""

    def __init__(self, job: MeasureJob, timeout_s: float = ROW_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self.host = HostMeter().use(job.timing.threads)  # what else ran on the CPUs during its blocks (take_turns)
        self._oom_kills = oom_kills()
        self._conn, child = SPAWN.Pipe()
        self._process = SPAWN.Process(target=serve, args=(job, child), daemon=True)
        with child_environment():
            self._process.start()
        child.close()
        self.error = ""
        self._answer()  # "ready", after its load and first inference

    def block(self, batch: int, part: str = INFERENCE) -> int | None:
        """One block of ``part`` at ``batch``: the runs it timed; None when the row has failed or refuses this batch
        size (or has no end-to-end path)."""
        if self.error or not self._send(("block", (batch, part))):
            return None
        taken = self._answer()
        return taken or None

    def choose_threads(self, batch: int) -> ThreadChoice | None:
        """Its threads or one, whichever measures faster at ``batch`` (``_Timed.choose_threads``): it runs on that
        from now on. None once the row has failed."""
        if self.error:
            return None
        choice, busy = self._watched(("threads", batch))
        if choice is not None:
            self.host.threads = choice.chosen
            choice = replace(choice, busy_host=busy)
        return choice

    def choose_variant(self, batch: int) -> VariantChoice | None:
        """How its runtime runs, chosen by measurement at ``batch`` among its runner's variants
        (``_Timed.choose_variant``): it runs so from now on. None where the runner offers no choice at ``batch``, or
        once the row has failed."""
        if self.error:
            return None
        choice, busy = self._watched(("variant", batch))
        return replace(choice, busy_host=busy) if choice is not None else None

    def _watched(self, message: tuple[str, Any]) -> tuple[Any, str]:
        """The process's answer to ``message`` and, where other processes shared its CPUs meanwhile (or that could
        not be read), what ran: a choice timed on a busy host may be the host's, not the runtime's."""
        meter = HostMeter((self.pid,) if self.pid else ())
        use, before = meter.use(self.host.threads), meter.read()
        answer = self._answer() if self._send(message) else None
        use.add(before, meter.read())
        return answer, use.describe() if use.busy or use.unknown else ""

    def finish(self) -> tuple[Measurement, list[np.ndarray] | None] | None:
        """The process's measurement and predictions (None once it has failed); the process ends."""
        found = None
        if not self.error and self._send(("finish", 0)):
            found = self._answer()
        self._process.join(timeout=60)
        if self._process.is_alive():
            self._process.kill()
        return found

    @property
    def pid(self) -> int | None:
        return self._process.pid

    def _send(self, message: tuple[str, Any]) -> bool:
        """False (and the row failed) when the process is gone."""
        try:
            self._conn.send(message)
        except (BrokenPipeError, ConnectionError, OSError):
            self.error = self._crashed()
            return False
        return True

    def _answer(self) -> Any:
        if not self._conn.poll(self.timeout_s):
            self._process.kill()
            self.error = f"timed out: no answer in {self.timeout_s:g} s (the process was stopped)"
            return None
        try:
            kind, payload = self._conn.recv()
        except (EOFError, ConnectionError):
            kind, payload = "error", self._crashed()
        if kind == "error":
            self.error = payload
            return None
        return payload

    def _crashed(self) -> str:
        """Why the process died, from its exit and the kernel's count of out-of-memory kills (``processes.ended``)."""
        self._process.join(timeout=5)
        return ended(self._process.exitcode, self._oom_kills)


def serve(job: MeasureJob, conn: Connection) -> None:
    """The measurement process: activate, then answer blocks until asked to finish; once the parent has closed the
    row's pipe (it stopped the row, or it was interrupted and is ending) there is nobody to answer: it ends quietly."""
    configured_child()
    ready = False
    try:
        with activated(job) as (runner, images, started):
            timed = _Timed(runner, images, job)
            _send(conn, ("ready", None))
            ready = True
            while (request := _receive(conn))[0] != "finish":
                kind, argument = request
                _send(conn, (kind, timed.answer(kind, argument)))
            found = finished(job, runner, images, started, timed.results(), timed.inference_peak)
            timed.close()
        _send(conn, ("done", found))
    except _ParentGone:
        return
    except Exception as err:  # noqa: BLE001 - the parent marks the row failed and goes on
        with contextlib.suppress(_ParentGone):
            _send(conn, ("error", failure(err, loading=not ready)))


class _ParentGone(Exception):
    """The row's pipe is closed at the parent's end."""


def _send(conn: Connection, message: tuple[str, Any]) -> None:
    try:
        conn.send(message)
    except OSError:
        raise _ParentGone from None


def _receive(conn: Connection) -> Any:
    try:
        return conn.recv()
    except (EOFError, OSError):
        raise _ParentGone from None


class _Timed:
    """A process's timed runs per batch size, block by block: the runtime's calls, and the pipelined end-to-end path
    where the job names image files; a batch size the runtime refuses keeps its error."""

    def __init__(self, runner: Runner, images: np.ndarray, job: MeasureJob) -> None:
        self.runner = runner
        self.inputs = {size: batch_input(runner, images, size) for size in job.timing.batch_sizes}
        self.samples: dict[str, dict[int, list[float]]] = {part: {size: [] for size in job.timing.batch_sizes}
                                                           for part in (INFERENCE, END_TO_END)}
        self.phases: dict[int, dict[str, list[float]]] = {size: {} for size in job.timing.batch_sizes}
        self.errors: dict[int, str] = {}
        for size in job.timing.batch_sizes:
            try:
                for _ in range(WARMUP_RUNS):
                    runner.timed(self.inputs[size])
            except Exception as err:  # noqa: BLE001 - reported per batch size, the others still run
                self.errors[size] = failure(err)
        self.paths: dict[int, EndToEnd] = {}
        self.inference_peak: int | None = None  # VmHWM before the first end-to-end block
        if job.files:
            single_threaded_helpers(runner)
            family, imgsz = runner.metadata.model_family(), runner.metadata.side
            self.paths = {size: EndToEnd(family, runner, job.files, imgsz, size, decoders_for(runner))
                          for size in job.timing.batch_sizes}

    def block(self, size: int, part: str) -> int:
        """One block of ``part`` at ``size``: how many runs it timed; 0 for a batch size the runtime refused or a
        part not measured."""
        if size in self.errors or (part == END_TO_END and size not in self.paths):
            return 0
        if part == END_TO_END and self.inference_peak is None:
            self.inference_peak = peak_rss()
        taken = self._inference_block(size) if part == INFERENCE else self.paths[size].block(BLOCK_S)
        self.samples[part][size] += taken
        return len(taken)

    def _inference_block(self, size: int) -> list[float]:
        """One warm-up run, then runs until they add up to BLOCK_S (the cut ``run_statistics.blocks`` makes again)."""
        timed, phases = self.runner.timed, self.runner.phases
        timed(self.inputs[size])
        if phases:
            phases.take()
        taken: list[float] = []
        while sum(taken) < BLOCK_S:
            started = time.perf_counter()
            timed(self.inputs[size])
            taken.append(time.perf_counter() - started)
        if phases:
            for phase, values in phases.take().items():
                self.phases[size].setdefault(phase, []).extend(values)
        return taken

    def answer(self, kind: str, argument: Any) -> int | ThreadChoice | VariantChoice | None:
        """What the parent asked for (``LiveRow``): a block, or a choice by measurement."""
        if kind == "block":
            return self.block(*argument)
        return self.choose_threads(argument) if kind == "threads" else self.choose_variant(argument)

    def choose_threads(self, size: int) -> ThreadChoice:
        """The runner's threads or one, whichever measures faster (``_alternating``), one thread only when faster by
        more than the tie margin at the median (``run_statistics.TIE_MARGIN``: a smaller gap is noise): a loaded host
        can make PyTorch at several threads many times slower than at one (issue 44: 517 vs 21.7 ms), and a baseline
        slowed that way inflates every speedup."""
        offered = self.runner.threads
        p50 = self._alternating(size, [offered, 1], self.runner.set_threads)
        chosen = 1 if p50[1] * (1 + TIE_MARGIN) < p50[offered] else offered
        self.runner.set_threads(chosen)
        return ThreadChoice(offered, chosen, round(p50[offered], 3), round(p50[1], 3))

    def choose_variant(self, size: int) -> VariantChoice | None:
        """The fastest of the runner's variants at ``size`` (``_alternating``), its default (the first) kept unless
        another is faster by more than the tie margin; None where it offers no choice."""
        variants = list(self.runner.variants(size))
        if not variants or size in self.errors:
            return None
        p50 = self._alternating(size, variants, self.runner.use_variant)
        fastest = min(variants, key=p50.__getitem__)
        chosen = fastest if p50[fastest] * (1 + TIE_MARGIN) < p50[variants[0]] else variants[0]
        self.runner.use_variant(chosen)
        return VariantChoice(size, {variant: round(p50[variant], 3) for variant in variants}, chosen)

    def _alternating(self, size: int, options: list[Any], apply: Callable[[Any], None]) -> dict[Any, float]:
        """Each option's p50 (ms) at ``size`` over CHOICE_TURNS blocks, taken in turns in mirrored order (A B B A:
        a drifting host weighs on each alike, and each switch is made once per turn). These runs are not kept."""
        times: dict[Any, list[float]] = {option: [] for option in options}
        for turn in range(CHOICE_TURNS):
            for option in options if turn % 2 == 0 else reversed(options):
                apply(option)
                times[option] += self._inference_block(size)
        return {option: statistics.median(samples) * 1e3 for option, samples in times.items()}

    def results(self) -> list[BatchResult]:
        return [batch_result(size, self.samples[INFERENCE][size], self.phases[size], self.errors.get(size, ""),
                             execution=None if size in self.errors else self._execution(size),
                             end_to_end=self.samples[END_TO_END][size])
                for size in self.samples[INFERENCE]]

    def _execution(self, size: int) -> dict[str, Any]:
        """How ``size`` ran, with how its end-to-end path read images (``EndToEnd.settings``) where it was measured."""
        path = self.paths.get(size)
        return {**execution_of(self.runner, size), **({"end_to_end": path.settings()} if path else {})}

    def close(self) -> None:
        for path in self.paths.values():
            path.close()
