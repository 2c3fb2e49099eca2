"""OpenVINO IRs: rt_info metadata, FP16 compression, plain OpenVINO inference."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import openvino as ov
import pytest

from yolo_optimize.artifact import Manifest
from yolo_optimize.building.stage import recorded_float_part
from yolo_optimize.optimize.int8_openvino import decode_ops


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


def test_the_ir_records_the_onnx_float_part_in_its_own_names_and_int8_keeps_the_decode(built: Path) -> None:
    """OpenVINO names its ops after the ONNX nodes they came from: the IR's float part is the ONNX one's ops, and
    OpenVINO's INT8 recipe keeps the ops from which no convolution can be reached, less the output convolutions."""
    model = ov.Core().read_model(str(built / "openvino-fp32" / "yolov5n_openvino_model" / "yolov5n.xml"))
    part = recorded_float_part(Manifest.read(built / "openvino-fp32"))
    onnx_part = set(recorded_float_part(Manifest.read(built / "onnx-fp32")))
    ops = [op for op in model.get_ordered_ops() if op.get_type_name() not in ("Constant", "Parameter", "Result")]
    assert part and all(name.split("/")[0] in onnx_part for name in part)
    reaches: dict[str, bool] = {}
    for op in reversed(ops):
        below = [t.get_node() for out in op.outputs() for t in out.get_target_inputs()]
        reaches[op.get_friendly_name()] = any(b.get_type_name() == "Convolution"
                                              or reaches.get(b.get_friendly_name(), False) for b in below)
    tail = [op.get_friendly_name() for op in ops
            if not reaches[op.get_friendly_name()] and op.get_type_name() != "Convolution"]
    assert decode_ops(model, part) == tail and "output0" in tail


def test_the_ir_decodes_in_one_chain_with_no_split_and_no_constant_the_size_of_an_output(built: Path) -> None:
    """export/openvino.py converts the ONNX file with its decode chained (export/decode_chain.py); the ONNX file
    keeps its split, which ONNX Runtime runs faster. The build's parity check held the IR to PyTorch."""
    model = ov.Core().read_model(str(built / "openvino-fp32" / "yolov5n_openvino_model" / "yolov5n.xml"))
    types = {op.get_type_name() for op in model.get_ordered_ops()}
    assert not {"Split", "VariadicSplit"} & types
    largest = max(int(np.prod(op.get_output_shape(0))) for op in model.get_ordered_ops()
                  if op.get_type_name() == "Constant" and len(op.get_output_shape(0)) == 5)
    assert largest <= 80 * 85
    assert "Split" in {node.op_type for node in onnx.load(str(built / "onnx-fp32" / "yolov5n.onnx")).graph.node}
