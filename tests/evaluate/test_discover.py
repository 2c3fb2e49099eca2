"""Finding artifacts through their manifests: one an older version built without recording its model family is
reported, not loaded."""

from __future__ import annotations

from pathlib import Path

from tests.test_metadata import OLDER
from yolo_optimize.artifact import Manifest
from yolo_optimize.evaluate.discover import discover


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
