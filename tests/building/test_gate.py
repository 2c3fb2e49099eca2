"""The accuracy gate: real artifacts scored on labelled images, every route recorded, a failure explained."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.conftest import CALIB_DATA
from yolo_optimize.artifact import Manifest
from yolo_optimize.building.gate import Gate, GateRecord
from yolo_optimize.building.held_out import ImageSet
from yolo_optimize.building.request import GateConfig
from yolo_optimize.families import family_named


def test_a_route_over_the_limit_fails_the_gate_naming_every_route_with_its_interval(built: Path) -> None:
    """FP32 against itself loses nothing; a model that finds nothing loses all its mAP and fails."""
    config = GateConfig(ImageSet.of(CALIB_DATA, 8), None, "the first 8", 1.0)
    gate = Gate(config.images, family_named("yolov5"), imgsz=640, threads=2)
    try:
        reference = gate.score(built / "onnx-fp32", Manifest.read(built / "onnx-fp32"))
        record = GateRecord(config, reference, gate)
        assert reference.value > 0.2
        assert record.add("fp32 itself", reference)
        assert record.attempts[0]["drop_points"] == 0 and record.attempts[0]["drop_90ci_points"] == [0, 0]
        blind = gate.metric.score([np.zeros((0, 6), np.float32) for _ in gate.dataset.images])
        assert not record.add("finds nothing", blind)
    finally:
        gate.close()
    with pytest.raises(RuntimeError) as failure:
        record.require_pass()
    message = str(failure.value)
    assert message.startswith("accuracy gate failed: mAP50-95 0.0 vs FP32") and "> --max-map-drop 1.0" in message
    assert "fp32 itself: 0.0 (90% CI 0.0 to 0.0); finds nothing: " in message and "\n" not in message
    assert record.result(())["verdict"] == "clear" and not record.result(())["passed"]


def test_a_classifier_is_gated_on_top1_agreement_with_its_fp32_parent() -> None:
    """No labels needed: one changed top-1 class in 10 images is 10 points lost, and that fails a 1-point limit."""
    config = GateConfig(ImageSet.of(CALIB_DATA, 10), None, "the first 10", 1.0)
    gate = Gate(config.images, family_named("torchvision"), imgsz=224, threads=2)
    try:
        assert gate.metric.name == "top-1 agreement with FP32" and not gate.metric.needs_labels
        classes = [np.array([c, (c + 1) % 10]) for c in range(10)]
        reference = gate.metric.score(classes)
        assert reference.value == 1.0
        record = GateRecord(config, reference, gate)
        assert record.add("same classes", gate.metric.score([c.copy() for c in classes]))
        one_changed = [c.copy() for c in classes]
        one_changed[3] = np.array([7, 3])
        assert not record.add("one changed", gate.metric.score(one_changed))
    finally:
        gate.close()
    assert record.attempts[1]["score"] == 0.9 and record.attempts[1]["drop_points"] == 10.0
    low, high = record.attempts[1]["drop_90ci_points"]
    assert low < 10.0 < high and record.attempts[0]["drop_90ci_points"] == [0.0, 0.0]
    assert record.result(())["metric"] == "top-1 agreement with FP32" and "top-1 agreement" in record.result(())["rule"]
