"""The deployable ONNX files: one output, batch-only dynamic axis, metadata, plain onnxruntime."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from tests.conftest import VAL_DATA
from yolo_optimize.artifact import Manifest
from yolo_optimize.building.stage import recorded_float_part
from yolo_optimize.export.onnx import module_nodes
from yolo_optimize.families import family_named
from yolo_optimize.images import to_input
from yolo_optimize.optimize.int8_onnx import float_nodes

HEAD_CONVOLUTIONS = ["node_conv2d_57", "node_conv2d_58", "node_conv2d_59"]  # yolov5n's Detect outputs


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


def reaching_no_convolution(model: onnx.ModelProto) -> list[str]:
    """The nodes from which no convolution can be reached: what the INT8 passes kept in float for a detector before
    the family's float module was translated into each format's terms (and still must, for these heads)."""
    readers: dict[str, list[onnx.NodeProto]] = {}
    for node in model.graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    reaches: dict[str, bool] = {}
    for node in reversed(model.graph.node):
        below = [reader for out in node.output for reader in readers.get(out, [])]
        reaches[node.name] = any(reader.op_type == "Conv" or reaches[reader.name] for reader in below)
    return [node.name for node in model.graph.node if not reaches[node.name]]


def test_the_export_records_the_detect_head_as_its_float_part_and_int8_keeps_its_tail(built: Path) -> None:
    """The family names a module (yolov5's Detect); the export records its nodes by the exporter's scopes, and the
    ONNX INT8 passes keep that part's output convolutions and decode: the nodes from which no convolution can be
    reached."""
    model = onnx.load(str(built / "onnx-fp32" / "yolov5n.onnx"))
    part = recorded_float_part(Manifest.read(built / "onnx-fp32"))
    types = {node.name: node.op_type for node in model.graph.node}
    assert sorted(name for name in part if types[name] == "Conv") == HEAD_CONVOLUTIONS
    assert {"Sigmoid", "Concat", "Reshape"} <= {types[name] for name in part}
    assert float_nodes(model, part) == reaching_no_convolution(model)
    assert float_nodes(model, []) == [], "no float module: nothing kept"


def test_the_float_part_of_a_module_the_export_does_not_hold_is_refused(built: Path) -> None:
    raw = built.parent / "yolov5n" / ".cache" / "onnx-export" / "yolov5n.onnx"
    assert module_nodes(raw, None) == []
    assert module_nodes(raw, "model.model.24") and set(module_nodes(raw, "model.model.24.m.0")) < set(
        module_nodes(raw, "model.model.24"))
    with pytest.raises(RuntimeError, match="placed no node inside 'model.model.99'"):
        module_nodes(raw, "model.model.99")
