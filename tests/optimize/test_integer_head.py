"""The anchor head's 1x1 convolutions as integer GEMMs with float outputs: the same numbers as the convolution on the
u8 input grid and the s8 weights, in the head's own layout ([B, anchors, H, W, outputs] for YOLOv7's, [B, H, W, anchors,
outputs] for YOLOv5's channels-last decode), and only where the pattern is."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from yolo_optimize.host.cpu import has_vnni
from yolo_optimize.optimize.integer_head import CHANNELS_LAST, integer_head
from yolo_optimize.runtime.runners.onnxruntime import INTEGER_CONVOLUTION_SUFFIX

ANCHORS, OUTPUTS, CHANNELS, SIZE = 3, 7, 8, 5
GRID = (np.float32(0.02), np.uint8(30))  # the u8 grid another layer's quantizer already reads the input on


def head_graph(permute: list[int], gridded: bool, rows: tuple[int, ...] = (ANCHORS, OUTPUTS)) -> onnx.ModelProto:
    """x -> Conv 1x1 -> Reshape [B, anchors, outputs, H, W] -> Transpose (YOLOv7's head); with ``permute`` [0, 2, 3,
    1], x -> Conv 1x1 -> Transpose -> Reshape [B, H, W, *rows] (YOLOv5's channels-last decode). With ``gridded``, a
    quantizer also reads x."""
    rng = np.random.default_rng(0)
    weight = rng.normal(size=(ANCHORS * OUTPUTS, CHANNELS, 1, 1)).astype(np.float32)
    channels_last = permute == CHANNELS_LAST
    shape = [-1, SIZE, SIZE, *rows] if channels_last else [-1, ANCHORS, OUTPUTS, SIZE, SIZE]
    initializers = [numpy_helper.from_array(weight, "w"),
                    numpy_helper.from_array(rng.normal(size=ANCHORS * OUTPUTS).astype(np.float32), "b"),
                    numpy_helper.from_array(np.array(shape, np.int64), "shape"),
                    numpy_helper.from_array(np.array(GRID[0], np.float32), "s"),
                    numpy_helper.from_array(np.array(GRID[1], np.uint8), "z")]
    layout = [helper.make_node("Transpose", ["conv"], ["view"], name="permute", perm=permute),
              helper.make_node("Reshape", ["view", "shape"], ["y"], name="rows")] if channels_last else [
              helper.make_node("Reshape", ["conv", "shape"], ["view"], name="view"),
              helper.make_node("Transpose", ["view"], ["y"], name="permute", perm=permute)]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["conv"], name="head"), *layout]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", *shape[1:]])]
    if gridded:
        nodes.append(helper.make_node("QuantizeLinear", ["x", "s", "z"], ["x_u8"], name="next_layer"))
        outputs.append(helper.make_tensor_value_info("x_u8", TensorProto.UINT8, ["n", CHANNELS, SIZE, SIZE]))
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", CHANNELS, SIZE, SIZE])]
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(["y"], {"x": x})[0]


def on_grids(model: onnx.ModelProto, x: np.ndarray, scale: float, zero_point: int, weight_bits: int,
             channels_last: bool = False) -> np.ndarray:
    """The reference: the float convolution on x rounded to the u8 grid and weights rounded per output channel, in
    the head's layout."""
    weights = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    w = weights["w"].reshape(ANCHORS * OUTPUTS, CHANNELS).astype(np.float64)
    levels = 2 ** (weight_bits - 1) - 1
    step = np.abs(w).max(axis=1, keepdims=True) / levels
    xq = (np.clip(np.round(x / scale) + zero_point, 0, 255) - zero_point) * scale
    y = np.einsum("oc,nchw->nohw", np.round(w / step) * step, xq) + weights["b"][None, :, None, None]
    if channels_last:
        return y.transpose(0, 2, 3, 1).reshape(len(x), SIZE, SIZE, ANCHORS, OUTPUTS)
    return y.reshape(len(x), ANCHORS, OUTPUTS, SIZE, SIZE).transpose(0, 1, 3, 4, 2)


# ONNX Runtime's u8 x s8 kernels add the products in pairs into int16 without VNNI, saturating with 8-bit weights:
# the build quantizes to 7 bits there (BuildRequest.int8_vnni), so 8-bit heads are checked only where they are built.
EIGHT_BIT_WEIGHTS = pytest.mark.skipif(not has_vnni(), reason="this CPU has no VNNI: its u8 x s8 products saturate "
                                                               "with 8-bit weights, which are built only with VNNI")


@pytest.mark.parametrize("weight_bits", [pytest.param(8, marks=EIGHT_BIT_WEIGHTS), 7])
def test_the_head_on_an_existing_grid_computes_the_convolution_of_the_rounded_operands(weight_bits: int) -> None:
    model = head_graph([0, 1, 3, 4, 2], gridded=True)
    x = np.random.default_rng(1).uniform(-0.5, 4, (2, CHANNELS, SIZE, SIZE)).astype(np.float32)
    exact, reference = run(model, x), on_grids(model, x, *GRID, weight_bits)
    assert integer_head(model, [{"x": x}], 1, weight_bits) == ["head"]
    onnx.checker.check_model(model)
    assert [n.op_type for n in model.graph.node] == ["QuantizeLinear", "Transpose", "MatMulIntegerToFloat", "Reshape",
                                                      "Transpose", "QuantizeLinear"], "on the grid already there"
    matmul = model.graph.node[2]
    assert list(model.graph.node[0].input[1:]) == ["s", "z"] and matmul.name == "head" + INTEGER_CONVOLUTION_SUFFIX
    weights = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    assert np.abs(weights[matmul.input[1]]).max() == 2 ** (weight_bits - 1) - 1
    got = run(model, x)
    np.testing.assert_allclose(got, reference, rtol=1e-4, atol=1e-4)
    assert 0 < np.abs(got - exact).max() < 0.05 * np.abs(exact).max(), "rounded operands, float output"


def test_a_head_without_a_grid_gets_one_calibrated_on_the_feeds() -> None:
    """At the weight bits a build on this CPU uses (8 with VNNI, else 7)."""
    bits = 8 if has_vnni() else 7
    model = head_graph([0, 1, 3, 4, 2], gridded=False)
    original = head_graph([0, 1, 3, 4, 2], gridded=False)
    x = np.random.default_rng(2).uniform(-0.3, 2, (1, CHANNELS, SIZE, SIZE)).astype(np.float32)
    exact = run(model, x)
    assert integer_head(model, [{"x": x}], 1, bits) == ["head"]
    assert model.graph.node[0].op_type == "QuantizeLinear"
    weights = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    scale, zero_point = (weights[name] for name in model.graph.node[0].input[1:])
    assert scale == pytest.approx((x.max() - x.min()) / 255, rel=1e-5)
    got = run(model, x)
    np.testing.assert_allclose(got, on_grids(original, x, float(scale), int(zero_point), bits), rtol=1e-4, atol=1e-4)
    assert np.abs(got - exact).max() < 0.05 * np.abs(exact).max()


def test_a_convolution_not_followed_by_the_anchor_permute_is_left_as_it_is() -> None:
    model = head_graph([0, 1, 2, 4, 3], gridded=True)
    before = model.SerializeToString()
    assert integer_head(model, [], 1, 8) == [] and model.SerializeToString() == before


@pytest.mark.parametrize("weight_bits", [pytest.param(8, marks=EIGHT_BIT_WEIGHTS), 7])
def test_a_head_that_decodes_channels_last_reads_the_product_as_it_comes(weight_bits: int) -> None:
    """YOLOv5's head since its graph revision 1: the product's [B, H, W, anchors * outputs] is what the head's
    transpose made, so the transpose goes and nothing moves the rows."""
    model = head_graph(CHANNELS_LAST, gridded=True)
    x = np.random.default_rng(3).uniform(-0.5, 4, (2, CHANNELS, SIZE, SIZE)).astype(np.float32)
    exact = run(model, x)
    assert integer_head(model, [{"x": x}], 1, weight_bits) == ["head"]
    onnx.checker.check_model(model)
    assert [n.op_type for n in model.graph.node] == ["QuantizeLinear", "Transpose", "MatMulIntegerToFloat", "Reshape",
                                                      "QuantizeLinear"], "the u8 input's transpose only"
    got = run(model, x)
    reference = on_grids(head_graph(CHANNELS_LAST, gridded=True), x, *GRID, weight_bits, channels_last=True)
    np.testing.assert_allclose(got, reference, rtol=1e-4, atol=1e-4)
    assert 0 < np.abs(got - exact).max() < 0.05 * np.abs(exact).max()


def test_a_channels_last_transpose_not_read_as_anchor_rows_is_left_as_it_is() -> None:
    model = head_graph(CHANNELS_LAST, gridded=True, rows=(ANCHORS * OUTPUTS,))
    before = model.SerializeToString()
    assert integer_head(model, [], 1, 8) == [] and model.SerializeToString() == before
