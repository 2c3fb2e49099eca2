"""``optimize eval`` end to end on the session build: mAP agreement, the matrix, robustness."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from tests.conftest import QUICK_EVAL, VAL_DATA, brief, eval_args, on_a_small_disk, optimize, written_matrix
from tests.host.test_busy import spinning
from yolo_optimize.artifact import Manifest
from yolo_optimize.evaluation.reporting.recommend import Budget, recommend
from yolo_optimize.evaluation.reporting.report import load_report
from yolo_optimize.evaluation.results import MatrixRow
from yolo_optimize.evaluation.run_statistics import TIE_MARGIN
from yolo_optimize.host.busy import HostMeter
from yolo_optimize.runtime.runners.onnxruntime import IDLE_THREADS, SLEEPING

FP32_EXPORTS = ("onnx-fp32", "openvino-fp32")


def matrix(report: Path) -> dict[str, MatrixRow]:
    return {line.artifact: line for line in written_matrix(report)}


def test_every_fp32_export_matches_the_pytorch_map(evaluated: Path) -> None:
    rows = matrix(evaluated)
    baseline = rows["pytorch-fp32"].map50_95
    assert baseline is not None and 0.2 < baseline < 0.6
    for name in FP32_EXPORTS:
        assert abs(rows[name].map50_95 - baseline) <= 0.005, (name, rows[name].map50_95, baseline)


def test_every_row_reports_its_weights_at_the_precision_they_are_stored_in(evaluated: Path) -> None:
    """Read back from each runtime's loaded model: FP32 = 4 bytes per parameter (plus the Detect head's constant
    grids in exported graphs), FP16 files half of their FP32 sibling's."""
    rows = matrix(evaluated)
    parameters = json.loads((evaluated / "results.json").read_text())["rows"][0]["facts"]["parameters"]
    for name, line in rows.items():
        precision = name.rsplit("-", 1)[1]
        fp32 = rows[name.replace(precision, "fp32")].weights_mb
        assert fp32 == pytest.approx(parameters * 4 / 2**20, rel=0.08), name
        assert line.weights_mb == pytest.approx(fp32 / 2 if precision == "fp16" else fp32, rel=0.01), name
    assert "| weights MB |" in (evaluated / "matrix.md").read_text()


def test_every_row_is_measured_at_every_batch_size_in_two_processes(evaluated: Path) -> None:
    results = json.loads((evaluated / "results.json").read_text())
    assert results["settings"]["threads"] >= 1 and results["environment"]["cpu"]
    for row in results["rows"]:
        assert len(row["measurements"]) >= 2, row["name"]
        for measurement in row["measurements"]:
            assert measurement["peak_rss_mb"] > 50 and measurement["load_s"] > 0
            for batch in measurement["batches"]:
                latency = batch["latency"]
                assert 0 < latency["p50_ms"] <= latency["p99_ms"] and len(latency["samples_ms"]) >= 5
                assert batch["throughput_ips"] > 0
    assert all([m["round"] for m in row["measurements"]] == [0, 1] for row in results["rows"])


def test_speedups_are_fast_state_throughput_ratios_recomputable_from_the_raw_samples(evaluated: Path) -> None:
    """Each speedup is the row's fast-state throughput over the baseline's, both recomputed here from the raw
    samples in results.json; throughput and b1 p50 are the same figures; the range spans the per-round ratios."""
    from yolo_optimize.evaluation.run_statistics import fast_state

    results = json.loads((evaluated / "results.json").read_text())
    rows = matrix(evaluated)
    assert rows["pytorch-fp32"].at(1).speedup == rows["pytorch-fp32"].at(2).speedup == 1.0

    def raw(name: str, batch: int) -> list[dict]:
        row = next(r for r in results["rows"] if r["name"] == name)
        return [{"round": m["round"], **next(b for b in m["batches"] if b["batch"] == batch)}
                for m in row["measurements"]]

    for name, line in rows.items():
        for batch in (1, 2):
            mine, base = raw(name, batch), raw("pytorch-fp32", batch)
            fast = fast_state([m["latency"]["samples_ms"] for m in mine], batch)
            base_fast = fast_state([m["latency"]["samples_ms"] for m in base], batch)
            assert fast and base_fast and 0 < fast.runs_kept <= fast.runs
            cells = line.at(batch)
            assert cells.fast_runs == (fast.runs_kept, fast.runs)
            assert cells.throughput_ips == fast.throughput_ips
            assert cells.speedup == pytest.approx(fast.throughput_ips / base_fast.throughput_ips, abs=1e-3)
            ratios = [m["throughput_ips"] / b["throughput_ips"] for m, b in zip(mine, base) if m["round"] == b["round"]]
            assert cells.speedup_range == (round(min(ratios), 3), round(max(ratios), 3))
        latency = fast_state([m["latency"]["samples_ms"] for m in raw(name, 1)], 1).latency
        assert line.latency_b1_p50_ms == latency.p50_ms


