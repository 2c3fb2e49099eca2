"""INT8/BF16 goals for yolov5n on this machine: build every precision, evaluate, check the goals, explain them.

    python bench/int8_targets.py --assets ../shared/assets

Builds torchscript/onnx/openvino x fp32, fp16, bf16, int8 (calibration: all of coco128, gate: its
labels, the default 1.0-point gate), evaluates on coco_val128 at batch 1 and 8 with interleaved
rounds and ``--profile``, and prints each goal with the measured value (the gate goals from the INT8
manifests' own gate records), then every artifact's achieved GOP/s and its utilization of this
machine's measured peak for the precision it runs in (``optimize info``). The report folder keeps
every raw number; ``--skip-build --skip-eval`` recomputes the goals and the table from it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from common import study_parser

from yolo_optimize.evaluation.reporting.report import load_report
from yolo_optimize.evaluation.results import BatchCells, MatrixRow


def optimize(*args: str) -> int:
    """Run the CLI; a build with a failed node (e.g. an INT8 gate) still leaves the others to evaluate."""
    return subprocess.run([sys.executable, "-m", "yolo_optimize", *args]).returncode


def gate(out: Path, node: str) -> tuple[bool, str]:
    """The INT8 node's own gate record (its manifest's ``info.gate``): passed, and the drop with its interval."""
    manifest = out / "yolov5n" / node / "manifest.json"
    if not manifest.is_file():
        return False, "not built"
    record = json.loads(manifest.read_text())["info"]["gate"]
    low, high = record["drop_90ci_points"]
    return record["passed"], (f"{record['drop_points']} points lost on {record['gate_images']} gate images "
                              f"(90% CI {low}..{high}, {record['verdict']}; route: {record['route']})")


def main() -> None:
    parser = study_parser(__doc__, "artifacts", "bench/results/avx2/int8_targets", "3")
    parser.add_argument("--max-map-drop", default="1.0", help="The INT8 gate (points); the product's default is 1.0.")
    args = parser.parse_args()
    if not args.skip_build:
        optimize("build", str(args.assets / "weights" / "yolov5n.pt"), "--out", str(args.out),
                 "--targets", "torchscript,onnx,openvino", "--precisions", "fp32,fp16,bf16,int8",
                 "--parity-data", str(args.assets / "coco_val128"), "--calib-data", str(args.assets / "coco128"),
                 "--max-map-drop", args.max_map_drop)
    if not args.skip_eval:
        optimize("eval", str(args.out), "--data", str(args.assets / "coco_val128"), "--out", str(args.report),
                 "--repeats", args.repeats, "--min-time", "2", "--profile")
    rows = {line.artifact: line for line in load_report(args.report).matrix if line.status == "ok"}
    base = rows["pytorch-fp32"].map50_95
    nan = float("nan")
    missing = MatrixRow("yolov5n", "", "", "", "", "not built", {b: BatchCells(speedup=nan) for b in (1, 8)},
                        executed_precision="not built", map50_95=nan)

    def row(name: str) -> MatrixRow:
        return rows.get(name, missing)

    def drop(name: str) -> float:
        return (base - row(name).map50_95) * 100

    ok = [line for line in rows.values() if isinstance(line.at(1).speedup, float)]
    best_b1 = max(ok, key=lambda line: line.at(1).speedup)
    best_b8 = max(ok, key=lambda line: line.at(8).speedup or 0)

    def faster(name: str, than: str) -> tuple[bool, str]:
        pairs = [(row(name).at(b).speedup, row(than).at(b).speedup) for b in (1, 8)]
        return all(a > b for a, b in pairs), "; ".join(f"b{b}: {x} vs {y}" for b, (x, y) in zip((1, 8), pairs))

    goals = [
        ("OpenVINO INT8 built through the default 1.0-point gate", *gate(args.out, "openvino-int8")),
        ("ONNX INT8 built through the default 1.0-point gate", *gate(args.out, "onnx-int8")),
        ("OpenVINO INT8 mAP drop <= 1.0 point on coco_val128", drop("openvino-int8") <= 1.0,
         f"{drop('openvino-int8'):.2f}"),
        ("ONNX INT8 mAP drop <= 0.5 point on coco_val128", drop("onnx-int8") <= 0.5, f"{drop('onnx-int8'):.2f}"),
        ("ONNX INT8 faster than ONNX FP32 at b1 and b8", *faster("onnx-int8", "onnx-fp32")),
        ("OpenVINO INT8 faster than OpenVINO FP32 at b1 and b8", *faster("openvino-int8", "openvino-fp32")),
        ("BF16 mAP drop <= 0.5 point", drop("openvino-bf16") <= 0.5,
         f"{drop('openvino-bf16'):.2f} (executed {row('openvino-bf16').executed_precision})"),
        ("OpenVINO INT8 b1 speedup >= 4x", row("openvino-int8").at(1).speedup >= 4, row("openvino-int8").at(1).speedup),
        ("best b1 speedup >= 4.5x", best_b1.at(1).speedup >= 4.5, f"{best_b1.artifact} {best_b1.at(1).speedup}"),
        ("best b8 speedup >= 6x", (best_b8.at(8).speedup or 0) >= 6,
         f"{best_b8.artifact} {best_b8.at(8).speedup}"),
    ]
    for goal, met, value in goals:
        print(f"[{'met' if met else 'MISSED'}] {goal}: {value}")
    (args.report / "goals.json").write_text(json.dumps([{"goal": g, "met": m, "value": str(v)} for g, m, v in goals],
                                                       indent=2) + "\n")
    print_utilization(ok)


def print_utilization(rows: list[MatrixRow]) -> None:
    """Markdown: what each artifact achieves against the measured peak of the precision it runs in."""
    print("| artifact | runs in | GFLOPs | b1 img/s | b1 GOP/s | b1 util. | b8 img/s | b8 GOP/s | b8 util. "
          "| peak (GOP/s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        cells = [f"{r.at(b).throughput_ips:.1f} | {r.at(b).achieved_gops:.1f} | {r.at(b).utilization:.1%}"
                 for b in (1, 8)]
        print(f"| {r.artifact} | {r.executed_precision} | {r.gflops_per_image} | {cells[0]} | {cells[1]} | "
              f"{r.peak_of} {r.peak_gops:.0f} |")


if __name__ == "__main__":
    main()
