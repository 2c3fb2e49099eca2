"""``optimize build`` end to end: caching, partial rebuilds, bad input, and a killed build."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import WEIGHTS, brief, build_args, on_a_small_disk, optimize, statuses
from yolo_optimize.artifact import MANIFEST, STORE, Manifest, read_valid
from yolo_optimize.building.build_result import BuildResult

ARTIFACTS = {f"{t}-{p}" for t in ("torchscript", "onnx", "openvino") for p in ("fp32", "fp16")} - {"torchscript-fp16"}


def test_build_writes_every_artifact_with_a_verified_manifest(built: Path) -> None:
    folders = {p.name for p in built.iterdir() if (p / MANIFEST).is_file()}
    assert folders == ARTIFACTS
    for name in ARTIFACTS:
        manifest = read_valid(built / name)
        assert manifest is not None, f"{name} does not verify"
        assert manifest.parity and manifest.parity["passed"]
        assert manifest.metadata["names"][0] == "person" and manifest.metadata["imgsz"] == [640, 640]
        assert set(manifest.parents) >= {"reference"}
    assert (built / "onnx-fp32" / "yolov5n.onnx").is_file()
    assert (built / "torchscript-fp32" / "yolov5n.torchscript").is_file()
    assert (built / "openvino-fp32" / "yolov5n_openvino_model" / "yolov5n.xml").is_file()


def test_build_writes_nothing_into_home(built: Path, home_dir: Path) -> None:
    assert list(home_dir.rglob("*")) == []


def test_second_build_rebuilds_nothing(built: Path, tmp_path: Path) -> None:
    shutil.copytree(built.parent, tmp_path, dirs_exist_ok=True)  # never touch the folder other tests read
    stored = {p: p.stat().st_mtime_ns for p in (tmp_path / "yolov5n" / ".store").rglob(MANIFEST)}
    result = optimize(*build_args(tmp_path, "--targets", "torchscript,onnx,openvino", "--precisions", "fp32,fp16"))
    assert result.returncode == 0, brief(result)
    table = statuses(result)
    assert result.build is not None and result.build.ok and result.build.models[0].folder == tmp_path / "yolov5n"
    assert {table[n] for n in (*ARTIFACTS, "load", "reference")} == {"cached"}, table
    assert table["torchscript-fp16"] == "skipped" and table["onnx-export"] in ("cached", "not needed")
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "yolov5n" / ".store").rglob(MANIFEST)} == stored
    assert "started" not in result.stdout
    assert len(list((tmp_path / ".checkpoints").glob("*.json"))) == 1  # the family verdict, kept beside the build


def test_an_unneeded_node_that_no_longer_verifies_is_shown_as_not_needed(built: Path, tmp_path: Path) -> None:
    shutil.copytree(built.parent, tmp_path, dirs_exist_ok=True)
    for manifest in (tmp_path / "yolov5n" / ".store" / "onnx-export").rglob(MANIFEST):
        (manifest.parent / "yolov5n.onnx").write_bytes(b"corrupted")
    table = statuses(optimize(*build_args(tmp_path, "--targets", "onnx", "--precisions", "fp32")))
    assert table["onnx-fp32"] == "cached" and table["onnx-export"] == "not needed", table


def test_changed_parameter_rebuilds_only_its_subtree(built: Path, tmp_path: Path) -> None:
    shutil.copytree(built.parent, tmp_path, dirs_exist_ok=True)
    result = optimize(*build_args(tmp_path, "--targets", "torchscript,onnx,openvino", "--precisions", "fp32",
                                  "--opset", "19"))
    assert result.returncode == 0, brief(result)
    table = statuses(result)
    assert table["torchscript-fp32"] == "cached" and table["reference"] == "cached" and table["load"] == "cached"
    assert {table[n] for n in ("onnx-export", "onnx-fp32", "openvino-fp32")} == {"built"}, table
    assert Manifest.read(tmp_path / "yolov5n" / "onnx-fp32").params == {"imgsz": 640, "precision": "fp32"}
    assert Manifest.read(tmp_path / "yolov5n" / ".cache" / "onnx-export").params["opset"] == 19


def test_force_rebuilds_every_node_the_request_needs_although_all_are_cached(built: Path, tmp_path: Path) -> None:
    shutil.copytree(built.parent, tmp_path, dirs_exist_ok=True)  # every node cached
    result = optimize(*build_args(tmp_path, "--targets", "torchscript", "--precisions", "fp32", "--force"))
    assert result.returncode == 0, brief(result)
    table = statuses(result)
    assert {table[n] for n in ("load", "reference", "torchscript-fp32")} == {"built"}, table


def _loaded_and_referenced(built: Path, out: Path) -> Path:
    """``out`` holding only the session build's load and reference nodes, so that a build into it starts with the
    ONNX export; the model folder."""
    for node in ("load", "reference"):
        shutil.copytree(built / STORE / node, out / "yolov5n" / STORE / node)
    return out / "yolov5n"


def test_killed_build_leaves_no_valid_looking_partial_artifact_and_resumes(built: Path, tmp_path: Path) -> None:
    model_dir = _loaded_and_referenced(built, tmp_path)
    args = [sys.executable, "-m", "yolo_optimize", *map(str, build_args(tmp_path, "--targets", "onnx",
                                                                       "--precisions", "fp32", "--jobs", "1"))]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                               env={**os.environ, "YOLO_OPTIMIZE_OFFLINE": "1"})
    deadline = time.monotonic() + 300
    while not list(model_dir.glob(".store/onnx-export/.tmp-*")) and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    for folder in [p for p in model_dir.rglob("*") if p.is_dir() and not p.name.startswith((".tmp-", ".old-"))]:
        if (folder / MANIFEST).exists():
            assert read_valid(folder) is not None, f"{folder} has a manifest but does not verify"
    assert not (model_dir / "onnx-fp32" / MANIFEST).exists()
    resumed = optimize(*build_args(tmp_path, "--targets", "onnx", "--precisions", "fp32"))
    assert resumed.returncode == 0, brief(resumed)
    table = statuses(resumed)
    assert table["load"] == "cached" and table["onnx-fp32"] == "built"
    assert not list(model_dir.rglob(".tmp-*"))


@pytest.mark.parametrize(("args", "message"), [
    (["build", "yolov9"], "unknown model"),
    (["build", WEIGHTS, "--targets", "onnx,tflite"], "unknown target tflite"),
    (["build", WEIGHTS, "--precisions", "fp8"], "unknown precision fp8"),
    (["build", WEIGHTS, "--imgsz", "100"], "multiple of 32"),
    (["build", WEIGHTS, "--batch-sizes", "0,8"], "--batch-sizes"),
    (["build", WEIGHTS, "--parity-data", "/nonexistent"], "image folder not found"),
    (["build", "/nonexistent/yolov5n.pt"], "checkpoint not found"),
    (["build", WEIGHTS, "--imgsz", "100000"], "100000x100000 images in batches of 8 need more than"),
    (["build", WEIGHTS, "--result", "/"], "--result / is a folder"),
    (["build", WEIGHTS.parent], f"{WEIGHTS.parent} is a folder: name the checkpoint file"),
    (["build", WEIGHTS, "--nms", "--nms-conf", "2"], "error: Invalid value for '--nms-conf': 2.0 is not in the range"),
    (["build", WEIGHTS, "--nms", "--nms-iou", "-1"], "error: Invalid value for '--nms-iou'"),
    (["build", WEIGHTS, "--nms", "--max-det", "0"], "error: Invalid value for '--max-det'"),
    (["build", WEIGHTS, "--nms", "--nms-conf", "nan"], "error: Invalid value for '--nms-conf': 'nan' is not a finite"),
    (["build", WEIGHTS, "--max-map-drop", "nan"], "error: Invalid value for '--max-map-drop': 'nan' is not a finite"),
    (["build", WEIGHTS, "--max-map-drop", "inf"], "error: Invalid value for '--max-map-drop': 'inf' is not a finite"),
    (["build", WEIGHTS, "--jobs", "0"], "error: Invalid value for '--jobs': 0 is not in the range x>=1."),
    (["build", WEIGHTS, "--colour"], "error: No such option '--colour'"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(args: list[str], message: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = optimize(*args, "--out", out)
    assert result.returncode == 2, brief(result)
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not out.exists()


@pytest.mark.parametrize("args", [["--max-map-drop", "nan"], ["--max-latency-ms", "nan"], ["--max-memory-mb", "inf"]])
def test_recommend_refuses_a_limit_that_is_not_a_finite_number_in_one_line(args: list[str], tmp_path: Path) -> None:
    result = optimize("recommend", tmp_path, *args)
    assert result.returncode == 2 and f"Invalid value for '{args[0]}'" in result.stderr, brief(result)
    assert "is not a finite number" in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


MALICIOUS = """
import os, sys, torch
class Payload:
    def __reduce__(self):
        return (os.system, ("touch " + sys.argv[2],))