def test_every_batch_size_records_the_configuration_it_ran_in(evaluated: Path) -> None:
    """auto: batch 1 in the latency configuration on every thread (the PyTorch baseline: on those it chose), batch 2
    in the runtime's throughput configuration where it has one (one-thread streams); PyTorch and TorchScript run as
    they are and say so; the matrix shows the label."""
    results = json.loads((evaluated / "results.json").read_text())
    assert results["settings"]["mode"] == "auto" and results["settings"]["end_to_end"] is True
    rows = matrix(evaluated)
    for row in results["rows"]:
        for measurement in row["measurements"]:
            executions = {b["batch"]: b["execution"] for b in measurement["batches"]}
            threads = results["settings"]["threads"]
            ran_on = row["threads_choice"]["chosen"] if row["threads_choice"] else threads
            assert executions[1]["mode"] == "latency" and executions[1]["threads_per_stream"] == ran_on
            throughput = row["target"] in ("onnx", "openvino")
            assert executions[2]["mode"] == ("throughput" if throughput else "latency"), row["name"]
            if throughput:
                assert executions[2]["streams"] == threads and executions[2]["request_batch"] == 1
            else:
                assert executions[2]["note"] == f"{row['target']} has no throughput configuration: run as it is"
        assert rows[row["name"]].at(2).mode == row["measurements"][0]["batches"][1]["execution"]["label"]
    assert "| b2 mode |" in (evaluated / "matrix.md").read_text()


def test_end_to_end_rates_are_the_pipelines_fast_state_recomputable_from_its_raw_intervals(evaluated: Path) -> None:
    """Every row's deployed path was timed in the same turns as its inference; the matrix's e2e img/s is the fast
    state of those intervals, its share the ratio to the inference-only figure."""
    from yolo_optimize.evaluation.run_statistics import fast_state

    results = json.loads((evaluated / "results.json").read_text())
    rows = matrix(evaluated)
    for row in results["rows"]:
        line = rows[row["name"]]
        for batch in (1, 2):
            found = [b for m in row["measurements"] for b in m["batches"] if b["batch"] == batch]
            intervals = [b["end_to_end"]["samples_ms"] for b in found]
            assert all(len(i) >= 1 for i in intervals) and sum(map(len, intervals)) >= 5, row["name"]
            fast, cells = fast_state(intervals, batch), line.at(batch)
            assert fast and cells.end_to_end_ips == fast.throughput_ips
            assert cells.end_to_end_share == round(fast.throughput_ips / cells.throughput_ips, 3)
            assert 0.1 < cells.end_to_end_share < 1.5, (row["name"], batch)
            how = [b["execution"]["end_to_end"] for b in found]  # how it read images, and what bounded it
            assert all(h["decoder_threads"] == 1 and h["bound_by"].startswith(("reading", "the runtime")) for h in how)


