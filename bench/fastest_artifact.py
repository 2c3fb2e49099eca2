"""Issue 21's goals for yolov5n 640 on this machine: the fastest deployable artifact, its share of the machine's peak,
throughput mode at batch 8, ONNX Runtime INT8 against FP32, and the end-to-end path against inference alone.

    python -m bench.fastest_artifact --assets ../shared/assets

Builds yolov5n twice into --out: with float input (torchscript, aoti, onnx, openvino x fp32, fp16, bf16, int8) and
with ``--input uint8`` (aoti, onnx, openvino x fp32, bf16, int8: the preprocessing inside the graph), INT8
calibrated on all of coco128 and gated on its labels at the default 1.0 point; evaluates both on coco_val128 at
batch 1 and 8 (latency at 1, the runtimes' throughput configuration at 8, the end-to-end path at both) with
``--profile``; prints every goal with its measured value, and writes goals.json beside the report.
``--skip-build --skip-eval`` recomputes the goals from the saved report. Prints the README's matrix from it too.
"""

from __future__ import annotations

import json
from typing import Any

from bench.harness import NODE_FAILED, optimize, study_parser
from yolo_optimize.evaluation.reporting.report import load_report
from yolo_optimize.evaluation.results import MatrixRow

FLOAT_TARGETS, UINT8_TARGETS = "torchscript,aoti,onnx,openvino", "aoti,onnx,openvino"
THROUGHPUT_RUNTIMES = ("onnx", "openvino")  # the runtimes with a throughput configuration (runners.base)
BEST_WITHIN_POINTS, PEAK_SHARE, BEST_B8, ORT_INT8_OVER_FP32, END_TO_END_SHARE = 0.5, 0.5, 5.0, 1.5, 0.8


def build(args: Any) -> None:
    common = ["--out", str(args.out), "--parity-data", str(args.assets / "coco_val128"),
              "--calib-data", str(args.assets / "coco128")]
    weights = str(args.assets / "weights" / "yolov5n.pt")
    optimize("build", weights, "--targets", FLOAT_TARGETS, "--precisions", "fp32,fp16,bf16,int8", *common,
             allowed=(0, NODE_FAILED))
    optimize("build", weights, "--targets", UINT8_TARGETS, "--precisions", "fp32,bf16,int8", "--input", "uint8",
             *common, allowed=(0, NODE_FAILED))


README_ROWS = [("yolov5n", name, name) for name in (
    "pytorch-fp32", "torchscript-fp32", "aoti-fp32", "aoti-bf16", "aoti-int8", "onnx-fp32", "onnx-int8",
    "openvino-fp32", "openvino-bf16", "openvino-int8")] + [
    ("yolov5n-uint8", "openvino-int8", "openvino-int8, `--input uint8`")]


def readme_table(matrix: list[MatrixRow]) -> str:
    """The README's matrix: README_ROWS from the report (``runs in`` without its convolution count)."""
    lines = {(line.model, line.artifact): line for line in matrix}
    table = ["| artifact | runs in | mAP50-95 | b1 img/s | b1 speedup | b1 end to end | b8 img/s (mode) | b8 speedup |",
             "|---|---|---|---|---|---|---|---|"]
    for model, artifact, label in README_ROWS:
        line = lines[(model, artifact)]
        b1, b8 = line.at(1), line.at(8)
        table.append(f"| {label} | {(line.executed_precision or '').split(' (')[0]} | {line.map50_95:.4f} | "
                     f"{b1.throughput_ips:.1f} | {b1.speedup:.2f}x | {b1.end_to_end_ips:.1f} | "
                     f"{b8.throughput_ips:.1f} ({(b8.mode or '').split()[0]}) | {b8.speedup:.2f}x |")
    return "\n".join(table)


def drop_points(line: MatrixRow, base: MatrixRow) -> float:
    if line.map50_95 is None or base.map50_95 is None:
        return float("inf")
    return (base.map50_95 - line.map50_95) * 100


def ips(line: MatrixRow, batch: int) -> float:
    """An ok row's img/s at ``batch`` (0 where that batch size was not measured)."""
    return line.at(batch).throughput_ips or 0.0