torch.save({"model": Payload()}, sys.argv[1])
"""


@pytest.mark.parametrize(("content", "message"), [
    ("zip", "is not a PyTorch checkpoint"),
    ("random", "is not a PyTorch checkpoint"),
    ("malicious", "was refused before loading: its pickle would import posix.system"),
])
def test_a_bad_checkpoint_is_refused_before_anything_is_written(tmp_path: Path, content: str, message: str) -> None:
    checkpoint, ran = tmp_path / "yolov5n.pt", tmp_path / "payload-ran"
    if content == "malicious":
        subprocess.run([sys.executable, "-c", MALICIOUS, str(checkpoint), str(ran)], check=True)
    else:
        checkpoint.write_bytes(b"PK\x03\x04 not really a zip" if content == "zip" else os.urandom(4096))
    result = optimize("build", checkpoint, "--out", tmp_path / "out")
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "weights_only" not in result.stderr
    assert not (tmp_path / "out").exists() and not ran.exists()


def test_read_only_model_folder_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "yolov5n").symlink_to("/proc")  # a folder nobody, root included, can write into
    result = optimize("build", WEIGHTS, "--out", tmp_path)
    assert result.returncode == 2 and "is not writable" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_ctrl_c_stops_cleanly_in_one_line_and_the_next_build_resumes(built: Path, tmp_path: Path) -> None:
    model_dir = _loaded_and_referenced(built, tmp_path)
    args = [sys.executable, "-m", "yolo_optimize", *map(str, build_args(tmp_path, "--targets", "onnx",
                                                                       "--precisions", "fp32", "--jobs", "1"))]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True, env={**os.environ, "YOLO_OPTIMIZE_OFFLINE": "1"})
    deadline = time.monotonic() + 300
    while not list(model_dir.glob(".store/onnx-export/.tmp-*")) and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole process group
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert stderr.strip().startswith("interrupted:") and len(stderr.strip().splitlines()) == 1, stderr
    assert "Traceback" not in stdout + stderr
    assert not list(model_dir.rglob(".tmp-*")), "staging folders must be removed"
    resumed = statuses(optimize(*build_args(tmp_path, "--targets", "onnx", "--precisions", "fp32")))
    assert resumed["load"] == "cached" and resumed["onnx-export"] == "built"


@pytest.mark.slow
def test_unwritable_out(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = optimize("build", WEIGHTS, "--out", blocker / "artifacts")
    assert result.returncode == 2 and "is not a directory" in result.stderr
    result = optimize("build", WEIGHTS, "--out", "/proc/yolo-optimize")
    assert result.returncode == 2 and "not writable" in result.stderr


@pytest.mark.slow
def test_failing_node_skips_its_descendants_and_exits_nonzero(tmp_path: Path) -> None:
    """No exporter can write opset 99; the torchscript branch still finishes."""
    result = optimize(*build_args(tmp_path, "--targets", "torchscript,openvino", "--precisions", "fp32",
                                  "--imgsz", "320", "--opset", "99"))
    table = statuses(result)
    assert result.returncode == 1 and "onnx-export" in result.stderr
    assert table["onnx-export"] == "failed" and table["torchscript-fp32"] == "built"
    assert table["onnx-fp32"] == "skipped" and table["openvino-fp32"] == "skipped"


def test_a_full_disk_fails_its_nodes_in_one_line_each_and_publishes_nothing(tmp_path: Path) -> None:
    """A 12 MB --out: the load node fits, the exported graph does not (nor, at times, the reference built beside
    it). Its node says 'disk full' (not 'worker died'), the build exits 1 naming it, no staging folder is left."""
    disk = tmp_path / "disk"
    written = tmp_path / "result.json"  # beside the small disk, which is gone with the command
    result, left = on_a_small_disk(disk, 12_000, "-m", "yolo_optimize", *build_args(
        disk / "out", "--targets", "onnx", "--precisions", "fp32", "--imgsz", "320", "--batch-sizes", "1",
        "--result", written))
    assert result.returncode == 1, brief(result)
    table = BuildResult.from_json(written.read_text()).statuses()
    assert table["onnx-export"] == "failed" and table["onnx-fp32"] == "skipped", result.stdout
    assert "disk full: [Errno 28] No space left on device" in result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "onnx-export" in lines[0], result.stderr
    assert not any("/.tmp-" in path or "/.old-" in path for path in left), left
    assert "out/yolov5n/onnx-fp32/manifest.json" not in left
