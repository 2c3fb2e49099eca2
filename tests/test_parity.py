"""Parity: recorded for every artifact, tight for FP32, and a broken export is caught."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from yolo_optimize.artifact import Manifest
from yolo_optimize.parity import check_parity
from yolo_optimize.stage import StageContext
from yolo_optimize.checkpoint import resolve_source
from tests.conftest import WEIGHTS


def context(built: Path, out: Path) -> StageContext:
    return StageContext(resolve_source(str(WEIGHTS)), out, {"reference": built / ".cache" / "reference"}, "cpu", 2)


@pytest.mark.parametrize("node", ["torchscript-fp32", "onnx-fp32", "openvino-fp32"])
def test_fp32_exports_match_pytorch(built: Path, node: str) -> None:
    parity = Manifest.read(built / node).parity
    assert parity and parity["passed"] and parity["batch_sizes"] == [1, 8]
    assert parity["max_abs_diff_scores"] < 1e-3 and parity["detection_agreement"] >= 0.95
    assert parity["executed_precision"] == "fp32"


def test_broken_export_fails_parity(built: Path, tmp_path: Path) -> None:
    broken = tmp_path / "onnx-fp32"
    shutil.copytree(built / "onnx-fp32", broken)
    model = onnx.load(str(broken / "yolov5n.onnx"))
    head_bias = next(i for i in model.graph.initializer if list(i.dims) == [255])  # a Detect conv's bias
    head_bias.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(head_bias) + np.float32(3), head_bias.name))
    onnx.save(model, str(broken / "yolov5n.onnx"))
    with pytest.raises(RuntimeError, match="parity failed"):
        check_parity(broken, Manifest.read(broken), context(built, broken))
    assert np.isfinite(Manifest.read(built / "onnx-fp32").parity["max_abs_diff_boxes_px"])
