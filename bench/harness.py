"""What every benchmark shares: the ``optimize`` command, the options, where results go, the with/without rounds in
fresh processes and the workers those rounds run. One module, so that a rule (an exit-code policy, the order of
rounds, the results layout) is written once and every script follows it."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from yolo_optimize.artifact import Manifest
from yolo_optimize.evaluation.measuring.measure import MeasureJob, Timing, measure
from yolo_optimize.evaluation.reporting.report import environment as host_environment
from yolo_optimize.evaluation.run_statistics import BLOCK_S, fast_state
from yolo_optimize.host.cpu import cpu_flags, cpu_model
from yolo_optimize.host.environment import configure
from yolo_optimize.host.processes import in_own_process
from yolo_optimize.metadata import ArtifactMetadata
from yolo_optimize.runtime.runners.base import AUTO

if TYPE_CHECKING:
    from yolo_optimize.building.held_out import ImageSet

configure()  # a benchmark is a program of ours, like the CLI: the tools stay offline and out of $HOME

RESULTS = Path("bench/results")
T = TypeVar("T")
R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])


def host_kind() -> str:
    """This CPU's folder under bench/results: ``xeon-amx`` (AMX), ``zen4`` (AVX-512 VNNI on AMD), ``xeon``
    (AVX-512 VNNI on Intel, no AMX), else ``avx2``. Ratios compare only within one kind, so results are filed by it."""
    flags = cpu_flags()
    if "amx_tile" in flags:
        return "xeon-amx"
    if "avx512_vnni" in flags:
        return "zen4" if "AMD" in cpu_model() else "xeon"
    return "avx2"


def results_folder(benchmark: str, host: str | None = None) -> Path:
    """``bench/results/<host kind>/<benchmark>/``: the one layout of saved results."""
    return RESULTS / (host or host_kind()) / benchmark


def parser_for(doc: str | None) -> argparse.ArgumentParser:
    """A parser described by the first line of the script's docstring, the rest shown by ``--help``."""
    text = doc or ""
    return argparse.ArgumentParser(description=text.splitlines()[0] if text else None, epilog=text,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)


def timing_parser(doc: str | None, benchmark: str, seconds: float) -> argparse.ArgumentParser:
    """Threads, seconds per measurement, interleaved rounds and the results folder."""
    parser = parser_for(doc)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=seconds)
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds, each in fresh processes")
    parser.add_argument("--save", type=Path, default=results_folder(benchmark))
    return parser


def study_parser(doc: str | None, benchmark: str, out: str, repeats: str) -> argparse.ArgumentParser:
    """The options of a script that builds with the CLI into ``--out`` and evaluates into ``--report``."""
    parser = parser_for(doc)
    parser.add_argument("--assets", type=Path, default=Path("../shared/assets"))
    parser.add_argument("--out", type=Path, default=Path(out))
    parser.add_argument("--report", type=Path, default=results_folder(benchmark))
    parser.add_argument("--repeats", default=repeats, help="interleaved rounds of the evaluation")
    parser.add_argument("--skip-build", action="store_true", help="Evaluate the artifacts already in --out.")
    parser.add_argument("--skip-eval", action="store_true", help="Recompute the results from the saved --report.")
    return parser


