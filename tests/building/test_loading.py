"""What every artifact takes: ``--input uint8`` puts the layout change and the scaling inside every exported graph
(NCNN's: in NCNN's own conversion of the image), and the artifacts detect what the float path detects."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.conftest import brief, build_args, optimize
from yolo_optimize.artifact import Manifest
from yolo_optimize.building.parity import REFERENCE_FILE
from yolo_optimize.families import family_named
from yolo_optimize.formats import format_named, uint8_targets
from yolo_optimize.runtime.runners import open_runner


@pytest.fixture(scope="module")
def built_uint8(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("artifacts-uint8")
    result = optimize(*build_args(out, "--targets", ",".join(uint8_targets()), "--precisions", "fp32",
                                  "--input", "uint8"))
    assert result.returncode == 0, brief(result)
    beside = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    assert beside == ["yolov5n-uint8"], "built beside the float model, never over it"
    return out / "yolov5n-uint8"


@pytest.mark.parametrize("target", uint8_targets())
def test_an_artifact_taking_the_uint8_image_detects_what_the_float_path_detects(built_uint8: Path, target: str) -> None:
    """The prepared uint8 NHWC images straight into the artifact against PyTorch on the same images converted outside
    (float32 NCHW / 255): the same detections after the deployment's NMS, boxes within a hundredth of a pixel."""
    folder = built_uint8 / f"{target}-fp32"
    assert (folder / format_named(target).entry_for("yolov5n-uint8")).is_file()
    manifest = Manifest.read(folder)
    assert manifest.metadata["input"]["dtype"] == "uint8" and manifest.metadata["input"]["layout"] == "NHWC"
    converted_by = "NCNN's Mat.from_pixels" if target == "ncnn" else "inside the graph"  # an NCNN blob is float
    assert converted_by in manifest.metadata["input"]["preprocess"] and manifest.parity["passed"]
    saved = np.load(built_uint8 / ".cache" / "reference" / REFERENCE_FILE)
    family = family_named("yolov5")
    with open_runner(folder, manifest, threads=2) as runner:
        fed = runner.input_of(saved["images"])
        assert fed.dtype == np.uint8 and fed.shape == saved["images"].shape  # the bytes as prepared, no copy made
        got = family.postprocess(np.array(runner.infer(fed)))
    want = family.postprocess(saved["outputs"])
    assert sum(len(w) for w in want) > 5
    for mine, theirs in zip(got, want):
        assert mine.shape == theirs.shape and np.array_equal(mine[:, 5], theirs[:, 5])
        assert np.abs(mine[:, :4] - theirs[:, :4]).max() < 1e-2 and np.abs(mine[:, 4] - theirs[:, 4]).max() < 1e-4


def test_uint8_input_for_a_target_not_built_for_it_is_refused_in_one_line(tmp_path: Path) -> None:
    result = optimize(*build_args(tmp_path / "out", "--targets", "onnx,tensorrt", "--input", "uint8"))
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    refusal = "--input uint8 is built for torchscript, aoti, onnx, openvino, ncnn, executorch, not tensorrt"
    assert refusal in result.stderr
    assert not (tmp_path / "out").exists()
