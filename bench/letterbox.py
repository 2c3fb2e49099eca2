"""Issue 46's end-to-end goal: the letterbox's BGR -> RGB swap by OpenCV (ours) or by NumPy's ``[..., ::-1]`` copy
(YOLOv5's and Ultralytics' way, and ours before), alone and on the pipelined end-to-end path at batch 1, in
interleaved fresh processes.

    python bench/letterbox.py --artifacts <a build's --out> [--rows yolov5n/openvino-int8,yolov5n/onnx-int8]

Both give the same pixels (checked here on every image, and against yolov5's own letterbox in
tests/families/test_yolov5.py). The end-to-end path reads, letterboxes and assembles the next image on one thread
while the runtime infers on every usable CPU (evaluation/measuring/end_to_end.py), so what that thread spends comes
out of the runtime's cores on a small host. Each child process of the "numpy copy" variant puts the old swap back in
``families.detection.letterbox`` before it opens anything, so the variants differ only there. Prints, per case, each
variant's figure in the host's fast state (ms per image for the letterbox alone on one OpenCV thread, as eval runs
it; img/s end to end) and the rounds'; saves them with the environment.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from common import save, timing_parser
from levers import Variant, _path_worker

from yolo_optimize.artifact import Manifest
from yolo_optimize.evaluation.results import fast_state
from yolo_optimize.host.processes import in_own_process
from yolo_optimize.images import list_images

VARIANTS = ("opencv swap", "numpy copy")  # ours, and the repositories' (the letterbox before)
LETTERBOX_ROUNDS = 20  # passes over the files per process for the letterbox alone


def numpy_copy_letterbox(bgr: np.ndarray, imgsz: int) -> Any:
    """The letterbox as the repositories write it: padded in BGR, then a NumPy copy of the reversed channels."""
    import cv2

    from yolo_optimize.families.detection import PAD_VALUE, fitted_to

    fitted, border, preprocessed = fitted_to(bgr, imgsz)
    boxed = cv2.copyMakeBorder(fitted, *border, cv2.BORDER_CONSTANT, value=(PAD_VALUE,) * 3)
    return replace(preprocessed, pixels=np.ascontiguousarray(boxed[..., ::-1]))


def configured(variant: str) -> None:
    """This process's letterbox: ours, or the NumPy copy put back."""
    from yolo_optimize.families import detection

    if variant == "numpy copy":
        detection.letterbox = numpy_copy_letterbox  # this bench's child process only


def _letterbox_alone(variant: str, files: tuple[Path, ...]) -> list[float]:
    """ms per image of the family's letterbox over the decoded files, OpenCV on one thread (as eval runs it)."""
    import cv2

    from yolo_optimize.families import family_named

    configured(variant)
    cv2.setNumThreads(1)
    family = family_named("yolov5")
    decoded = [family.read_image(path) for path in files]
    samples = []
    for _ in range(LETTERBOX_ROUNDS):
        for image in decoded:
            start = time.perf_counter()
            family.prepare(image, 640)
            samples.append((time.perf_counter() - start) * 1e3)
    return samples


def _end_to_end(variant: str, case: Variant, files: tuple[Path, ...], seconds: float, threads: int) -> list[float]:
    configured(variant)
    return _path_worker(case, files, seconds, threads)


def same_pixels(files: tuple[Path, ...]) -> bool:
    from yolo_optimize.families import detection, family_named

    family = family_named("yolov5")
    return all(np.array_equal(detection.letterbox(image, 640).pixels, numpy_copy_letterbox(image, 640).pixels)
               for image in map(family.read_image, files))


def timed(case: str, root: Path, variant: str, files: tuple[Path, ...], seconds: float, threads: int) -> list[float]:
    """One fresh process's samples (ms) of ``case`` (an artifact, or "letterbox") with ``variant``. The children's
    functions come from this file imported as a module: the package's spawn never hands a child the caller's
    ``__main__``."""
    from letterbox import _end_to_end, _letterbox_alone

    if case == "letterbox":
        return in_own_process(_letterbox_alone, variant, files)
    folder = root / case
    return in_own_process(_end_to_end, variant, Variant(folder, Manifest.read(folder), 1, end_to_end=True), files,
                          seconds, threads)


def main() -> None:
    parser = timing_parser(__doc__, 4.0)
    parser.add_argument("--artifacts", type=Path, required=True, help="a build's --out")
    parser.add_argument("--data", type=Path, default=Path("../shared/assets/coco_val128"))
    parser.add_argument("--rows", default="yolov5n/openvino-int8,yolov5n/onnx-int8",
                        help="artifact folders under --artifacts, comma-separated")
    args = parser.parse_args()
    files = tuple(list_images(args.data)[:16])
    if not same_pixels(files):
        raise SystemExit("the two letterboxes gave different pixels")
    cases = ["letterbox", *args.rows.split(",")]
    runs: dict[str, dict[str, list[list[float]]]] = {case: {variant: [] for variant in VARIANTS} for case in cases}
    for round_ in range(args.repeats):
        for case in cases:
            for variant in VARIANTS[round_ % 2:] + VARIANTS[:round_ % 2]:  # which goes first alternates
                runs[case][variant].append(timed(case, args.artifacts, variant, files, args.seconds, args.threads))
    results: dict[str, Any] = {}
    for case, by_variant in runs.items():
        if case == "letterbox":
            figures = {variant: round(min(statistics.median(r) for r in samples), 3)
                       for variant, samples in by_variant.items()}
            unit = "ms per image (the fastest round's median)"
        else:
            figures = {variant: fast_state(samples, 1).throughput_ips for variant, samples in by_variant.items()}
            unit = "img/s end to end at b1 (fast state)"
        rounds = {variant: [round(statistics.median(r), 3) for r in samples] for variant, samples in by_variant.items()}
        results[case] = {"unit": unit, "figures": figures, "round_medians_ms": rounds,
                         "opencv_over_numpy": round(figures["opencv swap"] / figures["numpy copy"], 3)}
        print(f"{case}: {unit}: " + "; ".join(f"{variant} {figure}" for variant, figure in figures.items())
              + f"; round medians (ms) {rounds}")
    save(args.save, "letterbox", {"settings": {k: str(v) for k, v in vars(args).items()}, "cases": results},
         args.threads)


if __name__ == "__main__":
    main()
