"""The matrix files and the console summary, on hand-made results."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from tests.evaluate.handmade import report, row
from yolo_optimize.evaluate.report import rich_table, write_report
from yolo_optimize.evaluate.results import load_report

ARTIFACTS = ("torchscript-fp32", "onnx-fp32", "onnx-fp16", "onnx-int8", "openvino-fp32", "openvino-fp16",
             "openvino-bf16", "openvino-int8")


def test_the_console_summary_fits_a_120_column_terminal_without_folding_a_cell() -> None:
    made = report(*(row(name, [50 + i, 51 + i, 49 + i], 0.34) for i, name in enumerate(ARTIFACTS)))
    console = Console(width=120, record=True, color_system=None)
    console.print(rich_table(made))
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= 120
    assert all(any(f" {name} " in line for line in lines) for name in ARTIFACTS), "an artifact name was folded"


def test_a_written_report_reads_back_as_the_same_typed_report(tmp_path: Path) -> None:
    made = report(row("onnx-fp32", [60, 61, 59], 0.343), row("openvino-int8", [40, 41, 39], 0.339))
    written = write_report(made, tmp_path)
    assert {p.name for p in written} >= {"results.json", "matrix.csv", "matrix.md", "report.html", "heatmap.svg",
                                         "heatmap.png", "pareto.svg", "latency.png", "memory.svg"}
    assert load_report(tmp_path) == made
