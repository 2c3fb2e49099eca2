"""Manifests: every file hashed, tampering detected, publishing is all-or-nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

from yolo_optimize.artifact import Manifest, publish, read_valid, staging_dir, verify_files


def test_manifest_lists_sha256_of_every_file_and_tool_versions(built: Path) -> None:
    manifest = Manifest.read(built / "openvino-fp32")
    assert set(manifest.files) == {"yolov5n_openvino_model/yolov5n.xml", "yolov5n_openvino_model/yolov5n.bin"}
    assert all(len(f["sha256"]) == 64 for f in manifest.files.values())
    assert {"openvino", "yolo-optimize"} <= set(manifest.tool_versions)
    assert manifest.build_seconds > 0 and manifest.cache_key and manifest.schema_version == 1


def test_tampered_file_is_detected(built: Path, tmp_path: Path) -> None:
    copy = tmp_path / "onnx-fp32"
    shutil.copytree(built / "onnx-fp32", copy)
    with open(copy / "yolov5n.onnx", "r+b") as handle:
        handle.seek(1000)
        handle.write(b"\x00\x01\x02")
    assert verify_files(copy, Manifest.read(copy)) == "sha256 mismatch for yolov5n.onnx"
    assert read_valid(copy) is None


def test_publish_replaces_the_old_folder_whole(tmp_path: Path) -> None:
    final = tmp_path / "node"
    final.mkdir()
    (final / "old.txt").write_text("old")
    staging = staging_dir(final)
    (staging / "new.txt").write_text("new")
    publish(staging, final)
    assert [p.name for p in final.iterdir()] == ["new.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["node"]
