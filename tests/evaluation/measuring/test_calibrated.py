"""An INT8 file evaluated on the images it was calibrated on: found by path and by content (a copy in another folder),
from the manifest the build writes, and carried onto the evaluation's row."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import CALIB_DATA, VAL_DATA
from tests.evaluation.handmade import SETTINGS
from yolo_optimize.artifact import Manifest
from yolo_optimize.evaluation.measuring import calibrated
from yolo_optimize.evaluation.measuring.calibrated import calibration_overlap
from yolo_optimize.evaluation.measuring.discover import FoundArtifact
from yolo_optimize.evaluation.measuring.rows import unmeasured_row
from yolo_optimize.files import file_sha256

CALIBRATION = sorted((CALIB_DATA / "images" / "train2017").glob("*.jpg"))[:6]


def _int8_manifest(folder: Path, calibrated: list[Path]) -> Manifest:
    """An INT8 node's manifest as the build writes it (``params["calib_images"]``: the absolute paths it resolved),
    read back from its folder."""
    folder.mkdir(parents=True)
    (folder / "model.onnx").write_bytes(b"int8 graph")
    Manifest(node="onnx-int8", stage="onnx-int8", model_id="yolov5n", target="onnx", precision="int8",
             entry="model.onnx", cache_key="k", parents={}, params={"calib_images": [str(p) for p in calibrated]},
             tool_versions={}, metadata={"family": "yolov5", "pretrained": True, "task": "detect"}).write(folder)
    return Manifest.read(folder)


def test_calibration_images_among_the_evaluation_s_are_found_by_path_and_by_content(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two calibration images as they are (one through a symlinked folder), two copied to another folder, two
    images never calibrated on: four found, and only the copies and the calibration images of their sizes read
    whole. A calibration image since deleted matches nothing."""
    hashed: list[Path] = []
    monkeypatch.setattr(calibrated, "file_sha256", lambda path: hashed.append(path) or file_sha256(path))
    manifest = _int8_manifest(tmp_path / "onnx-int8", CALIBRATION[:4])
    (tmp_path / "linked").symlink_to(CALIB_DATA)
    copies = tmp_path / "copies"
    copies.mkdir()
    copied = [Path(shutil.copy(image, copies / f"renamed-{image.name}")) for image in CALIBRATION[2:4]]
    others = [CALIBRATION[5], sorted((VAL_DATA / "images").rglob("*.jpg"))[0]]
    images = [CALIBRATION[0], tmp_path / "linked" / CALIBRATION[1].relative_to(CALIB_DATA), *copied, *others]
    assert calibration_overlap(manifest, images) == 4
    assert sorted(hashed) == sorted([*copied, *CALIBRATION[2:4]])
    assert calibration_overlap(manifest, others) == 0 and len(hashed) == 4
    gone = _int8_manifest(tmp_path / "gone", [tmp_path / "deleted.jpg", CALIBRATION[2]])
    assert calibration_overlap(gone, [*copied, CALIBRATION[5]]) == 1
    fp32 = _int8_manifest(tmp_path / "fp32", [])
    assert calibration_overlap(fp32, images) == 0 and calibration_overlap(None, images) == 0


def test_the_evaluation_s_row_carries_how_many_of_its_images_calibrated_the_artifact(tmp_path: Path) -> None:
    manifest = _int8_manifest(tmp_path / "yolov5n" / "onnx-int8", CALIBRATION[:4])
    candidate = FoundArtifact(tmp_path / "yolov5n" / "onnx-int8", manifest, "onnx-int8", "yolov5n", target="onnx",
                          precision="int8")
    assert unmeasured_row(candidate, SETTINGS, CALIBRATION).calibration_overlap == 4
    assert unmeasured_row(candidate, SETTINGS, CALIBRATION[4:]).calibration_overlap == 0
