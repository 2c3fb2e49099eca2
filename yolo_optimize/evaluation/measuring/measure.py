"""Measuring one artifact in its own process: load, first inference, timed batches, peak memory, detections."""

from __future__ import annotations

import resource
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from yolo_optimize.artifact import Manifest
from yolo_optimize.evaluation.results import BatchResult, EvalSettings, Measurement
from yolo_optimize.evaluation.run_statistics import LatencyStats
from yolo_optimize.host.processes import one_line, resource_shortage
from yolo_optimize.runtime.accuracy import predict_all
from yolo_optimize.runtime.runners.base import LATENCY, Runner
from yolo_optimize.runtime.runners.cuda_phases import CudaPhases

MIN_RUNS, WARMUP_RUNS = 5, 2

Infer = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Timing:
    """How one measuring process times its artifact (``MeasureJob``): an evaluation's from its settings
    (``Timing.of``), a profile's or a study's as it needs."""

    batch_sizes: tuple[int, ...]
    min_time_s: float  # timed seconds per batch size
    threads: int
    device: str = "cpu"
    mode: str = LATENCY  # runners.base.wanted_mode's policy (an evaluation's: its --mode)
    variant: str = ""  # one of the runner's variants (Runner.variants) to run as; "": its default
    request_batch: int = 1  # images per throughput request (Runner.throughput_request_batch): a study's lever

    @classmethod
    def of(cls, settings: EvalSettings, threads: int | None = None, variant: str = "") -> Timing:
        """The part of an evaluation's ``settings`` a measuring process runs with, on ``threads`` and as ``variant``
        where the row chose them."""
        return cls(settings.batch_sizes, settings.min_time_s, threads or settings.threads, settings.device,
                   settings.mode, variant)


@dataclass(frozen=True)
class MeasureJob:
    folder: Path
    manifest: Manifest
    pixels: Path  # preprocessed uint8 images (.npy)
    timing: Timing
    predict: bool  # also run every image for the task metric (after the timed part)
    files: tuple[Path, ...] = ()  # image files for the end-to-end path (none: inference only)


def measure(job: MeasureJob) -> tuple[Measurement, list[np.ndarray] | None]:
    """Worker entry: everything about one artifact that one process can tell, its batch sizes one after the other
    (the evaluator's rounds interleave rows instead: ``interleave.py``)."""
    with activated(job) as (runner, images, started):
        run = job.timing
        batches = [replace(time_batch(runner.timed, batch_input(runner, images, b), run.min_time_s, runner.phases),
                           execution=execution_of(runner, b)) for b in run.batch_sizes]
        return finished(job, runner, images, started, batches)


@dataclass(frozen=True)
class Started:
    load_s: float
    first_inference_s: float


@contextmanager
def activated(job: MeasureJob) -> Iterator[tuple[Any, np.ndarray, Started]]:
    """The job's runner activated and run once on one image, with the images and how long both took."""
    from yolo_optimize.runtime.runners import open_runner

    images = np.load(job.pixels, mmap_mode="r")
    started = time.perf_counter()
    run = job.timing
    with open_runner(job.folder, job.manifest, device=run.device, threads=run.threads, mode=run.mode,
                     variant=run.variant, request_batch=run.request_batch) as runner:
        load_s = time.perf_counter() - started
        started = time.perf_counter()
        runner.infer(runner.input_of(images[:1]))
        yield runner, images, Started(round(load_s, 4), round(time.perf_counter() - started, 4))


def finished(job: MeasureJob, runner: Runner, images: np.ndarray, started: Started,
             batches: list[BatchResult], peak_bytes: int | None = None) -> tuple[Measurement, list[np.ndarray] | None]:
    """What this process tells of its artifact once its timed runs are done: peak memory read now (or ``peak_bytes``,
    read before the end-to-end path brought its decoder and post-processing in), before the predictions for the task
    metric, when the job wants them."""
    measurement = Measurement(started.load_s, started.first_inference_s, batches,
                              round((peak_bytes or peak_rss()) / 2**20, 1), _cuda_peak_mb(job.timing.device),
                              runner.executed_precision, runner.threads, runner.weight_bytes)
    found = predict_all(runner.metadata.model_family(), runner, images,
                        accuracy_batch(batches)) if job.predict else None
    return measurement, found


def execution_of(runner: Runner, batch: int) -> dict[str, Any]:
    """The configuration ``runner`` runs a call of ``batch`` images with, as results.json records it."""
    return {**asdict(runner.execution(batch)), "label": runner.execution(batch).label}