def test_the_baseline_runs_on_the_threads_it_measured_faster_and_every_process_records_the_host(
        evaluated: Path) -> None:
    """The CPU baseline's first process times both thread counts and keeps the faster (one only when faster by
    more than the margin); every later process runs on that, the matrix says so; every process of every row records
    what else ran on its CPUs over each block it timed."""
    report = load_report(evaluated)
    threads = report.settings.threads
    baseline = next(row for row in report.rows if row.target == "pytorch")
    choice = baseline.threads_choice
    if threads < 2:
        assert choice is None
        pytest.skip("one thread: nothing to choose for the baseline (this host gives the evaluation one CPU)")
    assert choice is not None and choice.offered == threads
    assert choice.chosen == (1 if choice.p50_ms_one * (1 + TIE_MARGIN) < choice.p50_ms_offered else threads)
    assert [m.threads for m in baseline.measurements] == [choice.chosen] * len(baseline.measurements)
    assert all(row.threads_choice is None for row in report.rows if row is not baseline)
    assert choice.describe() in matrix(evaluated)["pytorch-fp32"].note
    for row in report.rows:
        for measurement in row.measurements:
            assert measurement.host and measurement.host.blocks >= len(report.settings.batch_sizes) * 2
            assert measurement.host.wall_s > 0 and measurement.host.threads == measurement.threads


def test_onnx_rows_run_as_the_variant_a_process_of_their_own_measured_faster(evaluated: Path) -> None:
    """How ONNX Runtime's idle threads wait (sleeping, or spinning within runs) is timed both ways, before the first
    round, in a process of the ONNX row's own at the smallest batch size, sleeping kept unless the other is faster by
    more than the margin; every measured process then runs so and records it in its configuration, and the matrix
    says so. No other runtime offers a choice."""
    report = load_report(evaluated)
    onnx = [row for row in report.rows if row.target == "onnx"]
    if report.settings.threads < 2:
        assert all(row.variant_choice is None for row in onnx)
        pytest.skip("one thread: ONNX Runtime has no idle threads to choose for (this host gives the evaluation one "
                    "CPU)")
    other = next(variant for variant in IDLE_THREADS if variant != SLEEPING)
    for row in onnx:
        choice = row.variant_choice
        assert choice is not None and choice.batch == 1 and list(choice.p50_ms) == list(IDLE_THREADS), row.name
        faster = choice.p50_ms[other] * (1 + TIE_MARGIN) < choice.p50_ms[SLEEPING]
        assert choice.chosen == (other if faster else SLEEPING)
        entries = IDLE_THREADS[choice.chosen]
        for measurement in row.measurements:
            ran = next(batch.execution for batch in measurement.batches if batch.batch == 1)
            assert ran and {key: ran["settings"][key] for key in entries} == entries, row.name
        assert choice.describe() in matrix(evaluated)[row.name].note
    assert len(onnx) == 2 and all(row.variant_choice is None for row in report.rows if row.target != "onnx")


def test_a_busy_host_marks_every_row_and_no_ranking_is_confident_even_with_one_repeat(small_artifacts: Path,
                                                                                     tmp_path: Path) -> None:
    """A process per CPU and one more spinning throughout a one-process-per-row evaluation (so that a baseline moved
    to one thread still shares its CPU): every row measured is marked and says how busy, the console warns, the
    report records the host before measuring, and the recommendation says it is not confident."""
    root = shutil.copytree(small_artifacts, tmp_path / "artifacts")
    shutil.rmtree(root / "yolov5n" / "openvino-fp32")  # the baseline and one artifact: a ranking of two
    with spinning(len(HostMeter().cpus) + 1):
        result = optimize(*eval_args(root, tmp_path / "report", *QUICK_EVAL))
    assert result.returncode == 0, brief(result)
    measured = [line for line in written_matrix(tmp_path / "report") if line.status == "ok"]
    assert len(measured) == 2 and all("busy host in 1 of its 1 processes" in line.busy_host for line in measured)
    assert all(line.busy_host in line.note for line in measured)
    assert "warning: the host was busy before measuring" in " ".join(result.stderr.split())
    report = load_report(tmp_path / "report")
    assert report.environment["host_before"]["busy"]
    assert all(pick.doubt.startswith("not a confident ranking: other processes shared the CPUs")
               for pick in recommend(report, Budget(1)))
    assert "not a confident ranking" in result.stdout
    choices = [row.threads_choice or row.variant_choice for row in report.rows]  # the baseline's, ONNX Runtime's
    assert len(choices) == 2 and all(choice and choice.busy_host for choice in choices), choices
    assert all("chosen while the host was busy" in line.note for line in measured)


