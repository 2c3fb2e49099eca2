"""Issue 45: every family to NCNN and ExecuTorch, FP32 and INT8, or the one line that refuses it.

    python -m bench.archive.edge_runtimes.edge_families --assets ../shared/assets --out /tmp/edge-families --save \
        bench/results/<cpu kind>

Builds each model at 320 (yolov5n from its real weights, the others with seeded random weights) to ncnn and
executorch in FP32 and INT8 (calibrated on 16 coco128 images, gated on 24 held out, 3 points: the suite's INT8
settings), each FP32 file checked for parity on coco_val128, and saves every node's status and reason.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import yolo_optimize as yo
from bench.harness import parser_for, results_folder, save
from yolo_optimize.errors import BuildFailed

MODELS = ("yolov5n", "yolov7-tiny", "yolov8n", "yolo11n", "yolo12n", "yolo26n", "yolov10n", "rtdetr-l", "resnet18")
NODES = [f"{target}-{precision}" for target in ("ncnn", "executorch") for precision in ("fp32", "int8")]


def built(model: str, args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    real = model == "yolov5n"
    source = args.assets / "weights" / "yolov5n.pt" if real else model
    try:
        result = yo.build(source, random_weights=not real, targets=["ncnn", "executorch"],
                          precisions=["fp32", "int8"], imgsz=[320], out=args.out,
                          parity_data=args.assets / "coco_val128", calib_data=args.assets / "coco128",
                          calib_images=16, gate_images=24, max_map_drop=3.0)
    except BuildFailed as failed:
        result = failed.result
    nodes = {node.node: node for build in result.models for node in build.nodes}
    return {name: {"status": nodes[name].status, "seconds": round(nodes[name].seconds, 1),
                   "reason": nodes[name].reason} for name in NODES if name in nodes}


def main() -> None:
    parser = parser_for(__doc__)
    parser.add_argument("--assets", type=Path, default=Path("../shared/assets"))
    parser.add_argument("--out", type=Path, default=Path("/tmp/edge-families"))
    parser.add_argument("--save", type=Path, default=results_folder("edge_families"))
    parser.add_argument("--models", default=",".join(MODELS))
    args = parser.parse_args()
    results = {}
    for model in args.models.split(","):
        results[model] = built(model, args)
        for node, outcome in results[model].items():
            print(f"{model:12} {node:16} {outcome['status']:8} {outcome['reason'][:150]}")
    save(args.save, "edge_families", {"models": results}, threads=2)


if __name__ == "__main__":
    main()