def batch_input(runner: Runner, images: np.ndarray, size: int) -> np.ndarray:
    """``size`` of the prepared images as ``runner`` takes them, repeated when there are fewer."""
    return runner.input_of(images[np.arange(size) % len(images)])


# What runtimes say when they refuse an input's shape (ONNX Runtime, OpenVINO, TensorRT, PyTorch), and when memory
# runs out (C++ std::bad_alloc, Python's MemoryError, malloc's ENOMEM, CUDA).
REFUSED_SHAPE = ("invalid dimensions", "invalid rank", "shape", "dimension", "outside the engine's profiles",
                 "size mismatch", "sizes of tensors")


def failure(err: BaseException, *, loading: bool = False) -> str:
    """What went wrong, as a row says it: ``unsupported`` only when the runtime refused the input's shape, ``out of
    memory`` or ``disk full`` when the machine ran out of one, ``could not load`` when the runtime refused the artifact
    itself (``loading``: it happened before the first run), else ``crashed`` (the runtime raised what it should
    not have)."""
    message = str(err).strip()
    text = f"{type(err).__name__}: {one_line(err, 160)}" if message else type(err).__name__
    if shortage := resource_shortage(err):
        return f"{shortage}: {text}"
    if any(sign in text.lower() for sign in REFUSED_SHAPE):
        return f"unsupported: {one_line(err, 160)}"
    return f"could not load: {text}" if loading else f"crashed: {text}"


def time_batch(infer: Infer, batch: np.ndarray, min_time_s: float, phases: CudaPhases | None = None) -> BatchResult:
    """Warm up, then time runs until both MIN_RUNS and ``min_time_s`` are reached; a GPU runner's ``phases``
    also split each timed run into its copies and its compute (CUDA events)."""
    size = len(batch)
    try:
        for _ in range(WARMUP_RUNS):
            infer(batch)
        if phases:
            phases.take()  # the warm-up runs' split is not kept
        samples: list[float] = []
        deadline = time.perf_counter() + min_time_s
        while len(samples) < MIN_RUNS or time.perf_counter() < deadline:
            started = time.perf_counter()
            infer(batch)
            samples.append(time.perf_counter() - started)
    except Exception as err:  # noqa: BLE001 - reported per batch size, the others still run
        return BatchResult(size, error=failure(err))
    return batch_result(size, samples, phases.take() if phases else {})


def batch_result(size: int, samples: list[float], phases: dict[str, list[float]], error: str = "", *,
                 execution: dict[str, Any] | None = None, end_to_end: list[float] | None = None) -> BatchResult:
    """Timed runs (seconds) as a BatchResult; ``phases`` (ms per run, CUDA events) kept when every phase has them;
    ``end_to_end``: the pipelined path's intervals (seconds)."""
    if error:
        return BatchResult(size, error=error, execution=execution)
    latency = LatencyStats.of(samples)
    split = {phase: LatencyStats.of([ms / 1e3 for ms in times]) for phase, times in phases.items()} \
        if phases and all(phases.values()) else None  # None: a runner that could not split these runs
    path = LatencyStats.of(end_to_end) if end_to_end else None
    return BatchResult(size, latency, _rate(size, latency), phases_ms=split, execution=execution, end_to_end=path,
                       end_to_end_ips=_rate(size, path) if path else None)


def _rate(size: int, stats: LatencyStats) -> float:
    """Images per second from the median of ``stats``."""
    return round(size / (stats.p50_ms / 1e3), 3)


def peak_rss() -> int:
    """Peak resident bytes of this process's own address space.

    ``ru_maxrss`` would not do: Linux carries it across fork and exec, so a spawned
    worker would report its parent's size. ``VmHWM`` starts afresh at exec.
    """
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def accuracy_batch(batches: list[BatchResult]) -> int:
    """The largest batch size the runtime took: predictions for the task metric run at it."""
    working = [b.batch for b in batches if not b.error]
    return max(working) if working else 1


def _cuda_peak_mb(device: str) -> float | None:
    """GPU memory of this process after its runs (allocations persist: PyTorch caches, TensorRT keeps its context
    memory), from the driver; PyTorch's reserved peak where the driver does not list the process."""
    if device != "cuda":
        return None
    import torch

    from yolo_optimize.host.devices import gpu_process_mb

    return gpu_process_mb(torch.cuda.current_device()) or round(torch.cuda.max_memory_reserved() / 2**20, 1)
