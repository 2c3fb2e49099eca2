"""The Q/DQ graph a TensorRT INT8 engine is built from, checked where TensorRT is absent: its form (what TensorRT's
explicit quantization accepts) and its accuracy, by running it in ONNX Runtime on the CPU through the real gate."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from tests.conftest import CALIB_DATA
from yolo_optimize.artifact import Manifest
from yolo_optimize.building.gate import Gate, GateRecord
from yolo_optimize.building.held_out import ImageSet
from yolo_optimize.building.request import GateConfig
from yolo_optimize.building.stage import recorded_float_part
from yolo_optimize.families import family_named
from yolo_optimize.images import list_images
from yolo_optimize.metadata import ArtifactMetadata
from yolo_optimize.optimize.calibration import calibration_inputs
from yolo_optimize.optimize.int8_onnx import float_nodes
from yolo_optimize.optimize.int8_tensorrt import quantize_symmetric


def test_the_tensorrt_qdq_graph_is_symmetric_signed_int8_with_the_head_in_float_and_passes_the_gate(
        built: Path, tmp_path: Path) -> None:
    family = family_named("yolov5")
    source = built / "onnx-fp32" / "yolov5n.onnx"
    head = float_nodes(onnx.load(str(source)), recorded_float_part(Manifest.read(source.parent)))
    images = calibration_inputs(family, tuple(str(p) for p in list_images(CALIB_DATA)[:16]), 640)
    folder = tmp_path / "onnx-int8-tensorrt"
    folder.mkdir()
    metadata = ArtifactMetadata(family="yolov5", precision="int8")
    quantize_symmetric(source, folder / "yolov5n.onnx", images, head, metadata)

    graph = onnx.load(str(folder / "yolov5n.onnx")).graph
    constants = {tensor.name: numpy_helper.to_array(tensor) for tensor in graph.initializer}
    zero_points = [constants[node.input[2]] for node in graph.node
                   if node.op_type in ("QuantizeLinear", "DequantizeLinear") and len(node.input) > 2]
    assert len(zero_points) > 100 and all(z.dtype == np.int8 and not z.any() for z in zero_points), \
        "TensorRT takes signed int8 with zero points 0 only"
    dequantized = {node.output[0] for node in graph.node if node.op_type == "DequantizeLinear"}
    convolutions = [node for node in graph.node if node.op_type == "Conv"]
    quantized = [node for node in convolutions if node.input[0] in dequantized and node.input[1] in dequantized]
    assert len(quantized) >= 50, "the backbone and neck run in int8"
    assert not any(node.name in head for node in quantized), "the Detect head stays in float"
    assert all(len(node.input) < 3 or node.input[2] not in dequantized for node in convolutions), "bias in float"

    parent = Manifest.read(built / "onnx-fp32")
    config = GateConfig(ImageSet.of(CALIB_DATA, 24), None, "the first 24", 3.0)
    gate = Gate(config.images, family, imgsz=640, threads=2)
    try:
        record = GateRecord(config, gate.score(built / "onnx-fp32", parent), gate)
        passed = record.add("symmetric int8", gate.score(folder, replace(parent, precision="int8", files={})))
    finally:
        gate.close()
    assert passed, record.result()
