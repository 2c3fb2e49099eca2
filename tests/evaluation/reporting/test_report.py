"""The matrix files and the console summary, on hand-made results."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from tests.evaluation.handmade import SETTINGS, at_batch, report, row
from yolo_optimize.evaluation.reporting.matrix import UNSTABLE_SPREAD
from yolo_optimize.evaluation.reporting.report import build_report, load_report, rich_table, write_report
from yolo_optimize.evaluation.results import SCHEMA_VERSION, MatrixRow, Report
from yolo_optimize.evaluation.results_json import from_json
from yolo_optimize.evaluation.run_statistics import LatencyStats

VERSION_7 = Path(__file__).parents[1] / "data" / "results-v7"  # results.json, matrix.csv and matrix.md of version 7
ARTIFACTS = ("torchscript-fp32", "onnx-fp32", "onnx-fp16", "onnx-int8", "openvino-fp32", "openvino-fp16",
             "openvino-bf16", "openvino-int8")


def test_the_console_summary_fits_a_120_column_terminal_without_folding_a_cell() -> None:
    made = report(*(row(name, [50 + i, 51 + i, 49 + i], 0.34) for i, name in enumerate(ARTIFACTS)))
    lines = _printed(made).splitlines()
    assert max(len(line) for line in lines) <= 120
    assert all(any(f" {name} " in line for line in lines) for name in ARTIFACTS), "an artifact name was folded"


def test_the_console_summary_explains_its_mark_only_when_a_row_is_flagged() -> None:
    """A row whose processes disagree by more than UNSTABLE_SPREAD is marked '!' and the table says what that means;
    a steady matrix carries neither, nor does one whose unsteady row has no speedup to mark (no baseline)."""
    steady = report(row("onnx-fp32", [50, 51, 49], 0.34))
    flagged = report(row("onnx-fp32", [50, 80, 49], 0.34))
    unmarked = build_report([row("onnx-fp32", [50, 80, 49], 0.34)], SETTINGS)
    texts = [_printed(made) for made in (steady, flagged, unmarked)]
    assert "!" not in texts[0] and "!" not in texts[2]
    assert "x !" in texts[1] and f"! = the row's processes differ by more than {UNSTABLE_SPREAD:.0%}" in texts[1]


def _printed(made: Report) -> str:
    """The console summary as a 120-column terminal shows it, without colour."""
    console = Console(width=120, record=True, color_system=None)
    console.print(rich_table(made))
    return console.export_text()


def test_a_written_report_reads_back_as_the_same_typed_report(tmp_path: Path) -> None:
    made = report(row("onnx-fp32", [60, 61, 59], 0.343), row("openvino-int8", [40, 41, 39], 0.339))
    written = write_report(made, tmp_path)
    assert {p.name for p in written} >= {"results.json", "matrix.csv", "matrix.md", "report.html", "heatmap.svg",
                                         "heatmap.png", "pareto.svg", "latency.png", "memory.svg"}
    assert load_report(tmp_path) == made


def test_a_gpu_rows_copies_and_compute_are_the_medians_of_its_processes_and_read_back(tmp_path: Path) -> None:
    """On CUDA each process splits its runs into copy in / compute / copy out (CUDA events): the matrix shows the
    median over processes of each phase's median, and results.json keeps every raw sample."""
    gpu = row("tensorrt-fp16", [5.0, 6.0, 5.5], 0.343)
    for process, measurement in enumerate(gpu.measurements):
        measurement.batches[0].phases_ms = {phase: LatencyStats.of([ms * (process + 1) / 1e3] * 6)
                                            for phase, ms in (("copy_in", 0.5), ("compute", 4.0), ("copy_out", 0.25))}
    made = build_report([row("pytorch-fp32", [20, 21, 19], 0.343), gpu], replace(SETTINGS, device="cuda"))
    lines = {line.artifact: line for line in made.matrix}
    assert lines["tensorrt-fp16"].at(1).gpu_ms == {"copy_in": 1.0, "compute": 8.0, "copy_out": 0.5}
    assert lines["pytorch-fp32"].at(1).gpu_ms is None
    write_report(made, tmp_path)
    assert "| 1.00 / 8.00 / 0.50 |" in (tmp_path / "matrix.md").read_text()
    assert "b1 GPU ms in/compute/out" in (tmp_path / "matrix.md").read_text()
    assert load_report(tmp_path) == made


def test_a_version_7_results_file_loads_and_gives_the_matrix_files_version_7_wrote(tmp_path: Path) -> None:
    """Version 8 only typed the matrix, which is computed again from the rows on reading: a version-7 file loads as
    a report of this version, and its matrix.csv and matrix.md come out as version 7 wrote them."""
    loaded = load_report(VERSION_7)
    assert loaded.schema_version == SCHEMA_VERSION == 11
    write_report(loaded, tmp_path)
    for name in ("matrix.csv", "matrix.md"):
        assert (tmp_path / name).read_text() == (VERSION_7 / name).read_text(), name
    assert json.loads((tmp_path / "results.json").read_text())["schema_version"] == 11
    assert load_report(tmp_path) == loaded


