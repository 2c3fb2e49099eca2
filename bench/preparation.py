"""Issue 46's end-to-end goal: two copies in the preparation of an image, each made another way, alone and on the
pipelined end-to-end path at batch 1, in interleaved fresh processes.

    python bench/preparation.py --artifacts <a build's --out> [--rows yolov5n/openvino-int8,yolov5n/onnx-int8]

- the letterbox's BGR -> RGB swap: by OpenCV before the padding (ours), or by NumPy's ``[..., ::-1]`` copy of the
  padded image (YOLOv5's and Ultralytics' way, and ours before);
- the float input of a float-input artifact: a float copy divided afterwards (ours), or one NumPy pass casting and
  dividing into the NCHW array (the same values without the temporary: tried, not kept).

Each gives the same values as ours (checked here on every image, and the letterbox against yolov5's own in
tests/families/test_yolov5.py). The end-to-end path reads, letterboxes and converts the next image on one thread
while the runtime infers on every usable CPU (evaluation/measuring/end_to_end.py), so what that thread spends comes
out of the runtime's cores on a small host. Each child process of a variant swaps in its code
(``families.detection.letterbox`` or ``images.to_input``) before it opens anything, so a variant differs from ours
only there; on a uint8-input artifact the float input is never made, so its "one-pass input" variant is a control.
Prints, per case, each variant's figure in the host's fast state (ms per image alone, on one OpenCV thread as eval
runs it, the fastest round's median; img/s end to end) and the rounds' medians; saves them with the environment.
"""

from __future__ import annotations

import functools
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

OURS, NUMPY_SWAP, ONE_PASS_INPUT = "ours", "numpy swap", "one-pass input"
VARIANTS = (OURS, NUMPY_SWAP, ONE_PASS_INPUT)
ALONE = {"letterbox": NUMPY_SWAP, "float input": ONE_PASS_INPUT}  # a step timed alone -> the variant it compares
ALONE_PASSES = 20  # passes over the files per process for a step timed alone


def numpy_copy_letterbox(bgr: np.ndarray, imgsz: int) -> Any:
    """The letterbox as the repositories write it: padded in BGR, then a NumPy copy of the reversed channels."""
    import cv2

    from yolo_optimize.families.detection import PAD_VALUE, fitted_to

    fitted, border = fitted_to(bgr, imgsz)
    boxed = cv2.copyMakeBorder(fitted.pixels, *border, cv2.BORDER_CONSTANT, value=(PAD_VALUE,) * 3)
    return replace(fitted, pixels=np.ascontiguousarray(boxed[..., ::-1]))


def one_pass_input(images: np.ndarray) -> np.ndarray:
    """The float input in one pass: each byte cast and divided by 255 in float32 straight into the NCHW array."""
    converted = np.empty((images.shape[0], images.shape[3], *images.shape[1:3]), np.float32)
    np.divide(images.transpose(0, 3, 1, 2), np.float32(255), out=converted, dtype=np.float32)
    return converted


def configured(variant: str) -> None:
    """This process's preparation: ours, or with one step made the variant's way."""
    from yolo_optimize import images
    from yolo_optimize.families import detection

    if variant == NUMPY_SWAP:
        detection.letterbox = numpy_copy_letterbox  # this bench's child process only
    elif variant == ONE_PASS_INPUT:
        images.to_input = one_pass_input


def _alone(variant: str, step: str, files: tuple[Path, ...]) -> list[float]:
    """ms per image of one step over the files (the letterbox of each decoded file, or the float input of each
    letterboxed one), OpenCV on one thread (as eval runs it)."""
    import cv2

    from yolo_optimize import images
    from yolo_optimize.families import family_named

    configured(variant)
    cv2.setNumThreads(1)
    family = family_named("yolov5")
    decoded = [family.read_image(path) for path in files]
    inputs = [family.prepare(image, 640).pixels[None] for image in decoded]
    calls = [functools.partial(family.prepare, image, 640) for image in decoded] if step == "letterbox" else \
        [functools.partial(images.to_input, pixels) for pixels in inputs]
    samples = []
    for _ in range(ALONE_PASSES):
        for call in calls:
            start = time.perf_counter()
            call()
            samples.append((time.perf_counter() - start) * 1e3)
    return samples


