"""The deployable ONNX files: one output, batch-only dynamic axis, metadata, plain onnxruntime."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from tests.conftest import VAL_DATA
from yolo_optimize.families import family_named
from yolo_optimize.images import to_input


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_graph_has_one_output_and_only_a_dynamic_batch(built: Path, precision: str) -> None:
    folder = built / f"onnx-{precision}"
    model = onnx.load(str(folder / "yolov5n.onnx"))
    dims = lambda value: [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]  # noqa: E731
    assert [i.name for i in model.graph.input] == ["images"] and [o.name for o in model.graph.output] == ["output0"]
    assert dims(model.graph.input[0])[1:] == [3, 640, 640] and isinstance(dims(model.graph.input[0])[0], str)
    assert dims(model.graph.output[0])[1:] == [25200, 85]
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    assert sorted(p.name for p in folder.iterdir()) == ["manifest.json", "yolov5n.onnx"], "no external data"


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_metadata_is_embedded(built: Path, precision: str) -> None:
    props = {p.key: p.value for p in onnx.load(str(built / f"onnx-{precision}" / "yolov5n.onnx")).metadata_props}
    assert json.loads(props["names"])[0] == "person"
    assert props["precision"] == precision and json.loads(props["stride"]) == 32
    assert json.loads(props["imgsz"]) == [640, 640] and json.loads(props["pretrained"]) is True


@pytest.mark.parametrize("batch", [1, 8])
def test_plain_onnxruntime_detects_on_a_real_image(built: Path, batch: int) -> None:
    session = ort.InferenceSession(str(built / "onnx-fp32" / "yolov5n.onnx"), providers=["CPUExecutionProvider"])
    image = family_named("yolov5").preprocess(sorted((VAL_DATA / "images").rglob("*.jpg"))[0], 640).pixels
    (output,) = session.run(None, {"images": to_input(np.repeat(image[None], batch, 0))})
    assert output.shape == (batch, 25200, 85)
    assert (output[..., 4] * output[..., 5:].max(-1) > 0.5).any(), "a real image should give confident detections"
