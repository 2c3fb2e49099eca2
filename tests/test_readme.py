"""The README's figures are the saved results they cite: the matrix under "What it finds" row by row."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def readme_matrix() -> tuple[Path, list[dict[str, str]]]:
    """The results.json the "What it finds" section cites, and its table's rows (column -> cell)."""
    section = README.read_text().split("## What it finds", 1)[1].split("\n## ", 1)[0]
    cited = re.search(r"saved in\s+`(bench/results/[^`]+)`", section)
    assert cited, "the section names the folder its matrix comes from"
    lines = [line for line in section.splitlines() if line.startswith("|") and not line.startswith("|---")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    rows = [dict(zip(header, (cell.strip() for cell in line.strip("|").split("|")))) for line in lines[1:]]
    return ROOT / cited.group(1) / "results.json", rows


def close(printed: str, saved: float) -> bool:
    """``printed`` is ``saved`` rounded to the digits it shows."""
    number = re.search(r"-?\d+(\.\d+)?", printed)
    assert number, printed
    digits = len(number.group(1) or ".") - 1
    return abs(float(number.group(0)) - saved) <= 0.5 * 10 ** -digits + 1e-9


def test_every_figure_of_the_readme_matrix_is_its_saved_result() -> None:
    path, rows = readme_matrix()
    saved = {(m["model"], m["artifact"]): m for m in json.loads(path.read_text())["matrix"]}
    assert len(rows) >= 10
    for row in rows:
        uint8 = "--input uint8" in row["artifact"]
        key = ("yolov5n-uint8" if uint8 else "yolov5n", row["artifact"].split(",")[0].strip())
        found = saved[key]
        checks = {"runs in": None, "mAP50-95": "map50_95", "b1 img/s": "throughput_b1_ips",
                  "b1 speedup": "speedup_b1", "b1 end to end": "end_to_end_b1_ips",
                  "b8 img/s (mode)": "throughput_b8_ips", "b8 speedup": "speedup_b8"}
        assert found["executed_precision"].startswith(row["runs in"]), key
        for column, field in checks.items():
            if field is not None:
                assert close(row[column], found[field]), f"{key} {column}: README {row[column]}, saved {found[field]}"
        assert row["b8 img/s (mode)"].endswith(f"({found['mode_b8'].split()[0]})"), key


@pytest.mark.parametrize(("printed", "saved", "same"), [("3.25x", 3.2549, True), ("3.25x", 3.2551, False),
                                                        ("0.3395", 0.33954, True), ("24.2", 24.3, False)])
def test_a_figure_is_its_saved_value_rounded_to_the_digits_it_shows(printed: str, saved: float, same: bool) -> None:
    assert close(printed, saved) == same
