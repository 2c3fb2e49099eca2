"""The README's figures are the saved results they cite: the matrix under "What it finds" row by row."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from yolo_optimize.evaluation.reporting.report import load_report

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def readme_matrix() -> tuple[Path, list[dict[str, str]]]:
    """The report folder the "What it finds" section cites, and its table's rows (column -> cell)."""
    section = README.read_text().split("## What it finds", 1)[1].split("\n## ", 1)[0]
    cited = re.search(r"saved in\s+`(bench/results/[^`]+)`", section)
    assert cited, "the section names the folder its matrix comes from"
    lines = [line for line in section.splitlines() if line.startswith("|") and not line.startswith("|---")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    rows = [dict(zip(header, (cell.strip() for cell in line.strip("|").split("|")))) for line in lines[1:]]
    return ROOT / cited.group(1), rows


def close(printed: str, saved: float) -> bool:
    """``printed`` is ``saved`` rounded to the digits it shows."""
    number = re.search(r"-?\d+(\.\d+)?", printed)
    assert number, printed
    digits = len(number.group(1) or ".") - 1
    return abs(float(number.group(0)) - saved) <= 0.5 * 10 ** -digits + 1e-9


def test_every_figure_of_the_readme_matrix_is_its_saved_result() -> None:
    """Read through the report loader, as ``optimize report`` reads it, so that a saved report of any schema the
    loader accepts is compared by the same fields."""
    folder, rows = readme_matrix()
    saved = {(line.model, line.artifact): line for line in load_report(folder).matrix}
    assert len(rows) >= 10
    for row in rows:
        uint8 = "--input uint8" in row["artifact"]
        found = saved[("yolov5n-uint8" if uint8 else "yolov5n", row["artifact"].split(",")[0].strip())]
        b1, b8 = found.at(1), found.at(8)
        assert found.map50_95 is not None and found.executed_precision is not None
        assert found.executed_precision.startswith(row["runs in"]), found.artifact
        figures = {"mAP50-95": found.map50_95, "b1 img/s": b1.throughput_ips, "b1 speedup": b1.speedup,
                   "b1 end to end": b1.end_to_end_ips, "b8 img/s (mode)": b8.throughput_ips, "b8 speedup": b8.speedup}
        for column, value in figures.items():
            assert value is not None and close(row[column], value), \
                f"{found.artifact} {column}: README {row[column]}, saved {value}"
        assert row["b8 img/s (mode)"].endswith(f"({b8.mode.split()[0]})"), found.artifact


@pytest.mark.parametrize(("printed", "saved", "same"), [("3.25x", 3.2549, True), ("3.25x", 3.2551, False),
                                                        ("0.3395", 0.33954, True), ("24.2", 24.3, False)])
def test_a_figure_is_its_saved_value_rounded_to_the_digits_it_shows(printed: str, saved: float, same: bool) -> None:
    assert close(printed, saved) == same
