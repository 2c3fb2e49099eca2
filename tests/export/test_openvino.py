"""OpenVINO IRs: rt_info metadata, FP16 compression, plain OpenVINO inference."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import openvino as ov
import pytest


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_plain_openvino_reads_metadata_and_runs_batch_1_and_8(built: Path, precision: str) -> None:
    core = ov.Core()
    model = core.read_model(str(built / f"openvino-{precision}" / "yolov5n_openvino_model" / "yolov5n.xml"))
    assert json.loads(model.get_rt_info(["model_info", "names"]).astype(str))[0] == "person"
    assert model.get_rt_info(["model_info", "precision"]).astype(str) == precision
    compiled = core.compile_model(model, "CPU")
    for batch in (1, 8):
        assert compiled(np.zeros((batch, 3, 640, 640), np.float32))[0].shape == (batch, 25200, 85)


def test_fp16_ir_stores_half_the_weights(built: Path) -> None:
    size = lambda p: (built / p / "yolov5n_openvino_model" / "yolov5n.bin").stat().st_size  # noqa: E731
    assert size("openvino-fp16") < 0.6 * size("openvino-fp32")
