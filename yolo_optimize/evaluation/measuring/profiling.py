"""Explaining one artifact's numbers: per-layer time and hotspots, a trace, the end-to-end breakdown, thread
scaling and energy (``optimize profile``, and every artifact under ``optimize eval --profile``).

Every part runs in a fresh process, like every measurement; the parts taken at the row's own thread count
(per-layer time, the forward time around it, the breakdown) share one, so the model is loaded once for them, and
the forward time doubles as the thread-scaling point at that count. Per-layer times come from the
runtime's own profiler (runners' ``profile_layers``), which also times its profiled passes (what the layers
add up to); both are set against the forward time measured without a profiler just before and just after it,
in the same host state (``LayerAttempt``);
the breakdown times the path a deployment runs, image file to
kept predictions: reading (the family's decoder), preparing (resize/letterbox, layout),
inference, post-processing (the family's ``postprocess``: NMS at 0.25 for detectors). What a profile holds is
evaluation/profiles.py; its files are written by reporting/profile_page.py.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from yolo_optimize.artifact import Manifest, scratch_folder
from yolo_optimize.evaluation.facts import peak_precision
from yolo_optimize.evaluation.measuring.measure import MeasureJob, Timing, batch_input, measure, time_batch
from yolo_optimize.evaluation.profiles import (
    PROFILE_SCHEMA,
    STAGES,
    TOP,
    ArtifactProfile,
    Breakdown,
    Hotspot,
    LayerAttempt,
    LayerRate,
    ThreadPoint,
)
from yolo_optimize.evaluation.run_statistics import BLOCK_S
from yolo_optimize.formats import format_named
from yolo_optimize.host.cpu import usable_cpus
from yolo_optimize.host.energy import Energy, measure_energy, package_domains
from yolo_optimize.host.processes import in_own_process, one_line
from yolo_optimize.limits.peaks import MachineLimits
from yolo_optimize.metadata import ArtifactMetadata
from yolo_optimize.runtime.layers import LayerProfile, LayerTime
from yolo_optimize.runtime.runners.base import Runner

PROFILED_RUNS = 10
LAYER_ATTEMPTS = 4  # profiles taken at most, until the host's speed held across one
PROFILE_IMAGES = 16  # image files eval --profile runs each artifact's profile on
BREAKDOWN_BATCHES = 4  # timed batches per batch size, after one warm-up batch
ENERGY_SECONDS = 3.0


@dataclass(frozen=True)
class Profiling:
    """What ``eval --profile`` profiles with besides its settings: the measured peaks (each weighted layer's
    utilization), and what writes a profile's files as soon as it is taken (reporting's, which measuring may not
    import: the evaluation's session hands it in)."""

    limits: MachineLimits | None
    write: Callable[[ArtifactProfile, Path], object]


@dataclass(frozen=True)
class ProfileRequest:
    folder: Path
    manifest: Manifest
    images: tuple[Path, ...]  # image files: the breakdown reads them, the rest uses them prepared
    batch_size: int
    largest_batch: int  # the breakdown is taken at 1 and at this size
    threads: int
    out: Path  # this artifact's profile folder
    min_time_s: float = 1.0  # timed seconds per forward-time and thread-scaling point
    variant: str = ""  # how the runtime runs (Runner.variants): the evaluation's choice for the row, else its default
    limits: MachineLimits | None = None  # measured peaks, for each weighted layer's utilization


@dataclass(frozen=True)
class LayerTiming:
    """The layer worker's answer: the reported profile and every attempt that led to it."""

    forward_ms: float  # the median of the reported attempt's bracketing runs
    executed: str
    layers: list[LayerTime]
    trace_note: str
    attempts: list[LayerAttempt]
    reported_attempt: int  # index into attempts; -1 where no profile was taken
    unavailable: dict[str, str]

    @property
    def profiled_pass_ms(self) -> float:
        return self.attempts[self.reported_attempt].profiled_pass_ms if self.attempts else float("nan")


def profile_artifact(request: ProfileRequest) -> ArtifactProfile:
    """Every part for one artifact; its files go to ``request.out``."""
    request.out.mkdir(parents=True, exist_ok=True)
    with scratch_folder("yolo-optimize-profile-") as work:
        pixels = _prepared(request, work)
        timing, breakdown = in_own_process(_row_threads_worker, request, pixels)
        threads = [_forward_point(request, timing) if t == request.threads else _thread_point(request, pixels, t)
                   for t in thread_counts(usable_cpus())]
        domains, no_energy = package_domains()
        energy = in_own_process(_energy_worker, request, pixels) if domains else Energy(None, [], no_energy)
    executed, layers = timing.executed, timing.layers
    manifest = request.manifest
    runtime = format_named(manifest.target).kernels if manifest.target else None
    rates = _layer_rates(layers, runtime, request.limits)
    weighted_ms, weighted_gflops = sum(r.ms for r in rates), sum(r.gflops for r in rates)
    precision = peak_precision(executed)
    peak = request.limits.peak_gops(runtime, precision) if request.limits and runtime else None
    peak_of = f"{runtime} {precision}" if peak else f"not measured: {runtime or manifest.target} {precision}"
    utilization = round(weighted_gflops / weighted_ms * 1e3 / peak, 4) if peak and weighted_ms else None
    return ArtifactProfile(PROFILE_SCHEMA, manifest.model_id, f"{manifest.target}-{manifest.precision}", executed,
                           request.batch_size, timing.forward_ms, _layer_sum(layers), timing.profiled_pass_ms,
                           timing.attempts,
                           timing.reported_attempt, layers,
                           _by_kind(layers), _hotspots(layers), rates, round(weighted_gflops, 4), utilization,
                           peak_of,
                           "trace.json" if layers else "", timing.trace_note, breakdown, threads, energy,
                           timing.unavailable)


