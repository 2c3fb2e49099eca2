"""Explaining one artifact's numbers: per-layer time and hotspots, a trace, the end-to-end breakdown, thread
scaling and energy (``optimize profile``, and every artifact under ``optimize eval --profile``).

Every part runs in its own process, like every measurement. Per-layer times come from the
runtime's own profiler (runners' ``profile_layers``) and are set against the forward time
measured without a profiler; the breakdown times the path a deployment runs, image file to
kept predictions: reading (the family's decoder), preparing (resize/letterbox, layout),
inference, post-processing (the family's ``postprocess``: NMS at 0.25 for detectors).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from yolo_optimize.artifact import Manifest
from yolo_optimize.evaluate.layers import LayerTime
from yolo_optimize.evaluate.measure import MeasureJob, measure, time_batch
from yolo_optimize.families import family_named
from yolo_optimize.images import to_input
from yolo_optimize.machine.energy import Energy, measure_energy, package_domains
from yolo_optimize.processes import in_own_process, one_line

PROFILE_SCHEMA = 1
PROFILED_RUNS = 10
PROFILE_IMAGES = 16  # image files eval --profile runs each artifact's profile on
BREAKDOWN_BATCHES = 4  # timed batches per batch size, after one warm-up batch
ENERGY_SECONDS = 3.0
TOP = 10
STAGES = ("read", "prepare", "infer", "postprocess")


@dataclass(frozen=True)
class ProfileRequest:
    folder: Path
    manifest: Manifest
    images: tuple[Path, ...]  # image files: the breakdown reads them, the rest uses them prepared
    batch_size: int
    largest_batch: int  # the breakdown is taken at 1 and at this size
    threads: int
    out: Path  # this artifact's profile folder


@dataclass(frozen=True)
class Hotspot:
    name: str
    kind: str
    ms: float
    share: float  # of the per-layer sum
    executed: str
    kernel: str


@dataclass(frozen=True)
class Breakdown:
    """Seconds per image in each stage of the deployed path, and the end-to-end rate next to inference alone."""

    batch: int
    seconds_per_image: dict[str, float]  # read, prepare, infer, postprocess
    shares: dict[str, float]
    end_to_end_s_per_image: float  # wall time around the whole loop
    end_to_end_ips: float
    infer_ips: float


@dataclass(frozen=True)
class ThreadPoint:
    threads: int
    latency_p50_ms: float | None
    throughput_ips: float | None
    error: str = ""


@dataclass
class ArtifactProfile:
    schema: int
    model: str
    artifact: str
    executed_precision: str
    batch_size: int
    forward_ms: float  # median latency without a profiler
    layers_ms: float  # the per-layer sum under the profiler
    layers: list[LayerTime]
    by_kind_ms: dict[str, float]
    hotspots: list[Hotspot]
    trace: str  # file name in the profile folder
    trace_note: str
    breakdown: list[Breakdown]
    threads: list[ThreadPoint]
    energy: Energy
    unavailable: dict[str, str] = field(default_factory=dict)  # part -> why it was not measured


def profile_artifact(request: ProfileRequest) -> ArtifactProfile:
    """Every part for one artifact; its files go to ``request.out``."""
    request.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="yolo-optimize-profile-") as work:
        pixels = _prepared(request, Path(work))
        layered = in_own_process(_layer_worker, request, pixels)
        breakdown = [in_own_process(_breakdown_worker, request, b) for b in dict.fromkeys((1, request.largest_batch))]
        threads = [_thread_point(request, pixels, t) for t in thread_counts(os.cpu_count() or 1)]
        domains, no_energy = package_domains()
        energy = in_own_process(_energy_worker, request, pixels) if domains else Energy(None, [], no_energy)
    forward_ms, executed, layers, trace_note, unavailable = layered
    manifest = request.manifest
    return ArtifactProfile(PROFILE_SCHEMA, manifest.model_id, f"{manifest.target}-{manifest.precision}", executed,
                           request.batch_size, forward_ms, round(sum(layer.ms for layer in layers), 3), layers,
                           _by_kind(layers), _hotspots(layers), "trace.json" if layers else "", trace_note,
                           breakdown, threads, energy, unavailable)


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
    return [Hotspot(x.name, x.kind, x.ms, round(x.ms / total, 4), x.executed, x.kernel) for x in slowest] if total else []


def write_profile(profile: ArtifactProfile, out: Path) -> list[Path]:
    """profile.json and profile.md beside the trace the runner wrote."""
    files = [out / "profile.json", out / "profile.md"]
    files[0].write_text(json.dumps(asdict(profile), indent=2) + "\n")
    files[1].write_text(profile_markdown(profile))
    return files + ([out / profile.trace] if profile.trace else [])


def thread_counts(cores: int) -> list[int]:
    """1, 2, 4, ... up to the core count, and the core count itself."""
    counts = [1 << i for i in range(cores.bit_length()) if 1 << i <= cores]
    return counts + ([cores] if counts[-1] != cores else [])


def _prepared(request: ProfileRequest, work: Path) -> Path:
    """The images preprocessed once, as the workers memory-map them."""
    family = family_named(request.manifest.metadata["family"])
    imgsz = int(request.manifest.metadata["imgsz"][0])
    pixels = work / "pixels.npy"
    np.save(pixels, np.stack([family.preprocess(p, imgsz).pixels for p in request.images]))
    return pixels


def _batch(pixels: np.ndarray, size: int) -> np.ndarray:
    return to_input(np.resize(pixels, (size, *pixels.shape[1:])))  # repeats the images when there are fewer


LayerResult = tuple[float, str, list[LayerTime], str, dict[str, str]]  # forward ms, executed, layers, trace note, why not


def _layer_worker(request: ProfileRequest, pixels_path: Path) -> LayerResult:
    """Forward time without a profiler, then per-layer time with the runtime's own."""
    from yolo_optimize.evaluate.runners import open_runner

    batch = _batch(np.load(pixels_path), request.batch_size)
    with open_runner(request.folder, request.manifest, threads=request.threads) as runner:
        timed = time_batch(runner.infer, batch, 1.0)
        forward_ms = timed.latency.p50_ms if timed.latency else float("nan")
        executed = runner.executed_precision
        try:
            profile = runner.profile_layers(batch, PROFILED_RUNS, request.out / "trace.json")
        except NotImplementedError as err:
            return forward_ms, executed, [], "", {"layers": str(err), "trace": str(err)}
    return forward_ms, executed, profile.layers, profile.trace_note, {}