def test_a_matrix_row_reads_back_from_results_json_as_the_same_typed_row() -> None:
    """results.json holds each matrix line as dataclasses.asdict writes it, its batch sizes as object keys;
    results_json.from_json reads it back as the line written (batch sizes as integers, pairs as tuples)."""
    rows = [at_batch(row("pytorch-fp32", [100, 101, 99], 0.343, end_to_end_ms=[120, 121, 119]), 2),
            at_batch(row("openvino-int8", [40, 41, 39], 0.339), 2, "the model's input is fixed at batch 1")]
    made = build_report(rows, replace(SETTINGS, batch_sizes=(1, 2)))
    written = json.loads(made.to_json())["matrix"]
    assert list(written[1]["batches"]) == ["1", "2"] and written[1]["batches"]["1"]["fast_runs"] == [60, 60]
    assert from_json(list[MatrixRow], written, "matrix") == made.matrix
    assert made.matrix[1].at(2).speedup_or_error() == "the model's input is fixed at batch 1"


@pytest.mark.parametrize(("change", "message"), [
    (lambda data: {"schema_version": SCHEMA_VERSION}, "results.environment: missing"),
    (lambda data: {**data, "schema_version": 12}, "this version reads 7, 8, 9, 10 or 11: evaluate again"),
    (lambda data: {**data, "rows": "x"}, 'results.rows: expected a list, got "x"'),
    (lambda data: {**data, "settings": {**data["settings"], "batch_sizes": ["1"]}},
     'results.settings.batch_sizes[0]: expected an integer, got "1"'),
    (lambda data: {**data, "settings": {**data["settings"], "batch_sizes": []}}, "expected positive batch sizes"),
    (lambda data: {**data, "rows": [{**data["rows"][0], "measurements": [{"load_s": "fast"}]}]},
     'results.rows[0].measurements[0].load_s: expected a number, got "fast"'),
    (lambda data: {**data, "rows": [{**data["rows"][0], "colour": 1}]}, "results.rows[0].colour: not a field"),
    (lambda data: {**data, "machine_limits": {"schema": 1}}, "results.machine_limits.measured_at: missing"),
    (lambda data: {**data, "rows": [{**data["rows"][0], "accuracy": {**data["rows"][0]["accuracy"],
                                                                     "map50_95": float("nan")}}]},
     "results.rows[0].accuracy.map50_95: expected a finite number within 0..1, got nan"),
    (lambda data: {**data, "rows": [{**data["rows"][0], "accuracy": {**data["rows"][0]["accuracy"], "map50": 1.5}}]},
     "results.rows[0].accuracy.map50: expected a finite number within 0..1, got 1.5"),
    (lambda data: {**data, "rows": [{**data["rows"][0], "measurements": [
        {**data["rows"][0]["measurements"][0], "batches": [
            {**data["rows"][0]["measurements"][0]["batches"][0], "latency": {
                **data["rows"][0]["measurements"][0]["batches"][0]["latency"], "samples_ms": [-5.0]}}]}]}]},
     "results.rows[0].measurements[0].batches[0].latency.samples_ms[0]: expected a finite number at least 0, got -5.0"),
])
def test_a_results_file_with_a_bad_field_is_refused_in_one_sentence_naming_it(good_report: Path, tmp_path: Path,
                                                                              change: Any, message: str) -> None:
    """The one reader of results.json (load_report, which recommend, report, report --compare and the API call
    before using a report) refuses each bad field by its path in the file, writing nothing."""
    import yolo_optimize as yo
    from yolo_optimize.errors import UserError

    bad = bad_results(good_report, tmp_path, change)
    with pytest.raises(UserError) as refused:
        load_report(bad)
    assert str(refused.value) == f"{bad / 'results.json'}: {message}" or (
        message in str(refused.value) and "\n" not in str(refused.value)), refused.value
    with pytest.raises(UserError, match=re.escape(message)):
        yo.recommend(bad)
    assert sorted(p.name for p in bad.iterdir()) == ["results.json"]


def test_every_command_that_reads_results_back_refuses_a_bad_file_in_one_line_and_exit_2(good_report: Path,
                                                                                         tmp_path: Path) -> None:
    """recommend, report and report --compare, each in its own process: one line naming the file and the field, exit
    2, no traceback, nothing written (the fields themselves: the test above, through the reader they share)."""
    from tests.conftest import optimize

    bad = bad_results(good_report, tmp_path, lambda data: {**data, "rows": "x"})
    for args in (("recommend", bad), ("report", bad), ("report", good_report, "--compare", bad)):
        result = optimize(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr.strip() == f'error: {bad / "results.json"}: results.rows: expected a list, got "x"', (
            args, result.stderr)
    assert sorted(p.name for p in bad.iterdir()) == ["results.json"]


@pytest.fixture(scope="module")
def good_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A report written once for the module: the tests that break its results.json break a copy."""
    good = tmp_path_factory.mktemp("good")
    write_report(report(row("onnx-fp32", [60, 61, 59], 0.343)), good)
    return good


def bad_results(good: Path, folder: Path, change: Any) -> Path:
    """``folder``/bad holding ``good``'s results.json as ``change`` leaves it, and nothing else."""
    bad = folder / "bad"
    bad.mkdir()
    (bad / "results.json").write_text(json.dumps(change(json.loads((good / "results.json").read_text()))))
    return bad


def test_a_failed_row_shows_no_precision_it_never_ran_in() -> None:
    made = report(row("onnx-fp32", [60, 61, 59], 0.343))
    made.rows[1].measurements, made.rows[1].error = [], "crashed: the process was killed by SIGSEGV"
    made = build_report(made.rows, SETTINGS)
    printed = _printed(made)
    assert "None" not in printed and "crashed: the process was killed by SIGSEGV" in printed