def speedup(line: MatrixRow, batch: int) -> float:
    """An ok row's speedup over PyTorch eager at ``batch`` (0 where not measured)."""
    return line.at(batch).speedup or 0.0


def goals(matrix: list[MatrixRow]) -> list[tuple[str, bool, str]]:
    ok = [line for line in matrix if line.status == "ok"]
    base = {line.model: line for line in ok if line.artifact == "pytorch-fp32"}
    within = [line for line in ok if drop_points(line, base[line.model]) <= BEST_WITHIN_POINTS]
    best = max(within, key=lambda line: ips(line, 1))
    best_b8 = max(ok, key=lambda line: speedup(line, 8))
    throughput = [line for line in ok if line.artifact.split("-")[0] in THROUGHPUT_RUNTIMES]
    b8_behind = [f"{line.model} {line.artifact} {line.at(8).speedup} < {line.at(1).speedup}"
                 for line in throughput if speedup(line, 8) < speedup(line, 1)]
    ort = {(line.model, line.artifact): line for line in ok if line.artifact in ("onnx-int8", "onnx-fp32")}
    ort_ratios = {f"{model} b{b}": round(ips(ort[(model, "onnx-int8")], b) / ips(ort[(model, "onnx-fp32")], b), 3)
                  for model in base if (model, "onnx-int8") in ort for b in (1, 8)}
    best_path = max(ok, key=lambda line: line.at(1).end_to_end_ips or 0)
    b1 = best.at(1)
    return [
        (f"the best artifact within {BEST_WITHIN_POINTS} point of FP32 mAP reaches >= {PEAK_SHARE:.0%} of the measured "
         f"peak of the precision it runs in at b1", (b1.utilization or 0) >= PEAK_SHARE,
         f"{best.model} {best.artifact} ({best.executed_precision}, "
         f"{drop_points(best, base[best.model]):.2f} "
         f"points): {b1.throughput_ips} img/s, {b1.utilization} of {best.peak_of} "
         f"{best.peak_gops} GOP/s"),
        ("b8 speedup (throughput configuration) >= b1 speedup for every ONNX Runtime and OpenVINO artifact",
         not b8_behind, "; ".join(b8_behind) or f"all {len(throughput)} rows"),
        (f"the best b8 speedup >= {BEST_B8}x PyTorch eager", speedup(best_b8, 8) >= BEST_B8,
         f"{best_b8.model} {best_b8.artifact} {best_b8.at(8).speedup}x"),
        (f"ONNX Runtime INT8 >= {ORT_INT8_OVER_FP32}x ONNX Runtime FP32 at b1 and b8",
         bool(ort_ratios) and min(ort_ratios.values()) >= ORT_INT8_OVER_FP32, json.dumps(ort_ratios)),
        (f"the best artifact's end-to-end img/s >= {END_TO_END_SHARE:.0%} of its inference-only img/s at b1",
         (b1.end_to_end_share or 0) >= END_TO_END_SHARE,
         f"{best.model} {best.artifact}: {b1.end_to_end_ips} e2e img/s, "
         f"{b1.end_to_end_share} of inference (fastest end to end: {best_path.model} "
         f"{best_path.artifact} {best_path.at(1).end_to_end_ips} img/s)"),
    ]


def main() -> None:
    parser = study_parser(__doc__, "fastest_artifact", "artifacts-fastest", "3")
    args = parser.parse_args()
    if not args.skip_build:
        build(args)
    if not args.skip_eval:
        optimize("eval", str(args.out), "--data", str(args.assets / "coco_val128"), "--out", str(args.report),
                 "--repeats", args.repeats, "--min-time", "2", "--batch-sizes", "1,8", "--profile")
    matrix = load_report(args.report).matrix
    print(readme_table(matrix))
    found = goals(matrix)
    for goal, met, value in found:
        print(f"[{'met' if met else 'MISSED'}] {goal}: {value}")
    (args.report / "goals.json").write_text(json.dumps([{"goal": g, "met": m, "value": v} for g, m, v in found],
                                                       indent=2) + "\n")


if __name__ == "__main__":
    main()