def _layer_sum(layers: list[LayerTime]) -> float:
    return round(sum(layer.ms for layer in layers), 3)


def _by_kind(layers: list[LayerTime]) -> dict[str, float]:
    """Milliseconds per layer type, largest first."""
    by_kind: dict[str, float] = {}
    for layer in layers:
        by_kind[layer.kind] = round(by_kind.get(layer.kind, 0.0) + layer.ms, 4)
    return dict(sorted(by_kind.items(), key=lambda kind: -kind[1]))


def _hotspots(layers: list[LayerTime]) -> list[Hotspot]:
    """The TOP slowest layers with their share of the per-layer sum."""
    total = sum(layer.ms for layer in layers)
    slowest = sorted(layers, key=lambda layer: -layer.ms)[:TOP]
    if not total:
        return []
    return [Hotspot(x.name, x.kind, x.ms, round(x.ms / total, 4), x.executed, x.kernel) for x in slowest]


def _layer_rates(layers: list[LayerTime], runtime: str | None, limits: MachineLimits | None) -> list[LayerRate]:
    """Every timed layer whose operations the runtime's graph gives, slowest first."""
    rates = []
    for layer in sorted(layers, key=lambda layer: -layer.ms):
        if not layer.gflops or layer.ms <= 0:
            continue
        achieved = layer.gflops / layer.ms * 1e3
        peak = limits.peak_gops(runtime, peak_precision(layer.executed)) if limits and runtime else None
        rates.append(LayerRate(layer.name, layer.kind, layer.ms, round(layer.gflops, 5), round(achieved, 2),
                               round(achieved / peak, 4) if peak else None, layer.executed))
    return rates


def thread_counts(cores: int) -> list[int]:
    """1, 2, 4, ... up to the core count, and the core count itself."""
    counts = [1 << i for i in range(cores.bit_length()) if 1 << i <= cores]
    return counts + ([cores] if counts[-1] != cores else [])


def _prepared(request: ProfileRequest, work: Path) -> Path:
    """The images preprocessed once, as the workers memory-map them."""
    metadata = ArtifactMetadata.of(request.manifest)
    family, imgsz = metadata.model_family(), metadata.side
    pixels = work / "pixels.npy"
    np.save(pixels, np.stack([family.preprocess(p, imgsz).pixels for p in request.images]))
    return pixels


def _row_threads_worker(request: ProfileRequest, pixels_path: Path) -> tuple[LayerTiming, list[Breakdown]]:
    """What is taken at the row's own thread count, in one process: the per-layer profile, then the breakdown (the
    profilers run on their own session or compiled model, so the runner the breakdown times is the one a deployment
    loads)."""
    from yolo_optimize.runtime.runners import open_runner

    with open_runner(request.folder, request.manifest, threads=request.threads,
                     variant=request.variant) as runner:
        timing = _layer_timing(request, runner, np.load(pixels_path))
        return timing, [_breakdown(request, runner, size) for size in dict.fromkeys((1, request.largest_batch))]


def _layer_timing(request: ProfileRequest, runner: Runner, pixels: np.ndarray) -> LayerTiming:
    """Per-layer time with the runtime's own profiler, bracketed by forward time without one; profiled again
    (at most LAYER_ATTEMPTS times) while the host's speed changed between the brackets. Every attempt is kept;
    the one whose brackets agree best is reported (the first steady one), with its trace."""
    bracket_s = max(request.min_time_s / 2, BLOCK_S)  # a bracket shorter than a block is noise, not a state
    taken: list[tuple[LayerAttempt, LayerProfile, float]] = []
    batch = batch_input(runner, pixels, request.batch_size)
    executed = runner.executed_precision
    try:
        while len(taken) < LAYER_ATTEMPTS and not (taken and taken[-1][0].steady):
            taken.append(_bracketed_profile(runner, batch, bracket_s, _attempt_trace(request.out, len(taken))))
    except NotImplementedError as err:
        forward_ms = _median(_forward_samples(runner, batch, request.min_time_s))
        return LayerTiming(forward_ms, executed, [], "", [], -1, {"layers": str(err), "trace": str(err)})
    reported = min(range(len(taken)), key=lambda index: taken[index][0].disagreement)
    _keep_trace(request.out, reported, len(taken))
    _, profile, forward_ms = taken[reported]
    return LayerTiming(forward_ms, executed, profile.layers, profile.trace_note, [t[0] for t in taken], reported, {})