def save(folder: Path, name: str, result: dict[str, Any], threads: int) -> Path:
    """Write ``<name>-<UTC time>.json`` with the environment, and say where."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{datetime.now(timezone.utc):%Y%m%dT%H%M%S}.json"
    path.write_text(json.dumps({**result, "environment": host_environment(threads)}, indent=2) + "\n")
    print(f"saved {path}")
    return path


NODE_FAILED = 1  # the build's exit code when a node failed, e.g. an INT8 file its gate refused


@dataclass(frozen=True)
class Ran:
    """One ``optimize`` process as a benchmark reads it back."""

    code: int
    wall_s: float  # the whole process, start to exit, as a user waits for it
    cpu_s: float  # its CPU time and its children's, user and system
    output: str  # stdout and stderr, when captured ("" otherwise: they went to the benchmark's own)


def optimize(*args: str | Path | int | float, allowed: tuple[int, ...] = (0,), tree: Path | None = None,
             env: Mapping[str, str] | None = None, capture: bool = False, prefix: Sequence[str] = ()) -> Ran:
    """The ``optimize`` command as a user runs it, in its own process. When its exit code is in ``allowed`` it is
    returned with the process's wall and CPU time; any other stops the benchmark (with the captured output's end).
    A caller that evaluates what a build left (the others when one INT8 file is refused) allows ``NODE_FAILED``.
    ``tree``: run another checkout's code, from that folder (``python -m`` puts the working folder before
    PYTHONPATH), to compare this one with it. ``env``: set on top of this process's environment. ``capture``: keep
    its output out of the benchmark's (a command timed many times). ``prefix``: the command it runs under (e.g.
    ``unshare``, to show it another /proc/cpuinfo)."""
    environment = {**os.environ, **({"PYTHONPATH": str(tree)} if tree else {}), **(env or {})}
    before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    done = subprocess.run([*prefix, sys.executable, "-m", "yolo_optimize", *map(str, args)], env=environment,
                          cwd=tree, capture_output=capture, text=True)
    wall_s, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_CHILDREN)
    output = (done.stdout or "") + (done.stderr or "")
    if done.returncode not in allowed:
        tail = f":\n{output[-4000:]}" if output else ""
        raise SystemExit(f"optimize {args[0]} failed (exit {done.returncode}){tail}")
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Ran(done.returncode, wall_s, cpu_s, output)


def by_name(function: F) -> F:
    """``function`` as its module imports it: the package's spawn never runs the caller's ``__main__`` in a child, so
    a function of a script run as ``python -m bench.x`` is handed to a child as ``bench.x``'s, which it imports."""
    if function.__module__ != "__main__":
        return function
    spec = sys.modules["__main__"].__spec__
    if spec is None:
        raise RuntimeError("run the benchmark as a module: python -m bench.<name>")
    found: F = getattr(importlib.import_module(spec.name), function.__name__)
    return found


def paired_rounds(variants: Sequence[T], repeats: int, run: Callable[[T], R]) -> list[list[R]]:
    """``run`` on each variant once per round, ``repeats`` rounds, the order rotated each round so that no variant
    always goes first (each run a fresh process where ``run`` makes one): per variant, its rounds' results."""
    found: list[list[R]] = [[] for _ in variants]
    for round_ in range(repeats):
        for step in range(len(variants)):
            index = (round_ + step) % len(variants)
            found[index].append(run(variants[index]))
    return found


def by_round(variants: Sequence[T], runs: list[list[R]]) -> list[dict[T, R]]:
    """``paired_rounds``' results the other way round: per round, each variant's."""
    return [dict(zip(variants, found)) for found in zip(*runs)]


@dataclass(frozen=True)
class Variant:
    """One artifact measured one way: a side of a with/without pair."""

    folder: Path
    manifest: Manifest
    batch: int
    mode: str = AUTO
    end_to_end: bool = False  # time the pipelined path instead of inference
    single_threaded_helpers: bool = True  # end_to_end: OpenCV and PyTorch on one thread, as eval runs it
    request_batch: int = 1  # images per request in the throughput configuration (Timing.request_batch)
    environment: tuple[tuple[str, str], ...] = ()  # set while the measuring process starts

    @classmethod
    def of(cls, folder: Path, batch: int, **kwargs: Any) -> Variant:
        return cls(folder, Manifest.read(folder), batch, **kwargs)

    def compiled_with(self, **entries: Any) -> Variant:
        """The same artifact with ``entries`` added to the config its runtime is compiled with."""
        metadata = ArtifactMetadata.of(self.manifest)
        metadata = replace(metadata, compile_config={**(metadata.compile_config or {}), **entries})
        return replace(self, manifest=replace(self.manifest, metadata=metadata.to_dict()))


def timed(variant: Variant, pixels: Path, files: tuple[Path, ...], seconds: float, threads: int) -> list[float]:
    """One fresh process's runs (ms) of ``variant``: inference, or the end-to-end path's intervals."""
    with environment(dict(variant.environment)):
        if not variant.end_to_end:
            timing = Timing((variant.batch,), seconds, threads, mode=variant.mode, request_batch=variant.request_batch)
            job = MeasureJob(variant.folder, variant.manifest, pixels, timing, predict=False)
            return in_own_process(measure_worker, job)
        return in_own_process(path_worker, variant, files, seconds, threads)