def test_the_schedule_rotates_the_artifacts_behind_the_baseline() -> None:
    from yolo_optimize.evaluation.measuring.evaluator import measurement_schedule
    from yolo_optimize.evaluation.results import Row

    group = [(Row(name, "m", name.split("-")[0], "fp32", "", None, True), None)
             for name in ("pytorch-fp32", "a-fp32", "b-fp32", "c-fp32")]
    schedule = [(round_, row.name[0]) for round_, (row, _) in measurement_schedule(group, 3)]  # type: ignore[arg-type]  # rows stand in for candidates: only their names are read
    assert schedule == [(0, "p"), (0, "a"), (0, "b"), (0, "c"), (1, "p"), (1, "b"), (1, "c"), (1, "a"),
                        (2, "p"), (2, "c"), (2, "a"), (2, "b")]


def test_matrix_files_agree_with_results_json(evaluated: Path) -> None:
    rows = matrix(evaluated)
    csv_lines = (evaluated / "matrix.csv").read_text().splitlines()
    assert len(csv_lines) == len(rows) + 1
    markdown = (evaluated / "matrix.md").read_text()
    html = (evaluated / "report.html").read_text()
    for name, line in rows.items():
        assert name in markdown and name in html
        assert f"{line.at(2).speedup:.2f}x" in markdown
        assert any(f"{line.map50_95}" in row for row in csv_lines if row.startswith(f"yolov5n,{name},"))


def test_every_failure_is_its_rows_own_and_the_rest_still_run(small_artifacts: Path, tmp_path: Path) -> None:
    """In one evaluation: a corrupted IR (refused by its manifest), an ONNX file that crashes its runtime under a
    consistent manifest (only the runtime can find the fault), and a TensorRT engine and a torch-tensorrt program
    among CPU artifacts (never run, nor compared with the CPU baseline); the baseline is still measured, and the run,
    which measured no artifact, exits 1 with its report beside --out."""
    root = shutil.copytree(small_artifacts, tmp_path / "artifacts")
    for target, entry in (("tensorrt", "yolov5n.engine"), ("torch-tensorrt", "yolov5n_torchtrt.ep")):
        folder = shutil.copytree(root / "yolov5n" / "onnx-fp32", root / "yolov5n" / f"{target}-fp32")
        (folder / "yolov5n.onnx").rename(folder / entry)  # its content never matters: it must not be loaded
        replace(Manifest.read(folder), node=f"{target}-fp32", stage=target, target=target, entry=entry).write(folder)
    with open(root / "yolov5n" / "openvino-fp32" / "yolov5n_openvino_model" / "yolov5n.bin", "r+b") as handle:
        handle.write(b"corrupt")
    folder = root / "yolov5n" / "onnx-fp32"
    (folder / "yolov5n.onnx").write_bytes(b"\x08\x07not a protobuf graph")
    Manifest.read(folder).write(folder)
    result = optimize(*eval_args(root, tmp_path / "report", *QUICK_EVAL))
    assert result.returncode == 1, brief(result)  # no artifact measured: a failed run, its report beside --out
    rows = matrix(tmp_path / "report-failed")
    assert rows["openvino-fp32"].status == "failed: sha256 mismatch for yolov5n_openvino_model/yolov5n.bin"
    assert rows["onnx-fp32"].status.startswith("failed: could not load: InvalidProtobuf")
    assert rows["tensorrt-fp32"].status == ("skipped: TensorRT engines run on a CUDA GPU; this evaluation runs on "
                                            "cpu (--device cuda on a GPU host)")
    assert rows["torch-tensorrt-fp32"].status == ("skipped: torch-tensorrt programs run on a CUDA GPU; this "
                                                  "evaluation runs on cpu (--device cuda)")
    assert rows["pytorch-fp32"].status == "ok"


def test_an_imgsz_no_artifact_was_built_at_is_refused_before_anything_runs(small_artifacts: Path,
                                                                          tmp_path: Path) -> None:
    result = optimize(*eval_args(small_artifacts, tmp_path / "report", *QUICK_EVAL, "--imgsz", "320"))
    assert result.returncode == 2 and result.stderr.count("\n") == 1, brief(result)
    assert "--imgsz 320: the artifacts under" in result.stderr and "were built at 640" in result.stderr
    assert not (tmp_path / "report").exists()


