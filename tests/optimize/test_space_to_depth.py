"""The strided stem as space-to-depth and a stride-1 convolution: the same outputs, and only where it applies."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from yolo_optimize.optimize.space_to_depth import rewrite_strided_stems


def conv_graph(channels: int, kernel: int, stride: int, pads: list[int], size: int = 16) -> onnx.ModelProto:
    rng = np.random.default_rng(channels * 100 + kernel * 10 + stride)
    weight = numpy_helper.from_array(rng.normal(size=(8, channels, kernel, kernel)).astype(np.float32), "w")
    bias = numpy_helper.from_array(rng.normal(size=8).astype(np.float32), "b")
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], name="stem", kernel_shape=[kernel, kernel],
                            strides=[stride, stride], pads=pads)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", channels, size, size])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 8, "h", "w"])
    graph = helper.make_graph([node], "g", [x], [y], [weight, bias])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def outputs(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


@pytest.mark.parametrize(("kernel", "stride", "pads"), [(6, 2, [2, 2, 2, 2]), (4, 2, [0, 0, 2, 2]), (2, 2, [0] * 4)])
def test_a_strided_stem_becomes_space_to_depth_and_a_stride_one_convolution_with_the_same_outputs(
        kernel: int, stride: int, pads: list[int]) -> None:
    model = conv_graph(3, kernel, stride, pads, size=12 * stride)
    original = outputs(model, x := np.random.default_rng(0).random((2, 3, 12 * stride, 12 * stride), np.float32))
    assert rewrite_strided_stems(model) == ["stem"]
    onnx.checker.check_model(model)
    ops = [node.op_type for node in model.graph.node]
    conv = model.graph.node[1]
    assert ops == ["SpaceToDepth", "Conv"] and model.graph.node[0].attribute[0].i == stride
    assert {a.name: list(a.ints) for a in conv.attribute if a.ints}["strides"] == [1, 1]
    assert list(numpy_helper.to_array(model.graph.initializer[0]).shape) == [8, 3 * stride**2, kernel // stride,
                                                                            kernel // stride]
    np.testing.assert_allclose(outputs(model, x), original, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("channels", "kernel", "stride", "pads", "why"), [
    (3, 3, 2, [1, 1, 1, 1], "a 3x3 kernel is not a multiple of the stride"),
    (16, 6, 2, [2, 2, 2, 2], "16 channels already suit integer kernels"),
    (3, 6, 2, [1, 1, 1, 1], "a padding of 1 is not a multiple of the stride"),
    (3, 6, 1, [2, 2, 3, 3], "stride 1: nothing to move into depth"),
    (3, 6, 3, [3, 3, 3, 3], "27 channels after space-to-depth do not suit integer kernels either"),
])
def test_convolutions_the_rewrite_cannot_make_exact_or_need_not_help_are_left_alone(
        channels: int, kernel: int, stride: int, pads: list[int], why: str) -> None:
    model = conv_graph(channels, kernel, stride, pads)
    assert rewrite_strided_stems(model) == [], why
    assert [node.op_type for node in model.graph.node] == ["Conv"]


def test_yolov5n_stem_is_the_one_convolution_rewritten_and_its_outputs_stay(built: Path) -> None:
    """The real 6x6 stride-2 stem of yolov5n on a real-sized input: boxes within two thousandths of a pixel (of 640),
    scores within 1e-5 (only the order of additions changed)."""
    path = built / "onnx-fp32" / "yolov5n.onnx"
    model = onnx.load(str(path))
    assert rewrite_strided_stems(model) == ["node_conv2d"]
    x = np.random.default_rng(0).random((1, 3, 640, 640), np.float32)
    before = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"images": x})[0]
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    after = session.run(None, {"images": x})[0]
    assert np.abs(after[..., :4] - before[..., :4]).max() < 2e-3
    assert np.abs(after[..., 4:] - before[..., 4:]).max() < 1e-5
    conv = next(node for node in model.graph.node if node.name == "node_conv2d")
    assert {a.name: list(a.ints) for a in conv.attribute if a.ints}["kernel_shape"] == [3, 3]
