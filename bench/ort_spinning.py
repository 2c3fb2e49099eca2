"""ONNX Runtime's intra-op threads spinning (its default), sleeping between parallel sections, or spinning only while
a run lasts, at batch 1, for inference alone and for the pipelined end-to-end path, in interleaved fresh processes
(issue 46's threading lever).

    python bench/ort_spinning.py --artifacts <model folder of a build> [--rows onnx-int8,onnx-fp32] [--repeats 3]

The saved runs and the commands that made them: bench/results/avx2/ort_spinning/ (run.sh).

On a CPU the end-to-end path reads and prepares the next image on one thread of its own while the runtime infers on
every usable CPU (evaluation/measuring/end_to_end.py). Spinning threads hold the cores between operators, so the
reader, and the post-processing after each run, may wait for them. ``session.intra_op.allow_spinning`` "0" makes
them sleep instead; ``session.force_spinning_stop`` "1" stops their spinning when a run returns (they spin again
inside the next). Here each child process patches the ONNX Runtime runner's session options before opening it, so
that the only difference between the variants is these entries. The first two runs (2026-11-29) were made before
the runner set "0" itself; since then its default is sleeping (``runners/onnxruntime.IDLE_THREADS``), which the
children keep, and every variant sets its entries. The evaluator now chooses between sleeping and spinning within
runs by measurement on the host (``OnnxRuntimeRunner.variants``).

Saves everything under bench/results/ with the environment.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from common import save, timing_parser
from levers import Variant, _measure_worker, _path_worker

from yolo_optimize.artifact import Manifest
from yolo_optimize.evaluation.measuring.measure import MeasureJob
from yolo_optimize.evaluation.results import Timing, fast_state
from yolo_optimize.families import family_named
from yolo_optimize.host.processes import in_own_process
from yolo_optimize.images import list_images

SETTINGS = {  # variant -> ONNX Runtime's session config entries (its defaults: spinning allowed, not stopped)
    "spinning": {"session.intra_op.allow_spinning": "1"},
    "sleeping": {"session.intra_op.allow_spinning": "0"},  # what the runner sets
    "spinning within runs": {"session.intra_op.allow_spinning": "1", "session.force_spinning_stop": "1"},
}


@dataclass(frozen=True)
class Case:
    artifact: str
    end_to_end: bool

    @property
    def label(self) -> str:
        return f"{self.artifact} b1 {'end to end' if self.end_to_end else 'inference'}"


def configured(setting: str) -> None:
    """This process's ONNX Runtime sessions, as the runner opens them, with ``SETTINGS[setting]``."""
    from yolo_optimize.runtime.runners.onnxruntime import OnnxRuntimeRunner

    runner_options = OnnxRuntimeRunner._options

    def options(self: OnnxRuntimeRunner, ort: Any, threads: int | None = None) -> Any:
        made = runner_options(self, ort, threads)
        for key, value in SETTINGS[setting].items():
            made.add_session_config_entry(key, value)
        return made

    OnnxRuntimeRunner._options = options  # this bench's child process only


def _inference(setting: str, job: MeasureJob) -> list[float]:
    configured(setting)
    return _measure_worker(job, 1)


def _end_to_end(setting: str, variant: Variant, files: tuple[Path, ...], seconds: float, threads: int) -> list[float]:
    configured(setting)
    return _path_worker(variant, files, seconds, threads)


def timed(case: Case, root: Path, setting: str, pixels: Path, files: tuple[Path, ...], seconds: float,
          threads: int) -> list[float]:
    """One fresh process's runs (ms) of ``case`` with ``SETTINGS[setting]``. The children's functions are
    taken from this file imported as a module: the package's spawn never hands a child the caller's ``__main__``."""
    from ort_spinning import _end_to_end, _inference

    folder = root / case.artifact
    manifest = Manifest.read(folder)
    if case.end_to_end:
        return in_own_process(_end_to_end, setting, Variant(folder, manifest, 1, end_to_end=True), files, seconds,
                              threads)
    job = MeasureJob(folder, manifest, pixels, Timing((1,), seconds, threads), predict=False)
    return in_own_process(_inference, setting, job)


def main() -> None:
    parser = timing_parser(__doc__, 4.0)
    parser.add_argument("--artifacts", type=Path, required=True, help="a model folder of a build")
    parser.add_argument("--data", type=Path, default=Path("../shared/assets/coco_val128"))
    parser.add_argument("--rows", default="onnx-int8,onnx-fp32", help="ONNX artifacts of that folder, comma-separated")
    args = parser.parse_args()
    files = tuple(list_images(args.data)[:16])
    cases = [Case(artifact, end_to_end) for artifact in args.rows.split(",") for end_to_end in (False, True)]
    runs: dict[str, dict[str, list[list[float]]]] = {case.label: {name: [] for name in SETTINGS} for case in cases}
    pixels = args.save / "ort_spinning-pixels.npy"
    np.save(pixels, np.stack([family_named("yolov5").preprocess(path, 640).pixels for path in files]))
    try:
        for round_ in range(args.repeats):
            for case in cases:
                order = list(SETTINGS)[round_ % len(SETTINGS):] + list(SETTINGS)[:round_ % len(SETTINGS)]
                for setting in order:  # which goes first rotates
                    runs[case.label][setting].append(timed(case, args.artifacts, setting, pixels, files, args.seconds,
                                                           args.threads))
    finally:
        pixels.unlink()
    results: dict[str, Any] = {}
    for label, by_setting in runs.items():
        rates = {setting: fast_state(samples, 1).throughput_ips for setting, samples in by_setting.items()}
        results[label] = {setting: {"ips": rate, "over_spinning": round(rate / rates["spinning"], 3),
                                    "rounds_ips": [round(1e3 / statistics.median(r), 2) for r in by_setting[setting]]}
                          for setting, rate in rates.items()}
        print(f"{label}: " + "; ".join(f"{setting} {found['ips']:.1f} img/s ({found['over_spinning']:.3f}x), rounds "
                                       f"{found['rounds_ips']}" for setting, found in results[label].items()))
    save(args.save, "ort_spinning", {"settings": {k: str(v) for k, v in vars(args).items()}, "cases": results},
         args.threads)


if __name__ == "__main__":
    main()
