"""The scheduling loop over one model's DAG and the store's published views: concurrent builds with other keys in one
--out, damaged views repaired from the verified store."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from tests.conftest import BUILD_TARGETS, brief, build_args, optimize, statuses
from tests.test_artifact import edited_in_place
from yolo_optimize.artifact import MANIFEST, Manifest, read_valid, store_folder


@pytest.mark.slow
def test_concurrent_builds_with_other_parameters_keep_every_manifest_consistent(tmp_path: Path) -> None:
    """Both builds share node names (reference, onnx-export, onnx-fp32) with other keys, into one --out."""
    common = ("--imgsz", "320", "--precisions", "fp32", "--jobs", "1")
    first = ("--targets", "onnx", "--batch-sizes", "1,8", *common)
    second = ("--targets", "onnx,torchscript", "--batch-sizes", "1,2", "--opset", "19", *common)
    builds = [subprocess.Popen([sys.executable, "-m", "yolo_optimize", *map(str, build_args(tmp_path, *args))],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env={**os.environ, "YOLO_OPTIMIZE_OFFLINE": "1"}) for args in (first, second)]
    for build in builds:
        output, _ = build.communicate(timeout=900)
        assert build.returncode == 0, output
    model_dir = tmp_path / "yolov5n"
    for node in ("reference", "onnx-export", "onnx-fp32"):  # one store entry per build: nothing was overwritten
        assert len(list((model_dir / ".store" / node).iterdir())) == 2, node
    assert not list(model_dir.rglob(".tmp-*")) and not list(model_dir.rglob(".old-*"))
    manifests = list(model_dir.rglob(MANIFEST))
    for path in manifests:
        manifest = read_valid(path.parent)
        assert manifest is not None, f"{path.parent} does not verify"
        for parent, key in manifest.parents.items():
            assert read_valid(store_folder(model_dir, parent, key), key) is not None, f"{path.parent}: {parent}"
        if manifest.parity:
            reference = Manifest.read(store_folder(model_dir, "reference", manifest.parents["reference"]))
            assert manifest.parity["batch_sizes"] == reference.params["batch_sizes"]
    again = optimize(*build_args(tmp_path, *first))
    assert again.returncode == 0 and "built" not in statuses(again).values(), again.stdout
    shown = Manifest.read(model_dir / "onnx-fp32")
    assert shown.parity["batch_sizes"] == [1, 8] and shown.cache_key == read_valid(
        store_folder(model_dir, "onnx-fp32", shown.cache_key)).cache_key


def test_a_build_repairs_published_files_edited_truncated_or_deleted_and_force_replaces_them(built: Path,
                                                                                           tmp_path: Path) -> None:
    """The published folders are checked as the store is, each damaged one published again from its verified store
    copy and reported 'repaired' (the stamp-trusting check and --verify: test_artifact); --force publishes anew."""
    out = tmp_path / "artifacts"
    shutil.copytree(built.parent, out)
    model = out / "yolov5n"
    damaged = {"onnx-fp32": "yolov5n.onnx", "openvino-fp32": "yolov5n_openvino_model/yolov5n.bin",
               "torchscript-fp32": "yolov5n.torchscript"}
    edited_in_place(model / "onnx-fp32" / damaged["onnx-fp32"])
    (model / "openvino-fp32" / damaged["openvino-fp32"]).write_bytes(b"truncated")
    (model / "torchscript-fp32" / damaged["torchscript-fp32"]).unlink()
    fp32 = ("--targets", ",".join(BUILD_TARGETS), "--precisions", "fp32")
    repaired = optimize(*build_args(out, *fp32))  # copied folders: other inodes, so every file is hashed
    assert repaired.returncode == 0, brief(repaired)
    assert {node: statuses(repaired)[node] for node in damaged} == dict.fromkeys(damaged, "repaired")
    for reason in ("sha256 mismatch for yolov5n.onnx", "size mismatch for yolov5n_openvino_model/yolov5n.bin (9 bytes",
                   "missing file yolov5n.torchscript"):
        assert f"{reason}" in repaired.stdout and "published again from the verified store" in repaired.stdout
    assert all(read_valid(model / node) is not None for node in damaged)
    again = optimize(*build_args(out, *fp32, "--verify"))
    assert set(statuses(again).values()) == {"cached"}, again.stdout

    published = Manifest.read(model / "onnx-fp32")
    published.parity = {**(published.parity or {}), "passed": False}  # its files untouched: they still verify
    (model / "onnx-fp32" / MANIFEST).write_text(json.dumps(asdict(published)))
    edited = optimize(*build_args(out, *fp32))
    assert statuses(edited)["onnx-fp32"] == "repaired", edited.stdout
    assert "manifest.json edited since it was published (parity)" in " ".join(edited.stdout.split())
    assert Manifest.read(model / "onnx-fp32").parity["passed"]  # type: ignore[index]  # a built node's parity

    shutil.rmtree(model / "onnx-fp32")
    shutil.copytree(model / "onnx-fp16", model / "onnx-fp32")  # one folder copied over another
    copied = optimize(*build_args(out, "--targets", "onnx", "--precisions", "fp32"))
    assert statuses(copied)["onnx-fp32"] == "repaired", copied.stdout
    assert "it held onnx-fp16's files" in copied.stdout and Manifest.read(model / "onnx-fp32").node == "onnx-fp32"

    edited_in_place(model / "onnx-fp32" / "yolov5n.onnx")
    forced = optimize(*build_args(out, "--targets", "onnx", "--precisions", "fp32", "--force"))
    assert forced.returncode == 0, brief(forced)
    assert statuses(forced)["onnx-fp32"] in ("built", "repaired") and read_valid(model / "onnx-fp32")
