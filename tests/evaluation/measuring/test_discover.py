"""Finding artifacts through their manifests: one an older version built without recording its model family, one
folder copied over another and a folder whose manifest was deleted are reported, not loaded or left out."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.test_metadata import OLDER
from yolo_optimize.artifact import Manifest
from yolo_optimize.evaluation.measuring.discover import discover


def test_an_artifact_whose_metadata_names_no_family_is_reported_as_built_by_an_older_version(tmp_path: Path) -> None:
    folder = tmp_path / "yolov5n" / "onnx-fp32"
    folder.mkdir(parents=True)
    (folder / "yolov5n.onnx").write_bytes(b"an older export")
    Manifest(node="onnx-fp32", stage="onnx-simplify", model_id="yolov5n", target="onnx", precision="fp32",
             entry="yolov5n.onnx", cache_key="older", parents={}, params={}, tool_versions={},
             metadata=OLDER).write(folder)
    (found,) = discover(tmp_path)
    assert found.manifest is None and found.name == "onnx-fp32"
    assert found.error == "built by an older yolo-optimize that did not record the model family; rebuild it"


def test_a_folder_copied_over_another_and_one_without_its_manifest_are_failed_rows(built: Path,
                                                                                   tmp_path: Path) -> None:
    root = tmp_path / "artifacts"
    shutil.copytree(built.parent, root)
    model = root / "yolov5n"
    shutil.rmtree(model / "onnx-fp32")
    shutil.copytree(model / "onnx-fp16", model / "onnx-fp32")
    (model / "openvino-fp16" / "manifest.json").unlink()
    found = {c.folder.name: c for c in discover(root)}
    assert [c.name for c in found.values()].count("onnx-fp16") == 1, "one row per artifact name"
    assert found["onnx-fp32"].manifest is None
    assert found["onnx-fp32"].error.startswith("holds onnx-fp16's files, not onnx-fp32's (a copy of another folder?)")
    assert found["openvino-fp16"].manifest is None and found["openvino-fp16"].name == "openvino-fp16"
    assert found["openvino-fp16"].error == "no manifest.json: rebuild it with optimize build"


def test_an_artifact_whose_manifest_records_no_passed_parity_is_a_failed_row(built: Path, tmp_path: Path) -> None:
    """A manifest edited after publishing (its files still verify) to say its parity failed, or with none: no build
    publishes such a file, so the evaluation refuses to measure and rank it as if it were checked."""
    root = tmp_path / "artifacts"
    shutil.copytree(built.parent, root)
    for node, parity in (("onnx-fp32", {"passed": False}), ("onnx-fp16", None)):
        folder = root / "yolov5n" / node
        recorded = Manifest.read(folder)
        recorded.parity = None if parity is None else {**(recorded.parity or {}), **parity}
        recorded.write(folder)
    found = {c.folder.name: c for c in discover(root)}
    assert found["onnx-fp32"].manifest is None and found["onnx-fp16"].manifest is None
    assert found["onnx-fp32"].error == "its manifest records a failed parity check: rebuild it with optimize build"
    assert found["onnx-fp16"].error == "its manifest records no parity check: rebuild it with optimize build"
    assert found["openvino-fp32"].manifest is not None
