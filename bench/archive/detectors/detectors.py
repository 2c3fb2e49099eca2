"""Issue 34's benchmark: the NMS-free YOLO26 against YOLO11 and YOLOv8 with NMS, and NMS inside the artifact against
host-side NMS.

    python -m bench.archive.detectors.detectors --assets ../shared/assets

1. yolo26n, yolo11n and yolov8n at 640 (random weights: no other pretrained weights are reachable here), ONNX
   Runtime and OpenVINO, FP32 and INT8 (calibrated on coco128), batch 1: inference-only and end-to-end img/s
   (the end-to-end path runs each family's own decode: top-k rows for YOLO26, NMS for the others).
2. yolov5n (the real weights) built plain and with ``--nms`` (default settings: conf 0.25, the family's IoU, 300
   detections: what the host-side decode keeps), ONNX Runtime and OpenVINO FP32, batch 1 and 8, with mAP on
   coco_val128: what moving NMS into the graph buys end to end.

Saves both reports under --report and prints the tables the README and bench/README.md quote; ``--skip-build
--skip-eval`` prints them again from the saved reports.
"""

from __future__ import annotations

from typing import Any

from bench.harness import NODE_FAILED, optimize, study_parser
from yolo_optimize.evaluation.reporting.report import load_report
from yolo_optimize.evaluation.results import MatrixRow

HEADS = ("yolo26n", "yolo11n", "yolov8n")
TARGETS = "onnx,openvino"


def build(args: Any) -> None:
    common = ["--out", str(args.out), "--parity-data", str(args.assets / "coco_val128"), "--targets", TARGETS]
    for name in HEADS if args.only != "nms" else ():
        optimize("build", name, "--random-weights", "--precisions", "fp32,int8", "--batch-sizes", "1",
                 "--calib-data", str(args.assets / "coco128"), *common,
                 allowed=(0, NODE_FAILED))
    if args.only == "heads":
        return
    weights = str(args.assets / "weights" / "yolov5n.pt")
    nms_out = ["--out", str(args.out) + "-nms", *common[2:]]
    optimize("build", weights, "--precisions", "fp32", *nms_out, allowed=(0, NODE_FAILED))
    optimize("build", weights, "--precisions", "fp32", "--nms", *nms_out, allowed=(0, NODE_FAILED))


def evaluate(args: Any) -> None:
    data = ["--data", str(args.assets / "coco_val128"), "--repeats", args.repeats, "--min-time", "2"]
    if args.only != "nms":
        optimize("eval", str(args.out), *data, "--batch-sizes", "1", "--out", str(args.report / "heads"))
    if args.only != "heads":
        optimize("eval", str(args.out) + "-nms", *data, "--batch-sizes", "1,8", "--out", str(args.report / "nms"))


def heads_table(matrix: list[MatrixRow]) -> str:
    table = ["| model | head | artifact | b1 img/s | b1 end to end img/s | end to end / inference |",
             "|---|---|---|---|---|---|"]
    for line in sorted(matrix, key=lambda line: (HEADS.index(line.model.removesuffix("-random")), line.artifact)):
        b1 = line.at(1)
        head = "one-to-one, NMS-free" if line.model.startswith("yolo26") else "NMS"
        table.append(f"| {line.model} | {head} | {line.artifact} | {b1.throughput_ips:.1f} | "
                     f"{b1.end_to_end_ips:.1f} | {b1.end_to_end_share:.2f} |")
    return "\n".join(table)


def nms_table(matrix: list[MatrixRow]) -> str:
    table = ["| artifact | NMS | mAP50-95 | b1 img/s | b1 end to end | b8 img/s | b8 end to end |",
             "|---|---|---|---|---|---|---|"]
    for line in sorted(matrix, key=lambda line: (line.artifact, line.model)):
        b1, b8 = line.at(1), line.at(8)
        where = "in the graph" if line.model.endswith("-nms") else "host"
        table.append(f"| {line.artifact} | {where} | {line.map50_95:.4f} | {b1.throughput_ips:.1f} | "
                     f"{b1.end_to_end_ips:.1f} | {b8.throughput_ips:.1f} | {b8.end_to_end_ips:.1f} |")
    return "\n".join(table)


def main() -> None:
    parser = study_parser(__doc__, "detectors", "artifacts-detectors", "3")
    parser.add_argument("--only", choices=("heads", "nms"), help="Build, evaluate and print one part.")
    args = parser.parse_args()
    if not args.skip_build:
        build(args)
    if not args.skip_eval:
        evaluate(args)
    if args.only != "nms":
        print(heads_table(load_report(args.report / "heads").matrix))
    if args.only != "heads":
        print(nms_table(load_report(args.report / "nms").matrix))


if __name__ == "__main__":
    main()
