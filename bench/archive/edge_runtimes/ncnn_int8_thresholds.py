"""Which activation threshold should ncnn-int8 take? ncnn2table's default (KL) against the full range and two
percentiles, each scored like the gate.

    python -m bench.archive.edge_runtimes.ncnn_int8_thresholds --assets ../shared/assets

Issue 45. The real yolov5n at 640 is built to ncnn-fp32 and ncnn-int8 with `--calib-data coco128` alone (the build
holds half of it out for the gate) and `--max-map-drop 100`, so that the file is kept whatever it loses. Its
calibration images' activation histograms (ncnn2table's: 2048 bins of |x| over [0, max]) are collected once with
the stage's own code; then, for each rule, the convolutions' input scales are set from that rule's threshold and
the model is written by the stage's own `quantize` (ncnn2int8's weights, 6-bit for 3x3 stride-1). Each is scored
through NCNN's INT8 inference on the held-out gate images and on coco_val128 (the evaluation), as drops of
mAP50-95 from ncnn-fp32 with the gate's 90% paired-bootstrap interval. Saves `ncnn_int8_thresholds-<time>.json`.

Rules: `kl` (ncnn2table's search, ported: 128 levels, KL floor 1e-4, threshold (t + 0.5) bins), `full range`
(max |x|), `99.99%` and `99.999%` (the bin holding that share of |x|: what the stage uses).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness import gate_drops, int8_build, parser_for, results_folder, save
from yolo_optimize.artifact import Manifest
from yolo_optimize.building.held_out import ImageSet
from yolo_optimize.families import family_named
from yolo_optimize.optimize.calibration import calibration_inputs, candidate_manifest, int8_metadata
from yolo_optimize.optimize.int8_ncnn import HISTOGRAM_BINS, ROUTE, activation_histograms, quantize

IMGSZ = 640
LEVELS, KL_EPS = 128, 1e-4  # ncnn2table's


def kl_bin(histogram: np.ndarray) -> int:
    """ncnn2table's KL search (tools/quantize/ncnn2table.cpp, quantize_KL): the bin count t whose clipped
    distribution (the tail folded into bin t-1) diverges least from its 128-level quantization expanded back to t
    bins; each level averages the histogram over its fractional span, as the tool does bin by bin."""
    normed = histogram / histogram.sum()
    below = np.concatenate([[0.0], np.cumsum(normed)])
    best, best_divergence = LEVELS, np.inf
    for bins in range(LEVELS, HISTOGRAM_BINS):
        width = bins / LEVELS
        levels = np.diff(_integral(below, normed, np.arange(LEVELS + 1) * width)) / width
        level_below = np.concatenate([[0.0], np.cumsum(levels)]) * width
        expanded = np.diff(_integral(level_below, levels * width, np.arange(bins + 1) / width)) + KL_EPS
        clipped = normed[:bins] + KL_EPS
        clipped[-1] += normed[bins:].sum()
        divergence = float(np.sum(clipped * np.log(clipped / expanded)))
        if divergence < best_divergence:
            best, best_divergence = bins, divergence
    return best


def _integral(below: np.ndarray, steps: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The integral from 0 to each ``x`` of the step function worth ``steps[i]`` on [i, i+1) (``below``: its
    cumulative sums from 0)."""
    whole = np.minimum(np.floor(x).astype(np.int64), len(steps) - 1)
    return below[whole] + (x - whole) * steps[whole]


def share_bin(share: float) -> Callable[[np.ndarray], int]:
    return lambda histogram: int(np.searchsorted(np.cumsum(histogram) / histogram.sum(), share))


RULES: dict[str, Callable[[np.ndarray], int]] = {"kl": kl_bin, "full range": lambda histogram: HISTOGRAM_BINS - 1,
                                                 "99.99%": share_bin(0.9999), "99.999%": share_bin(0.99999)}


def main() -> None:
    parser = parser_for(__doc__)
    parser.add_argument("--assets", type=Path, default=Path("../shared/assets"))
    parser.add_argument("--out", type=Path, default=Path("artifacts-ncnn-thresholds"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--save", type=Path, default=results_folder("ncnn_int8_thresholds"))
    args = parser.parse_args()
    model = int8_build(args.out / "built", args.assets, ["ncnn"])
    parent, built = Manifest.read(model / "ncnn-fp32"), Manifest.read(model / "ncnn-int8")
    param = model / "ncnn-fp32" / str(parent.entry)
    family = family_named("yolov5")
    blobs = _scaled_convolutions(model / "ncnn-int8" / str(built.entry))
    calibration = calibration_inputs(family, tuple(built.params["calib_images"]), IMGSZ)
    collected = activation_histograms(param, sorted(set(blobs.values())), calibration, args.threads)
    gated = built.params["gate"]["images"]
    sets = {"held-out gate": ImageSet(gated["root"], tuple(gated["images"])),
            "coco_val128 (evaluation)": ImageSet.of(args.assets / "coco_val128")}
    folders = {rule: _written(args.out / rule.replace(" ", "-").replace("%", ""), param, parent, blobs, collected,
                              pick) for rule, pick in RULES.items()}
    candidates = {rule: (folder, model / "ncnn-fp32") for rule, (folder, _) in folders.items()}
    unpublished = {rule: manifest for rule, (_, manifest) in folders.items()}
    drops = {name: gate_drops(images, candidates, args.threads, unpublished) for name, images in sets.items()}
    result = {"calibration_images": len(calibration), "int8_convolutions": len(blobs), "stage_route": ROUTE,
              "drops": drops}
    print(json.dumps(result["drops"], indent=1))
    save(args.save, "ncnn_int8_thresholds", result, args.threads)


def _scaled_convolutions(param: Path) -> dict[str, str]:
    """The built ncnn-int8's quantized convolutions (those with int8 scales) -> their input blob."""
    from yolo_optimize.runtime.runners.ncnn import read_layers

    return {layer.name: layer.bottoms[0] for layer in read_layers(param) if layer.kind == "Convolution" and
            layer.param(8)}


def _written(folder: Path, param: Path, parent: Manifest, blobs: dict[str, str], collected: dict[str, Any],
             pick: Callable[[np.ndarray], int]) -> tuple[Path, Manifest]:
    """The model quantized with the thresholds ``pick`` chooses, in ``folder``, and a manifest to run it by."""
    shutil.rmtree(folder, ignore_errors=True)
    target = folder / str(parent.entry)
    target.parent.mkdir(parents=True)
    by_blob = {blob: 127 / ((pick(counts) + 0.5) * largest / HISTOGRAM_BINS) for blob, (largest, counts) in
               collected.items()}
    quantize(param, target, {name: by_blob[blob] for name, blob in blobs.items()})
    return folder, candidate_manifest(parent, node="ncnn-int8", metadata=int8_metadata(parent, None, ROUTE))


if __name__ == "__main__":
    main()