def _attempt_trace(out: Path, attempt: int) -> Path:
    return out / f"trace-attempt{attempt}.json"


def _keep_trace(out: Path, reported: int, attempts: int) -> None:
    """The reported attempt's trace becomes trace.json; the others' go."""
    for attempt in range(attempts):
        trace = _attempt_trace(out, attempt)
        if attempt == reported:
            trace.replace(out / "trace.json")
        else:
            trace.unlink(missing_ok=True)


def _bracketed_profile(runner: Runner, batch: np.ndarray, bracket_s: float,
                       trace: Path) -> tuple[LayerAttempt, LayerProfile, float]:
    """Forward runs, the profile, forward runs: the attempt, its profile and the median of both brackets' runs."""
    before = _forward_samples(runner, batch, bracket_s)
    profile = runner.profile_layers(batch, PROFILED_RUNS, trace)
    after = _forward_samples(runner, batch, bracket_s)
    attempt = LayerAttempt(_median(before), _median(after), _layer_sum(profile.layers), profile.pass_ms)
    return attempt, profile, _median(before + after)


def _forward_samples(runner: Runner, batch: np.ndarray, seconds: float) -> list[float]:
    """Timed runs without a profiler (ms); none where the runner cannot take the batch."""
    latency = time_batch(runner.infer, batch, seconds).latency
    return latency.samples_ms if latency else []


def _median(samples_ms: list[float]) -> float:
    return round(float(np.median(samples_ms)), 4) if samples_ms else float("nan")


def _breakdown(request: ProfileRequest, runner: Runner, size: int) -> Breakdown:
    """The deployed path over ``BREAKDOWN_BATCHES`` batches of ``size`` image files, each stage timed apart; the
    post-processing's first-call costs are paid in the warm-up batch, never in a timed one."""
    family, imgsz = runner.metadata.model_family(), runner.metadata.side
    files = [request.images[i % len(request.images)] for i in range(size * (BREAKDOWN_BATCHES + 1))]
    spent = dict.fromkeys(STAGES, 0.0)
    started = 0.0
    for index in range(BREAKDOWN_BATCHES + 1):
        if index == 1:  # the first batch warms every stage up
            spent, started = dict.fromkeys(STAGES, 0.0), time.perf_counter()
        chunk = files[index * size:(index + 1) * size]
        clock = time.perf_counter()
        decoded = [family.read_image(p) for p in chunk]
        clock = _lap(spent, "read", clock)
        batch = runner.input_of(np.stack([family.prepare(image, imgsz).pixels for image in decoded]))
        clock = _lap(spent, "prepare", clock)
        raw = runner.infer(batch)
        clock = _lap(spent, "infer", clock)
        family.postprocess(raw)
        _lap(spent, "postprocess", clock)
    wall = time.perf_counter() - started
    images = size * BREAKDOWN_BATCHES
    total = sum(spent.values())
    return Breakdown(size, {k: round(v / images, 6) for k, v in spent.items()},
                     {k: round(v / total, 4) for k, v in spent.items()}, round(wall / images, 6),
                     round(images / wall, 2), round(images / spent["infer"], 2))


def _lap(spent: dict[str, float], stage: str, clock: float) -> float:
    now = time.perf_counter()
    spent[stage] += now - clock
    return now


def _forward_point(request: ProfileRequest, timing: LayerTiming) -> ThreadPoint:
    """The row's own thread count: the forward time measured around its layer profile (same batch, same threads)."""
    if math.isnan(timing.forward_ms):  # the runner took no run of this batch size
        return ThreadPoint(request.threads, None, None, "no timed run at this batch size")
    return ThreadPoint(request.threads, timing.forward_ms, round(request.batch_size / timing.forward_ms * 1e3, 3))


def _thread_point(request: ProfileRequest, pixels: Path, threads: int) -> ThreadPoint:
    timing = Timing((request.batch_size,), request.min_time_s, threads, variant=request.variant)
    job = MeasureJob(request.folder, request.manifest, pixels, timing, predict=False)
    try:
        measurement, _ = in_own_process(measure, job)
    except Exception as err:  # noqa: BLE001 - one thread count failing leaves the others
        return ThreadPoint(threads, None, None, one_line(err))
    result = measurement.batches[0]
    return ThreadPoint(threads, result.latency.p50_ms if result.latency else None, result.throughput_ips, result.error)


def _energy_worker(request: ProfileRequest, pixels_path: Path) -> Energy:
    """Joules per image over ENERGY_SECONDS of inference at the profiled batch size."""
    from yolo_optimize.runtime.runners import open_runner

    with open_runner(request.folder, request.manifest, threads=request.threads,
                     variant=request.variant) as runner:
        batch = batch_input(runner, np.load(pixels_path), request.batch_size)
        runner.infer(batch)  # warm-up

        def work() -> int:
            done, deadline = 0, time.perf_counter() + ENERGY_SECONDS
            while time.perf_counter() < deadline:
                runner.infer(batch)
                done += len(batch)
            return done

        return measure_energy(work)