def _end_to_end(variant: str, case: Variant, files: tuple[Path, ...], seconds: float, threads: int) -> list[float]:
    configured(variant)
    return _path_worker(case, files, seconds, threads)


def same_values(files: tuple[Path, ...]) -> bool:
    """Every image's letterbox and float input the same, ours and as before."""
    from yolo_optimize.families import detection, family_named
    from yolo_optimize.images import to_input

    family = family_named("yolov5")
    for image in map(family.read_image, files):
        pixels = detection.letterbox(image, 640).pixels
        if not (np.array_equal(pixels, numpy_copy_letterbox(image, 640).pixels)
                and np.array_equal(to_input(pixels[None]), one_pass_input(pixels[None]))):
            return False
    return True


def timed(case: str, root: Path, variant: str, files: tuple[Path, ...], seconds: float, threads: int) -> list[float]:
    """One fresh process's samples (ms) of ``case`` (a step alone, or an artifact end to end) with ``variant``. The
    children's functions come from this file imported as a module: the package's spawn never hands a child the
    caller's ``__main__``."""
    from preparation import _alone, _end_to_end

    if case in ALONE:
        return in_own_process(_alone, variant, case, files)
    folder = root / case
    return in_own_process(_end_to_end, variant, Variant(folder, Manifest.read(folder), 1, end_to_end=True), files,
                          seconds, threads)


def summary(case: str, by_variant: dict[str, list[list[float]]]) -> dict[str, Any]:
    """Each variant's figure, ours over each other's, and every round's median; printed."""
    if case in ALONE:
        figures = {variant: round(min(statistics.median(r) for r in samples), 3) for variant, samples in
                   by_variant.items()}
        unit = "ms per image (the fastest round's median)"
    else:
        figures = {variant: fast_state(samples, 1).throughput_ips for variant, samples in by_variant.items()}
        unit = "img/s end to end at b1 (fast state)"
    rounds = {variant: [round(statistics.median(r), 3) for r in samples] for variant, samples in by_variant.items()}
    found = {"unit": unit, "figures": figures, "round_medians_ms": rounds,
             "ours_over": {variant: round(figures[OURS] / figure, 3) for variant, figure in figures.items()
                           if variant != OURS}}
    print(f"{case}: {unit}: " + "; ".join(f"{variant} {figure}" for variant, figure in figures.items())
          + f"; ours over {found['ours_over']}; round medians (ms) {rounds}")
    return found


def main() -> None:
    parser = timing_parser(__doc__, 4.0)
    parser.add_argument("--artifacts", type=Path, required=True, help="a build's --out")
    parser.add_argument("--data", type=Path, default=Path("../shared/assets/coco_val128"))
    parser.add_argument("--rows", default="yolov5n/openvino-int8,yolov5n/onnx-int8",
                        help="artifact folders under --artifacts, comma-separated")
    args = parser.parse_args()
    files = tuple(list_images(args.data)[:16])
    if not same_values(files):
        raise SystemExit("a variant gave other values than ours")
    cases = {**{step: (OURS, old) for step, old in ALONE.items()}, **dict.fromkeys(args.rows.split(","), VARIANTS)}
    runs: dict[str, dict[str, list[list[float]]]] = {
        case: {variant: [] for variant in variants} for case, variants in cases.items()}
    for round_ in range(args.repeats):
        for case, variants in cases.items():
            for variant in variants[round_ % len(variants):] + variants[:round_ % len(variants)]:  # rotating order
                runs[case][variant].append(timed(case, args.artifacts, variant, files, args.seconds, args.threads))
    results = {case: summary(case, by_variant) for case, by_variant in runs.items()}
    save(args.save, "preparation", {"settings": {k: str(v) for k, v in vars(args).items()}, "cases": results},
         args.threads)


if __name__ == "__main__":
    main()
