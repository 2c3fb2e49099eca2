"""``optimize recommend`` on hand-made results whose answer is known: the fastest artifact within the budget, a tie
when two are within noise, limits that exclude, and the command's output and exit code."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

import yolo_optimize as yo
from tests.conftest import optimize
from tests.evaluation.handmade import at_batch, report, row
from tests.evaluation.reporting.test_report import VERSION_7
from yolo_optimize.errors import UserError
from yolo_optimize.evaluation.reporting.matrix import busy_warning, calibration_warning, matrix_columns
from yolo_optimize.evaluation.reporting.options import RecommendOptions
from yolo_optimize.evaluation.reporting.recommend import Budget, recommend, recommendations
from yolo_optimize.evaluation.reporting.recommendation_text import brief, describe
from yolo_optimize.evaluation.reporting.report import load_report, write_report
from yolo_optimize.evaluation.results import Report
from yolo_optimize.evaluation.run_statistics import LatencyStats
from yolo_optimize.host.busy import HostUse
from yolo_optimize.runtime.accuracy import RANDOM_WEIGHTS, Accuracy


def test_the_fastest_artifact_within_the_accuracy_budget_is_picked_over_a_faster_inaccurate_one() -> None:
    found, = recommend(report(row("onnx-fp32", [60, 61, 59], 0.343), row("onnx-int8", [30, 31, 29], 0.320),
                              row("openvino-int8", [40, 41, 39], 0.339)), Budget(1))
    assert found.choice and found.choice.artifact == "openvino-int8" and not found.tie
    assert found.runner_up and found.runner_up.artifact == "onnx-fp32"
    assert "loses 2.30 points" in found.excluded["onnx-int8"]
    assert found.choice.throughput_range[0] < found.choice.throughput_ips < found.choice.throughput_range[1]
    assert "import openvino as ov" in found.choice.snippet and "openvino-int8.file" in found.choice.snippet


def test_two_artifacts_within_noise_are_reported_as_a_tie() -> None:
    found, = recommend(report(row("onnx-fp32", [50, 52, 49], 0.343), row("openvino-fp32", [51, 49, 50], 0.343)),
                       Budget(1))
    assert found.tie and {found.choice.artifact, found.runner_up.artifact} == {"onnx-fp32", "openvino-fp32"}
    assert "within measurement noise" in found.verdict


def test_latency_and_memory_limits_exclude_with_the_reason() -> None:
    rows = (row("onnx-fp32", [60, 61, 59], 0.343, memory_mb=200), row("openvino-fp32", [40, 41, 39], 0.343,
                                                                       memory_mb=900))
    found, = recommend(report(*rows), Budget(1, RecommendOptions(max_latency_ms=70, max_memory_mb=500)))
    assert found.choice.artifact == "onnx-fp32" and found.runner_up is None
    assert "peak memory 900 MB over 500 MB" in found.excluded["openvino-fp32"]
    assert "over 70 ms" in found.excluded["pytorch-fp32"]


def test_the_command_prints_the_pick_and_its_code_and_fails_when_nothing_fits(tmp_path: Path) -> None:
    made = report(row("onnx-fp32", [60, 61, 59], 0.343), row("openvino-int8", [40, 41, 39], 0.339))
    (tmp_path / "results.json").write_text(made.to_json())
    result = optimize("recommend", tmp_path, "--batch-size", "1")
    assert result.returncode == 0, result.stderr
    assert "ship: openvino-int8 (artifacts/yolov5n/openvino-int8/openvino-int8.file)" in result.stdout
    assert "runner-up: onnx-fp32" in result.stdout and "compile_model(" in result.stdout
    nothing = optimize("recommend", tmp_path, "--max-latency-ms", "1")
    assert nothing.returncode == 1 and "no artifact meets the budget" in nothing.stdout
    wrong = optimize("recommend", tmp_path / "missing")
    assert wrong.returncode == 2 and len(wrong.stderr.strip().splitlines()) == 1


def test_every_measured_batch_size_is_recommended_unless_one_is_named_and_the_api_asks_which() -> None:
    """The command and the API call one function with one declaration: by default every batch size the report
    measured (the deployment's batch is not known), one when named; a size or a model the report lacks is refused in
    one line, and the API, which returns one pick, asks for a batch size where the report measured several."""
    made = report(*(at_batch(one, 8) for one in (row("onnx-fp32", [60, 61, 59], 0.343),
                                                  row("openvino-int8", [40, 41, 39], 0.339))))
    made = replace(made, settings=replace(made.settings, batch_sizes=(1, 8)))
    assert [(pick.model, pick.batch) for pick in recommendations(made, RecommendOptions())] == [("yolov5n", 1),
                                                                                                  ("yolov5n", 8)]
    assert [pick.batch for pick in recommendations(made, RecommendOptions(batch_size=8, model="yolov5n"))] == [8]
    with pytest.raises(UserError, match=r"^the report measured batch sizes \[1, 8\], not 4$"):
        recommendations(made, RecommendOptions(batch_size=4))
    with pytest.raises(UserError, match=r"^the report has no model 'yolov8n' \(it has yolov5n\)$"):
        recommendations(made, RecommendOptions(model="yolov8n"))
    with pytest.raises(UserError, match=r"^the report measured batch sizes \[1, 8\]: name one with batch_size=$"):
        yo.recommend(made)
    assert yo.recommend(made, batch_size=8).recommendation.batch == 8


def test_ranking_end_to_end_picks_the_artifact_whose_deployed_path_is_faster() -> None:
    """onnx-int8 infers faster but its end-to-end path is slower than openvino-int8's: --by e2e flips the pick, and
    both figures are shown either way."""
    rows = (row("onnx-int8", [30, 31, 29], 0.340, end_to_end_ms=[60, 61, 59]),
            row("openvino-int8", [40, 41, 39], 0.340, end_to_end_ms=[45, 46, 44]))
    by_inference, = recommend(report(*rows), Budget(1))
    by_path, = recommend(report(*rows), Budget(1, RecommendOptions(by="e2e")))
    assert by_inference.choice.artifact == "onnx-int8" and by_path.choice.artifact == "openvino-int8"
    assert "faster end to end than onnx-int8" in by_path.verdict
    choice = by_path.choice
    assert choice.throughput_ips == choice.end_to_end_ips and choice.inference_ips > choice.end_to_end_ips
    assert abs(choice.end_to_end_ips - 1e3 / 45) < 0.5


def test_a_row_without_its_end_to_end_path_is_not_ranked_on_it() -> None:
    found, = recommend(report(row("onnx-fp32", [60, 61, 59], 0.343)), Budget(1, RecommendOptions(by="e2e")))
    assert found.choice is None and found.excluded["onnx-fp32"] == "not measured end to end at batch 1"


def test_a_gpu_row_is_held_to_its_gpu_memory_and_the_matrix_shows_it_beside_host_memory() -> None:
    from yolo_optimize.evaluation.reporting.matrix import matrix_columns

    gpu_row = row("torchscript-fp16", [10, 11, 9], 0.340, memory_mb=1800.0)
    gpu_row.measurements = [replace(m, cuda_peak_mb=3400.0) for m in gpu_row.measurements]
    made = report(gpu_row)
    line = next(line for line in made.matrix if line.artifact == "torchscript-fp16")
    assert (line.gpu_mb, line.peak_rss_mb) == (3400.0, 1800.0)
    assert next(line for line in made.matrix if line.artifact == "pytorch-fp32").gpu_mb is None
    assert "GPU MB" in [column.header for column in matrix_columns(made)]
    assert "GPU MB" not in [column.header for column in matrix_columns(report())]  # a CPU evaluation: no such column
    found, = recommend(made, Budget(1, RecommendOptions(max_memory_mb=2000)))
    assert found.excluded["torchscript-fp16"] == "peak GPU memory 3400 MB over 2000 MB"
    found, = recommend(made, Budget(1))
    assert found.choice.memory_mb == 3400.0 and "peak 3400 MB on the GPU" in describe(found)


def test_a_clear_winner_on_a_quiet_host_with_a_steady_baseline_is_a_confident_ranking() -> None:
    found, = recommend(report(row("onnx-fp32", [60, 61, 59], 0.343), row("openvino-int8", [40, 41, 39], 0.339)),
                       Budget(1))
    assert found.choice.artifact == "openvino-int8" and not found.tie and found.doubt == ""


def test_a_baseline_whose_processes_disagree_beyond_the_tie_margin_makes_the_ranking_not_confident() -> None:
    """One of the baseline's three processes 30% slower throughout (no fast state in it): the winner is still
    named, said not to be a confident ranking, with the baseline's disagreement in the host's fast state."""
    made = report(row("onnx-fp32", [60, 61, 59], 0.343), row("openvino-int8", [40, 41, 39], 0.339))
    made.rows[0] = row("pytorch-fp32", [100, 130, 99], 0.343)
    found, = recommend(made, Budget(1))
    assert found.choice.artifact == "openvino-int8"
    assert found.doubt.startswith("not a confident ranking: the PyTorch baseline's 3 processes disagree by 3")
    assert "more than the 3% tie margin" in found.doubt
    assert found.doubt in brief(found) and found.doubt in describe(found)


def test_rows_measured_while_other_processes_used_the_cpus_are_marked_and_the_ranking_is_not_confident() -> None:
    """One process of the runner-up measured while another job used a core and a half of the two its two threads
    ran on: its line is marked and says how busy, and the ranking names it."""
    runner_up = row("onnx-fp32", [60, 61, 59], 0.343)
    runner_up.measurements[1].host = HostUse(2, 2, wall_s=4.0, others_cpu_s=6.0, blocks=20, busy_blocks=18)
    quiet = HostUse(2, 2, wall_s=4.0, others_cpu_s=0.1, blocks=20)
    winner = row("openvino-int8", [40, 41, 39], 0.339)
    for measurement in winner.measurements:
        measurement.host = quiet
    made = report(runner_up, winner)
    lines = {line.artifact: line for line in made.matrix}
    assert lines["onnx-fp32"].busy_host == ("busy host in 1 of its 3 processes: other processes used 1.50 of 2 CPUs "
                                            "(this measurement 2 threads), steal 0%, 18 of 20 blocks busy")
    assert lines["onnx-fp32"].busy_host in lines["onnx-fp32"].note and not lines["openvino-int8"].busy_host
    assert _speedup_text(made, "onnx-fp32").endswith(" *") and not _speedup_text(made, "openvino-int8").endswith("*")
    assert busy_warning(made).startswith("warning: the host was busy while 1 of 3 rows measured (onnx-fp32)")
    found, = recommend(made, Budget(1))
    assert found.choice.artifact == "openvino-int8"
    assert found.doubt == "not a confident ranking: other processes shared the CPUs while onnx-fp32 measured"


def _speedup_text(made: Report, artifact: str) -> str:
    column = next(column for column in matrix_columns(made) if column.key == "speedup_b1")
    return column.text(next(line for line in made.matrix if line.artifact == artifact))


def test_without_the_baseline_s_accuracy_the_budget_holds_every_row_to_the_most_accurate_fp32_artifact() -> None:
    """The PyTorch baseline failed: the budget is not dropped (an INT8 file scoring 0.01 is not shipped over one
    scoring 0.335) but counted from the most accurate FP32 artifact's mAP, and the recommendation says so; with no
    FP32 accuracy at all there is no reference, and nothing whose accuracy counts is recommended."""
    made = report(row("onnx-fp32", [60, 61, 59], 0.343), row("openvino-fp32", [55, 56, 54], 0.341),
                  row("openvino-int8", [20, 21, 19], 0.010), row("onnx-int8", [30, 31, 29], 0.335))
    made.rows[0].error, made.rows[0].accuracy = "crashed: RuntimeError: out of file handles", None
    found, = recommend(made, Budget(1))
    assert found.choice.artifact == "onnx-int8" and found.excluded["openvino-int8"] == "loses 33.30 points (budget 1)"
    assert found.reference == ("onnx-fp32's mAP50-95 0.3430, the most accurate FP32 artifact's, since the PyTorch "
                               "baseline failed (crashed: RuntimeError: out of file handles)")
    assert found.verdict.endswith(f"(accuracy held to {found.reference})") and found.reference in describe(found)
    assert found.choice.accuracy == "mAP50-95 0.3350 (-0.80 points)"
    made.rows = [made.rows[0], *made.rows[3:]]  # the INT8 rows alone: no reference
    found, = recommend(made, Budget(1))
    why = ("no reference accuracy: the PyTorch baseline failed (crashed: RuntimeError: out of file handles) and no "
           "FP32 artifact's was measured")
    assert found.choice is None and found.excluded == {"pytorch-fp32": made.rows[0].error, "openvino-int8": why,
                                                       "onnx-int8": why}
    assert found.verdict == f"no artifact meets the budget ({why})"


def test_a_row_whose_accuracy_is_unknown_is_not_recommended_where_the_others_was_measured() -> None:
    """Accuracy measured for the model: a faster row without it cannot be held to the budget and is left out, with
    why. Measured for no row (random weights, --no-accuracy): speed alone decides, and the verdict says so."""
    unknown = row("openvino-int8", [20, 21, 19], 0.0)
    unknown.accuracy = None
    made = report(row("onnx-fp32", [60, 61, 59], 0.343), unknown)
    found, = recommend(made, Budget(1))
    assert found.choice.artifact == "onnx-fp32" and found.reference == "the PyTorch FP32 baseline"
    assert found.excluded["openvino-int8"] == ("accuracy unknown (not measured) where the others' was measured: "
                                               "cannot be held to the accuracy budget")
    for each in made.rows:
        each.accuracy = Accuracy(None, None, 128, RANDOM_WEIGHTS)
    found, = recommend(made, Budget(1))
    assert found.choice.artifact == "openvino-int8" and not found.excluded and found.reference == ""
    assert found.verdict.endswith("(accuracy not measured: ranked on speed alone)")
    assert found.choice.accuracy == RANDOM_WEIGHTS


def test_a_row_whose_accuracy_was_measured_on_its_calibration_images_is_not_counted_within_the_budget(
        tmp_path: Path) -> None:
    """24 of the evaluation's images calibrated the INT8 file: its mAP there is no evidence, so it is left out under
    the accuracy budget with why, its note and the eval's warning say it, and results.json keeps it."""
    seen = row("openvino-int8", [20, 21, 19], 0.343)
    seen.calibration_overlap = 24
    made = report(row("onnx-fp32", [60, 61, 59], 0.343), seen)
    found, = recommend(made, Budget(1))
    note = ("accuracy measured on 24 of its 128 evaluation images that it was calibrated on: not evidence of its "
            "accuracy")
    assert found.choice.artifact == "onnx-fp32"
    assert found.excluded["openvino-int8"] == f"{note}, so it is not counted within the accuracy budget"
    assert next(line for line in made.matrix if line.artifact == "openvino-int8").note == note
    assert calibration_warning(made).startswith("warning: accuracy measured on images the artifact was calibrated "
                                                "on: yolov5n openvino-int8 (24 images): not evidence of its accuracy")
    write_report(made, tmp_path)
    assert load_report(tmp_path).rows[2].calibration_overlap == 24
    assert calibration_warning(made) in (tmp_path / "report.html").read_text()


def test_results_whose_timed_runs_read_zero_ms_are_refused_in_one_line_and_never_crash_recommend(
        tmp_path: Path) -> None:
    """A results.json edited to all-zero latencies: no throughput can be read from it (images over 0 s), so the
    command and the API refuse it as malformed (exit 2, one line); a report built in memory with such a row leaves
    that row out instead of dividing by zero."""
    data = json.loads((VERSION_7 / "results.json").read_text())
    for measurement in (m for each in data["rows"] for m in each["measurements"]):
        for stats in (s for batch in measurement["batches"] for s in (batch["latency"], batch["end_to_end"]) if s):
            stats.update(samples_ms=[0.0] * len(stats["samples_ms"]), mean_ms=0.0, std_ms=0.0, p50_ms=0.0,
                         p90_ms=0.0, p99_ms=0.0)
    (tmp_path / "results.json").write_text(json.dumps(data))
    refused = optimize("recommend", tmp_path)
    assert refused.returncode == 2 and refused.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'results.json'}: results.rows[0].measurements[0].batches[0].latency.samples_ms: timed "
        "runs of 0 ms are not a measurement: evaluate again"]
    with pytest.raises(UserError, match="timed runs of 0 ms are not a measurement"):
        yo.recommend(tmp_path)
    zero = row("openvino-int8", [20, 21, 19], 0.343)
    for measurement in zero.measurements:
        measurement.batches[0].latency = LatencyStats([0.0] * 20, 0.0, 0.0, 0.0, 0.0, 0.0)
    found, = recommend(report(row("onnx-fp32", [60, 61, 59], 0.343), zero), Budget(1))
    assert found.choice.artifact == "onnx-fp32" and found.excluded["openvino-int8"] == "not measured at batch 1"