@pytest.mark.parametrize("baseline", ["gone", "measured"])
def test_a_run_that_measures_no_artifact_leaves_the_good_report_in_place_and_says_where_it_wrote(
        small_artifacts: Path, tmp_path: Path, baseline: str) -> None:
    """A good report in --out, then a run in which every artifact fails to load (each one's bytes cut short; the
    baseline's checkpoint gone, or the baseline measured as usual): its report goes to <out>-failed, exit 1, and the
    good one is as it was, byte for byte. A measured baseline alone is no evaluation of the artifacts."""
    root, report = tmp_path / "artifacts", tmp_path / "report"
    shutil.copytree(small_artifacts, root)
    assert optimize(*eval_args(root, report, *QUICK_EVAL)).returncode == 0
    good = (report / "results.json").read_bytes()
    for node in ("onnx-fp32", "openvino-fp32"):  # files that verify against their manifests but do not load
        folder = root / "yolov5n" / node
        for path in folder.rglob("*"):
            if path.is_file() and path.name != "manifest.json":
                path.write_bytes(path.read_bytes()[:100])
        Manifest.read(folder).write(folder)
    if baseline == "gone":
        load = root / "yolov5n" / ".cache" / "load"
        recorded = Manifest.read(load)
        source = {**recorded.info["source"], "checkpoint": str(tmp_path / "gone.pt")}
        replace(recorded, info={**recorded.info, "source": source}).write(load)
    result = optimize(*eval_args(root, report, *QUICK_EVAL))
    assert result.returncode == 1, brief(result)
    failed = tmp_path / "report-failed"
    assert f"no artifact could be measured (the failed report is in {failed}; {report} is as it was)" in " ".join(
        result.stderr.split())
    assert (report / "results.json").read_bytes() == good
    statuses = {line.artifact: line.status.split(":")[0] for line in written_matrix(failed)}
    assert statuses == {"onnx-fp32": "failed", "openvino-fp32": "failed",
                        "pytorch-fp32": "failed" if baseline == "gone" else "ok"}


@pytest.mark.parametrize("make", ["missing", "empty"])
def test_directory_without_artifacts(make: str, tmp_path: Path) -> None:
    root = tmp_path / "artifacts"
    if make == "empty":
        root.mkdir()
    result = optimize(*eval_args(root, tmp_path / "report"))
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert ("not found" if make == "missing" else "no artifacts") in result.stderr


def test_dataset_without_labels(small_artifacts: Path, tmp_path: Path) -> None:
    images = tmp_path / "unlabelled" / "images" / "val"
    images.mkdir(parents=True)
    for image in sorted((VAL_DATA / "images").rglob("*.jpg"))[:2]:
        shutil.copy(image, images)
    result = optimize("eval", small_artifacts, "--data", tmp_path / "unlabelled", "--out", tmp_path / "report")
    assert result.returncode == 2 and "no labels found" in result.stderr and "--no-accuracy" in result.stderr


def test_a_dataset_whose_label_files_hold_no_box_is_refused_before_measuring(small_artifacts: Path,
                                                                            tmp_path: Path) -> None:
    """Label files, every one empty: no mAP can be scored (COCOeval's -1), so the evaluation says so up front."""
    data = tmp_path / "boxless"
    for image in sorted((VAL_DATA / "images").rglob("*.jpg"))[:2]:
        for folder, name in (("images", image.name), ("labels", f"{image.stem}.txt")):
            (data / folder / "val").mkdir(parents=True, exist_ok=True)
            (shutil.copy(image, data / folder / "val") if folder == "images"
             else (data / folder / "val" / name).write_text(""))
    result = optimize("eval", small_artifacts, "--data", data, "--out", tmp_path / "report")
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, brief(result)
    assert "has labels but not a single labelled box in its 2 images" in result.stderr
    assert not (tmp_path / "report").exists()