def rates(variant: Variant, runs: list[list[float]]) -> tuple[float, list[float]]:
    """Images/s of ``variant`` in the host's fast state over all its rounds, and each round's median rate."""
    state = fast_state(runs, variant.batch)
    assert state is not None  # None only for a failed row, and a failed run raised
    return state.throughput_ips, [round(variant.batch / (statistics.median(r) / 1e3), 2) for r in runs]


@contextlib.contextmanager
def environment(settings: dict[str, str]) -> Iterator[None]:
    """``settings`` in this process's environment while the block runs (a child started in it inherits them)."""
    before = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def measure_worker(job: MeasureJob) -> list[float]:
    """The runs (ms) of ``job``, its first batch size's: what a with/without round compares."""
    measurement, _ = measure(job)
    latency = measurement.batches[0].latency
    assert latency is not None  # None only for a failed row, and measure raised
    return latency.samples_ms


def path_worker(variant: Variant, files: tuple[Path, ...], seconds: float, threads: int) -> list[float]:
    """The end-to-end path's intervals (ms) of ``variant`` over ``seconds``."""
    from yolo_optimize.evaluation.measuring.end_to_end import EndToEnd, single_threaded_helpers
    from yolo_optimize.runtime.runners import open_runner

    with open_runner(variant.folder, variant.manifest, threads=threads, mode=variant.mode) as runner:
        if variant.single_threaded_helpers:
            single_threaded_helpers(runner)
        path = EndToEnd(runner.metadata.model_family(), runner, files, runner.metadata.side, variant.batch)
        try:
            return [ms * 1e3 for _ in range(max(1, round(seconds / BLOCK_S))) for ms in path.block(BLOCK_S)]
        finally:
            path.close()


GATE_IMGSZ = 640


def int8_build(out: Path, assets: Path, routes: list[str], *extra: str | Path) -> Path:
    """yolov5n's FP32 and INT8 files for ``routes``, every INT8 file kept whatever its gate says (what a study of the
    gate compares is the measurement, not the verdict)."""
    optimize("build", "yolov5n", "--weights-dir", assets / "weights", "--targets", ",".join(routes), "--precisions",
             "fp32,int8", "--parity-data", assets / "coco_val128", "--calib-data", assets / "coco128",
             "--max-map-drop", "100", "--out", out, *extra)
    return out / "yolov5n"


def gate_drops(images: ImageSet, candidates: dict[str, tuple[Path, Path]], threads: int,
               unpublished: dict[str, Manifest] | None = None) -> dict[str, Any]:
    """For each name: (the INT8 folder, its FP32 parent's folder) -> its drop on ``images`` with
    the gate's 90% interval, scored by the gate's own code. ``unpublished``: the manifests to run some of the INT8
    folders by (those without one of their own)."""
    from yolo_optimize.building.gate import Gate, GateRecord
    from yolo_optimize.building.request import GateConfig
    from yolo_optimize.families import family_named

    found: dict[str, Any] = {}
    gate = Gate(images, family_named("yolov5"), GATE_IMGSZ, threads)
    try:
        parents: dict[Path, GateRecord] = {}
        for name, (folder, parent) in candidates.items():
            if parent not in parents:
                config = GateConfig(images, None, "bench", 100.0)
                parents[parent] = GateRecord(config, gate.score(parent, Manifest.read(parent)), gate)
            record = parents[parent]
            record.add(name, gate.score(folder, (unpublished or {}).get(name) or Manifest.read(folder)))
            attempt = record.attempts[-1]
            found[name] = {"fp32": round(record.reference.value, 4), "int8": attempt["score"],
                           "drop_points": attempt["drop_points"], "drop_90ci_points": attempt["drop_90ci_points"]}
            print(f"{len(images.images)} images of {images.root}: {name} {found[name]}", flush=True)
    finally:
        gate.close()
    return found
