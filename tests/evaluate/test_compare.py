"""``optimize report --compare`` on real runs: a run against itself changes nothing; a deliberately slowed run
(one thread instead of every core) is refused as a different setup, and with --force flagged as a regression."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import brief, eval_args, optimize


@pytest.fixture(scope="module")
def slowed(small_artifacts: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """onnx-fp32 and the baseline measured at one thread, twice each (no accuracy)."""
    out = tmp_path_factory.mktemp("slowed")
    ours = shutil.copytree(small_artifacts, tmp_path_factory.mktemp("slowed-artifacts") / "artifacts",
                           ignore=shutil.ignore_patterns("openvino-*"))
    result = optimize(*eval_args(ours, out, "--no-accuracy", "--no-end-to-end", "--min-time", "0.3",
                                 "--repeats", "2", "--batch-sizes", "1", "--threads", "1"))
    assert result.returncode == 0, brief(result)
    return out


def test_a_run_compared_with_itself_shows_no_significant_change(evaluated: Path, tmp_path: Path) -> None:
    again = shutil.copytree(evaluated, tmp_path / "again")
    result = optimize("report", again, "--compare", evaluated, "--fail-on-regression", "5%")
    assert result.returncode == 0, brief(result)
    table = [line for line in (again / "comparison.md").read_text().splitlines() if line.startswith("| yolov5n")]
    rows = json.loads((evaluated / "results.json").read_text())["matrix"]
    assert len(table) == 2 * len(rows) and all(line.endswith("| no significant change |") for line in table)
    assert all("| +0.0% [" in line and "+0.00 points" in line for line in table)
    assert "id='comparison'" in (again / "report.html").read_text()


def test_runs_of_different_thread_counts_are_refused_unless_forced(evaluated: Path, slowed: Path) -> None:
    threads = json.loads((evaluated / "results.json").read_text())["settings"]["threads"]
    result = optimize("report", slowed, "--compare", evaluated)
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        f"error: the runs were measured differently (threads {threads} vs 1): their timings are not "
        "comparable; pass --force to compare anyway"]


def test_a_slowed_run_is_flagged_as_a_significant_regression_and_fails_the_guard(evaluated: Path,
                                                                                  slowed: Path) -> None:
    result = optimize("report", slowed, "--compare", evaluated, "--force", "--fail-on-regression", "5%")
    assert result.returncode == 1, brief(result)
    rows = {line.split("|")[2].strip(): line for line in (slowed / "comparison.md").read_text().splitlines()
            if line.startswith("| yolov5n")}
    assert set(rows) == {"pytorch-fp32", "onnx-fp32"}, "batch 1, the artifacts both runs have"
    assert all(line.endswith("| slower |") for line in rows.values()), rows
    assert "Compared across different setups (--force): threads" in (slowed / "comparison.md").read_text()
    assert "regression: 2 change(s) beyond the limit" in result.stderr
    assert "In one run only:" in (slowed / "comparison.md").read_text()

