"""The accuracy gate: real artifacts scored on labelled images, every route recorded, a failure explained."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.conftest import CALIB_DATA
from yolo_optimize.artifact import Manifest
from yolo_optimize.families import family_named
from yolo_optimize.optimize.calibration import Gate, GateConfig, GateRecord


def test_a_route_over_the_limit_fails_the_gate_naming_every_route_with_its_interval(built: Path) -> None:
    """FP32 against itself loses nothing; a model that finds nothing loses all its mAP and fails."""
    config = GateConfig(str(CALIB_DATA), images=8, max_map_drop=1.0)
    gate = Gate(config, family_named("yolov5"), imgsz=640, threads=2)
    try:
        reference = gate.score(built / "onnx-fp32", Manifest.read(built / "onnx-fp32"))
        record = GateRecord(config, reference, gate)
        assert reference.map50_95 > 0.2
        assert record.add("fp32 itself", reference)
        assert record.attempts[0]["drop_points"] == 0 and record.attempts[0]["drop_90ci_points"] == [0, 0]
        blind = gate.score_outputs([np.zeros((0, 6), np.float32) for _ in gate.dataset.images])
        assert not record.add("finds nothing", blind)
    finally:
        gate.close()
    with pytest.raises(RuntimeError) as failure:
        record.require_pass()
    message = str(failure.value)
    assert message.startswith("accuracy gate failed: mAP50-95 0.0 vs FP32") and "> --max-map-drop 1.0" in message
    assert "fp32 itself: 0.0 (90% CI 0.0 to 0.0); finds nothing: " in message and "\n" not in message
    assert record.result()["verdict"] == "clear" and not record.result()["passed"]
