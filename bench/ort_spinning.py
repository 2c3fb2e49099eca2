"""ONNX Runtime's intra-op threads spinning (its default) or sleeping between parallel sections, at batch 1, for
inference alone and for the pipelined end-to-end path, in interleaved fresh processes (issue 46's threading lever).

    python bench/ort_spinning.py --artifacts <model folder holding onnx-int8 and onnx-fp32> [--repeats 3]

On a CPU the end-to-end path reads and prepares the next image on one thread of its own while the runtime infers on
every usable CPU (evaluate/measuring/end_to_end.py). Spinning threads hold the cores between operators, so the
reader may wait for them. ``session.intra_op.allow_spinning`` "0" makes them sleep instead. The runners do not set
it. Here each child process patches the ONNX Runtime runner's session options before opening it, so that the only
difference between the two variants is this one setting.

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
from yolo_optimize.evaluate.measuring.measure import MeasureJob
from yolo_optimize.evaluate.results import Timing, fast_state
from yolo_optimize.families import family_named
from yolo_optimize.host.processes import in_own_process
from yolo_optimize.images import list_images

SPINNING = "session.intra_op.allow_spinning"  # ONNX Runtime's session config key; "1" is its default


@dataclass(frozen=True)
class Case:
    artifact: str
    end_to_end: bool

    @property
    def label(self) -> str:
        return f"{self.artifact} b1 {'end to end' if self.end_to_end else 'inference'}"


def spinning(allowed: bool) -> None:
    """This process's ONNX Runtime sessions, as the runner opens them, with spinning allowed or not."""
    from yolo_optimize.runtime.runners.onnxruntime import OnnxRuntimeRunner

    runner_options = OnnxRuntimeRunner._options

    def options(self: OnnxRuntimeRunner, ort: Any, threads: int | None = None) -> Any:
        made = runner_options(self, ort, threads)
        made.add_session_config_entry(SPINNING, "1" if allowed else "0")
        return made

    OnnxRuntimeRunner._options = options  # this bench's child process only


def _inference(allowed: bool, job: MeasureJob) -> list[float]:
    spinning(allowed)
    return _measure_worker(job, 1)


def _end_to_end(allowed: bool, variant: Variant, files: tuple[Path, ...], seconds: float, threads: int) -> list[float]:
    spinning(allowed)
    return _path_worker(variant, files, seconds, threads)


def timed(case: Case, root: Path, allowed: bool, pixels: Path, files: tuple[Path, ...], seconds: float,
          threads: int) -> list[float]:
    """One fresh process's runs (ms) of ``case`` with spinning ``allowed`` or not. The children's functions are
    taken from this file imported as a module: the package's spawn never hands a child the caller's ``__main__``."""
    from ort_spinning import _end_to_end, _inference

    folder = root / case.artifact
    manifest = Manifest.read(folder)
    if case.end_to_end:
        return in_own_process(_end_to_end, allowed, Variant(folder, manifest, 1, end_to_end=True), files, seconds,
                              threads)
    job = MeasureJob(folder, manifest, pixels, Timing((1,), seconds, threads), predict=False)
    return in_own_process(_inference, allowed, job)


def main() -> None:
    parser = timing_parser(__doc__, 4.0)
    parser.add_argument("--artifacts", type=Path, required=True, help="a model folder of a build")
    parser.add_argument("--data", type=Path, default=Path("../shared/assets/coco_val128"))
    args = parser.parse_args()
    files = tuple(list_images(args.data)[:16])
    cases = [Case(artifact, end_to_end) for artifact in ("onnx-int8", "onnx-fp32") for end_to_end in (False, True)]
    runs: dict[str, dict[bool, list[list[float]]]] = {case.label: {True: [], False: []} for case in cases}
    pixels = args.save / "ort_spinning-pixels.npy"
    np.save(pixels, np.stack([family_named("yolov5").preprocess(path, 640).pixels for path in files]))
    try:
        for round_ in range(args.repeats):
            for case in cases:
                for allowed in ((True, False) if round_ % 2 == 0 else (False, True)):  # which goes first alternates
                    runs[case.label][allowed].append(timed(case, args.artifacts, allowed, pixels, files, args.seconds,
                                                           args.threads))
    finally:
        pixels.unlink()
    results: dict[str, Any] = {}
    for label, by_setting in runs.items():
        rates = {allowed: fast_state(by_setting[allowed], 1).throughput_ips
                 for allowed in (True, False)}
        rounds = {allowed: [round(1e3 / statistics.median(r), 2) for r in by_setting[allowed]] for allowed in rates}
        results[label] = {"spinning_ips": rates[True], "sleeping_ips": rates[False],
                          "gain": round(rates[False] / rates[True], 3),
                          "rounds_ips": {"spinning": rounds[True], "sleeping": rounds[False]}}
        print(f"{label}: spinning {rates[True]:.1f} -> sleeping {rates[False]:.1f} img/s "
              f"({rates[False] / rates[True] - 1:+.1%}); rounds {rounds[True]} / {rounds[False]}")
    save(args.save, "ort_spinning", {"settings": {k: str(v) for k, v in vars(args).items()}, "cases": results},
         args.threads)


if __name__ == "__main__":
    main()
