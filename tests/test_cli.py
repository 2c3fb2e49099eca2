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

from tests.conftest import WEIGHTS, build_args, optimize
from yolo_optimize.artifact import MANIFEST, Manifest, read_valid

ARTIFACTS = {f"{t}-{p}" for t in ("torchscript", "onnx", "openvino") for p in ("fp32", "fp16")} - {"torchscript-fp16"}


def statuses(stdout: str) -> dict[str, str]:
    """node -> status from the final table."""
    rows = [line.split("│") for line in stdout.splitlines() if line.startswith("│")]
    return {cells[1].strip(): cells[2].strip() for cells in rows if len(cells) > 3 and cells[1].strip()}


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


def test_second_build_is_fully_cached(built: Path) -> None:
    started = time.perf_counter()
    result = optimize(*build_args(built.parent, "--targets", "torchscript,onnx,openvino", "--precisions", "fp32,fp16"))
    seconds = time.perf_counter() - started
    assert result.returncode == 0, result.stderr
    table = statuses(result.stdout)
    assert {table[n] for n in ARTIFACTS} == {"cached"}, table
    assert table["torchscript-fp16"] == "skipped"
    print(f"cached rebuild took {seconds:.2f} s")


def test_changed_parameter_rebuilds_only_its_subtree(built: Path, tmp_path: Path) -> None:
    shutil.copytree(built.parent, tmp_path, dirs_exist_ok=True)
    result = optimize(*build_args(tmp_path, "--targets", "torchscript,onnx,openvino", "--precisions", "fp32",
                                  "--opset", "19"))
    assert result.returncode == 0, result.stderr
    table = statuses(result.stdout)
    assert table["torchscript-fp32"] == "cached" and table["reference"] == "cached" and table["load"] == "cached"
    assert {table[n] for n in ("onnx-export", "onnx-fp32", "openvino-fp32")} == {"built"}, table
    assert Manifest.read(tmp_path / "yolov5n" / "onnx-fp32").params == {"imgsz": 640, "precision": "fp32"}
    assert Manifest.read(tmp_path / "yolov5n" / ".cache" / "onnx-export").params["opset"] == 19


def test_force_rebuilds(tmp_path: Path) -> None:
    args = build_args(tmp_path, "--targets", "onnx", "--precisions", "fp32", "--imgsz", "320")
    assert optimize(*args).returncode == 0
    table = statuses(optimize(*args, "--force").stdout)
    assert table["onnx-fp32"] == "built" and table["load"] == "built"


def test_killed_build_leaves_no_valid_looking_partial_artifact_and_resumes(tmp_path: Path) -> None:
    args = [sys.executable, "-m", "yolo_optimize", *map(str, build_args(tmp_path, "--targets", "onnx,openvino",
                                                                       "--precisions", "fp32", "--jobs", "1"))]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                               env={**os.environ, "YOLO_OPTIMIZE_OFFLINE": "1"})
    model_dir = tmp_path / "yolov5n"
    deadline = time.monotonic() + 300
    while not list(model_dir.glob(".cache/.tmp-onnx-export-*")) and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    for folder in [p for p in model_dir.rglob("*") if p.is_dir() and not p.name.startswith((".tmp-", ".old-"))]:
        if (folder / MANIFEST).exists():
            assert read_valid(folder) is not None, f"{folder} has a manifest but does not verify"
    assert not (model_dir / "onnx-fp32" / MANIFEST).exists()
    resumed = optimize(*build_args(tmp_path, "--targets", "onnx,openvino", "--precisions", "fp32"))
    assert resumed.returncode == 0, resumed.stderr
    table = statuses(resumed.stdout)
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
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(args: list[str], message: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = optimize(*args, "--out", out)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not out.exists()


def test_corrupt_checkpoint_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    corrupt = tmp_path / "yolov5n.pt"
    corrupt.write_bytes(b"PK\x03\x04 not really a zip")
    result = optimize("build", corrupt, "--out", tmp_path / "out")
    assert result.returncode == 2 and "not a loadable YOLOv5 checkpoint" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_unwritable_out(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = optimize("build", WEIGHTS, "--out", blocker / "artifacts")
    assert result.returncode == 2 and "is not a directory" in result.stderr
    result = optimize("build", WEIGHTS, "--out", "/proc/yolo-optimize")
    assert result.returncode == 2 and "not writable" in result.stderr


def test_failing_node_skips_its_descendants_and_exits_nonzero(tmp_path: Path) -> None:
    """No exporter can write opset 99; the torchscript branch still finishes."""
    result = optimize(*build_args(tmp_path, "--targets", "torchscript,openvino", "--precisions", "fp32",
                                  "--imgsz", "320", "--opset", "99"))
    table = statuses(result.stdout)
    assert result.returncode == 1 and "onnx-export" in result.stderr
    assert table["onnx-export"] == "failed" and table["torchscript-fp32"] == "built"
    assert table["onnx-fp32"] == "skipped" and table["openvino-fp32"] == "skipped"