@pytest.mark.parametrize(("line", "message"), [("91 0.5 0.5 0.1 0.1", "class 91 is outside 0..79"),
                                               ("3 0.5 0.5", "expected 'class cx cy w h'"),
                                               ("person 0.5 0.5 0.1 0.1", "malformed label line")])
def test_bad_labels_name_the_file_and_line(small_artifacts: Path, tmp_path: Path, line: str, message: str) -> None:
    data = tmp_path / "data"
    shutil.copytree(VAL_DATA, data)
    label = sorted((data / "labels").rglob("*.txt"))[0]
    label.write_text(label.read_text() + line + "\n")
    result = optimize("eval", small_artifacts, "--data", data, "--out", tmp_path / "report")
    assert result.returncode == 2 and message in result.stderr and f"{label.name}:" in result.stderr



@pytest.mark.parametrize("damage", ["undecodable", "truncated"])
def test_an_image_that_does_not_decode_to_its_end_is_refused_in_one_line(small_artifacts: Path, tmp_path: Path,
                                                                         damage: str) -> None:
    """A truncated JPEG decodes with gray rows in OpenCV, silently changing the mAP: refused like a broken one."""
    data = tmp_path / "data"
    shutil.copytree(VAL_DATA, data)
    image = sorted((data / "images").rglob("*.jpg"))[3]
    image.write_bytes(b"not an image" if damage == "undecodable" else image.read_bytes()[:image.stat().st_size // 2])
    result = optimize("eval", small_artifacts, "--data", data, "--out", tmp_path / "report")
    assert result.returncode == 2, brief(result)
    assert result.stderr.strip().splitlines() == [result.stderr.strip()] and "Traceback" not in result.stderr
    assert f"error: cannot read image {image}: " in result.stderr
    assert ("truncated" if damage == "truncated" else "cannot identify image file") in result.stderr
    assert not (tmp_path / "report").exists()


def test_batches_that_cannot_fit_in_memory_are_refused_before_anything_runs(small_artifacts: Path,
                                                                             tmp_path: Path) -> None:
    result = optimize("eval", small_artifacts, "--batch-sizes", "1,100000000", "--out", tmp_path / "report")
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, brief(result)
    assert "640x640 images in batches of 100000000 need more than" in result.stderr
    assert not (tmp_path / "report").exists()


def test_a_full_disk_writes_no_report_and_says_so_in_one_line(small_artifacts: Path, tmp_path: Path) -> None:
    """The report's files are written beside the folder and moved in only once all are written: on a 64 kB disk
    nothing of it, nor of its staging folder, is left."""
    disk = tmp_path / "disk"
    result, left = on_a_small_disk(disk, 64, "-m", "yolo_optimize", *eval_args(small_artifacts, disk / "report",
                                                                               *QUICK_EVAL))
    assert result.returncode == 1, brief(result)
    assert result.stderr.strip().splitlines() == ["error: disk full: [Errno 28] No space left on device"], result.stderr
    assert left == {}, left


def test_ctrl_c_twice_ends_the_evaluation_in_one_line_writing_nothing_and_leaving_no_process(small_artifacts: Path,
                                                                                             tmp_path: Path) -> None:
    """What a terminal's Ctrl-C does (SIGINT to the whole process group), twice in quick succession, while rows are
    measured: no child prints its own traceback, the clean-up is not cut short."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.host.test_processes import WORKER_MARK, _session

    report = tmp_path / "report"
    args = eval_args(small_artifacts, report, "--max-images", "8", "--min-time", "30", "--repeats", "1")
    process = subprocess.Popen([sys.executable, "-m", "yolo_optimize", *map(str, args)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True,
                               env={**os.environ, "YOLO_OPTIMIZE_OFFLINE": "1"})
    deadline = time.monotonic() + 300
    while sum(WORKER_MARK in command for command in _session(process.pid).values()) < 3:  # the three rows
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.2)
    time.sleep(3)
    os.killpg(process.pid, signal.SIGINT)
    time.sleep(0.2)
    os.killpg(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130 and stderr.strip() == "interrupted: nothing was written", stderr
    assert not report.exists() and not list(tmp_path.glob(".tmp-*"))
    deadline = time.monotonic() + 20
    while _session(process.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _session(process.pid)