def _breakdown_worker(request: ProfileRequest, size: int) -> Breakdown:
    """The deployed path over ``BREAKDOWN_BATCHES`` batches of ``size`` image files, each stage timed apart."""
    from yolo_optimize.evaluate.runners import open_runner

    family = family_named(request.manifest.metadata["family"])
    imgsz = int(request.manifest.metadata["imgsz"][0])
    files = [request.images[i % len(request.images)] for i in range(size * (BREAKDOWN_BATCHES + 1))]
    spent = dict.fromkeys(STAGES, 0.0)
    with open_runner(request.folder, request.manifest, threads=request.threads) as runner:
        started = 0.0
        for index in range(BREAKDOWN_BATCHES + 1):
            if index == 1:  # the first batch warms every stage up
                spent, started = dict.fromkeys(STAGES, 0.0), time.perf_counter()
            chunk = files[index * size:(index + 1) * size]
            clock = time.perf_counter()
            decoded = [family.read_image(p) for p in chunk]
            clock = _lap(spent, "read", clock)
            batch = to_input(np.stack([family.prepare(image, imgsz).pixels for image in decoded]))
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


def _thread_point(request: ProfileRequest, pixels: Path, threads: int) -> ThreadPoint:
    job = MeasureJob(request.folder, request.manifest, pixels, (request.batch_size,), 1.0, threads, "cpu", False)
    try:
        measurement, _ = in_own_process(measure, job)
    except Exception as err:  # noqa: BLE001 - one thread count failing leaves the others
        return ThreadPoint(threads, None, None, one_line(err))
    result = measurement.batches[0]
    return ThreadPoint(threads, result.latency.p50_ms if result.latency else None, result.throughput_ips, result.error)


def _energy_worker(request: ProfileRequest, pixels_path: Path) -> Energy:
    """Joules per image over ENERGY_SECONDS of inference at the profiled batch size."""
    from yolo_optimize.evaluate.runners import open_runner

    batch = _batch(np.load(pixels_path), request.batch_size)
    with open_runner(request.folder, request.manifest, threads=request.threads) as runner:
        runner.infer(batch)  # warm-up

        def work() -> int:
            done, deadline = 0, time.perf_counter() + ENERGY_SECONDS
            while time.perf_counter() < deadline:
                runner.infer(batch)
                done += len(batch)
            return done

        return measure_energy(work)


def profile_markdown(profile: ArtifactProfile) -> str:
    """The profile as a short Markdown report: hotspots, layer types, breakdown, threads, energy."""
    lines = [f"# {profile.model} {profile.artifact} (runs in {profile.executed_precision}), batch {profile.batch_size}",
             "", f"Forward {profile.forward_ms:.2f} ms without a profiler; per-layer sum {profile.layers_ms:.2f} ms "
             f"({_ratio(profile.layers_ms, profile.forward_ms)}). Trace: {profile.trace or 'none'} "
             f"({profile.trace_note or profile.unavailable.get('trace', '')}).", "",
             "| hotspot | type | ms | share | runs in | kernel |", "|---|---|---|---|---|---|"]
    lines += [f"| {h.name} | {h.kind} | {h.ms:.3f} | {h.share:.1%} | {h.executed} | {h.kernel} |"
              for h in profile.hotspots]
    lines += ["", "| layer type | ms | share |", "|---|---|---|"]
    lines += [f"| {kind} | {ms:.3f} | {ms / profile.layers_ms:.1%} |" for kind, ms in profile.by_kind_ms.items()]
    lines += ["", "| batch | " + " | ".join(STAGES) + " | end-to-end img/s | inference-only img/s |",
              "|---|" + "---|" * (len(STAGES) + 2)]
    lines += [f"| {b.batch} | " + " | ".join(f"{b.seconds_per_image[s] * 1e3:.2f} ms ({b.shares[s]:.0%})"
                                           for s in STAGES) + f" | {b.end_to_end_ips} | {b.infer_ips} |"
              for b in profile.breakdown]
    lines += ["", "| threads | p50 ms | img/s |", "|---|---|---|"]
    lines += [f"| {t.threads} | {t.latency_p50_ms} | {t.throughput_ips} |" for t in profile.threads]
    energy = profile.energy
    lines += ["", f"Energy: {energy.joules_per_image} J/image ({', '.join(energy.domains)})"
              if energy.joules_per_image is not None else f"Energy: {energy.unavailable}", ""]
    return "\n".join(lines)


def _ratio(part: float, whole: float) -> str:
    return f"{part / whole:.0%} of the forward time" if whole and whole == whole else "no forward time"
