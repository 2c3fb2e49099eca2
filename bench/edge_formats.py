"""Issue 45: the edge runtimes (NCNN, ExecuTorch) beside ONNX Runtime and OpenVINO on an x86 CPU, yolov5n.

    python -m bench.edge_formats --assets ../shared/assets --report bench/results/<cpu kind>/edge_formats

Builds the real yolov5n (at 640, or --imgsz) into --out: onnx, openvino, ncnn and executorch FP32 and INT8
(calibrated on coco128 with its held-out gate at the default limit), and ncnn FP16 (the others' FP16 files compute
in FP32 on x86 CPUs without AVX512-FP16), each checked for parity on coco_val128; evaluates them beside PyTorch
eager on all of coco_val128 at batch 1 and 4 (NCNN and ExecuTorch take one image a call: their batch of 4 is four
calls), end to end, in --repeats interleaved rounds; prints each row's img/s, speedup and mAP50-95 from the saved
report, and saves beside it each build's result (``build-<precision>.json``: what a gate refused, and why) and
what ``optimize recommend`` picks at each batch size and accuracy budget (``recommend.json``).
``--skip-build --skip-eval`` recomputes them from the saved report.
"""

from __future__ import annotations

import json
from pathlib import Path

import yolo_optimize as yo
from bench.harness import NODE_FAILED, optimize, study_parser
from yolo_optimize.evaluation.reporting.recommend import Candidate
from yolo_optimize.evaluation.reporting.report import load_report
from yolo_optimize.evaluation.results import Report

BUILDS = (("onnx,openvino,ncnn,executorch", "fp32"), ("ncnn", "fp16"),  # FP16 where it computes
          ("onnx,openvino,ncnn,executorch", "int8"))
BATCHES = "1,4"
BUDGETS = (0.0, 0.5, 1.0)  # points of mAP50-95 an artifact may lose, recommend's --max-map-drop (its default last)


def main() -> None:
    parser = study_parser(__doc__, "edge_formats", "bench-edge-artifacts", "3")
    parser.add_argument("--imgsz", default="640", help="the input size every file is built and evaluated at")
    args = parser.parse_args()
    for targets, precisions in BUILDS if not args.skip_build else ():
        calibration = ["--calib-data", str(args.assets / "coco128")] if precisions == "int8" else []
        args.report.mkdir(parents=True, exist_ok=True)  # each build's result (what the gate refused, and why) in it
        optimize("build", str(args.assets / "weights" / "yolov5n.pt"), "--targets", targets, "--precisions",
                 precisions, "--imgsz", args.imgsz, "--parity-data", str(args.assets / "coco_val128"), "--out",
                 str(args.out), *calibration, "--result", str(args.report / f"build-{precisions}.json"),
                 allowed=(0, NODE_FAILED))
    if not args.skip_eval:
        optimize("eval", str(args.out), "--data", str(args.assets / "coco_val128"), "--batch-sizes", BATCHES,
                 "--imgsz", args.imgsz, "--repeats", args.repeats, "--min-time", "1", "--out", str(args.report))
    report = load_report(args.report)
    for line in report.matrix:
        cells = " | ".join(f"b{batch} {cell.throughput_ips} img/s {cell.speedup}x, e2e {cell.end_to_end_ips}"
                           for batch, cell in sorted(line.batches.items()))
        print(f"{line.artifact:18} {line.executed_precision:14.14} | {cells} | mAP50-95 {line.map50_95}")
    save_picks(report, args.report)


def save_picks(report: Report, folder: Path) -> None:
    """What ``recommend`` ships at each measured batch size and accuracy budget, with its runner-up, into
    ``recommend.json``."""
    picks = []
    for batch in report.settings.batch_sizes:
        for budget in BUDGETS:
            pick = yo.recommend(report, batch_size=batch, max_map_drop=budget).recommendation
            picks.append({"batch_size": batch, "max_map_drop": budget, "tie": pick.tie, "verdict": pick.verdict,
                          "choice": _described(pick.choice), "runner_up": _described(pick.runner_up)})
            print(f"b{batch}, within {budget} point: {pick.verdict}")
    (folder / "recommend.json").write_text(json.dumps(picks, indent=1) + "\n")


def _described(chosen: Candidate | None) -> dict[str, object] | None:
    return None if chosen is None else {"artifact": chosen.artifact, "img_s": chosen.throughput_ips,
                                        "speedup": chosen.speedup, "accuracy": chosen.accuracy}


if __name__ == "__main__":
    main()
