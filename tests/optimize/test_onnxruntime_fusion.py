"""The ONNX Runtime completion of NNCF's QDQ graph, on a small convolutional network NNCF really quantized."""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from yolo_optimize.optimize.onnxruntime_fusion import (
    activations_to_u8,
    fuse_for_onnxruntime,
)

SIZE = 16


def _conv_silu(name: str, source: str, channels_in: int, channels_out: int, kernel: int, rng: np.random.Generator,
               silu: bool = True) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    weight = rng.normal(0, 1 / np.sqrt(channels_in * kernel * kernel), (channels_out, channels_in, kernel, kernel))
    tensors = [numpy_helper.from_array(weight.astype(np.float32), f"{name}.weight"),
               numpy_helper.from_array(rng.normal(0, 0.5, channels_out).astype(np.float32), f"{name}.bias")]
    nodes = [helper.make_node("Conv", [source, f"{name}.weight", f"{name}.bias"], [f"{name}.conv"], name=name,
                              pads=[kernel // 2] * 4)]
    if silu:
        nodes += [helper.make_node("Sigmoid", [f"{name}.conv"], [f"{name}.sigmoid"], name=f"{name}.sigmoid"),
                  helper.make_node("Mul", [f"{name}.conv", f"{name}.sigmoid"], [f"{name}.out"], name=f"{name}.mul")]
    return nodes, tensors


def small_detector_body() -> onnx.ModelProto:
    """Conv+SiLU blocks, an SPPF-like MaxPool/Concat and a float output convolution: YOLO's shapes in miniature."""
    rng = np.random.default_rng(0)
    parts = [_conv_silu("c1", "images", 3, 8, 3, rng), _conv_silu("c2", "c1.out", 8, 8, 3, rng),
             _conv_silu("c3", "cat", 16, 8, 1, rng), _conv_silu("head", "c3.out", 8, 4, 1, rng, silu=False)]
    pool = helper.make_node("MaxPool", ["c2.out"], ["pool"], name="pool", kernel_shape=[3, 3], pads=[1] * 4)
    concat = helper.make_node("Concat", ["c2.out", "pool"], ["cat"], name="cat", axis=1)
    nodes = parts[0][0] + parts[1][0] + [pool, concat] + parts[2][0] + parts[3][0]
    graph = helper.make_graph(nodes, "body",
                              [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, SIZE, SIZE])],
                              [helper.make_tensor_value_info("head.conv", TensorProto.FLOAT, [1, 4, SIZE, SIZE])],
                              [tensor for _, tensors in parts for tensor in tensors])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def quantized() -> tuple[onnx.ModelProto, list[dict[str, np.ndarray]]]:
    import nncf

    rng = np.random.default_rng(1)
    feeds = [{"images": rng.random((1, 3, SIZE, SIZE), dtype=np.float32)} for _ in range(8)]
    model = nncf.quantize(small_detector_body(), nncf.Dataset(feeds), preset=nncf.QuantizationPreset.MIXED,
                          subset_size=len(feeds), ignored_scope=nncf.IgnoredScope(names=["head"]))
    return model, feeds


def _copy(model: onnx.ModelProto) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    return copy


def _run(model: onnx.ModelProto, feeds: list[dict[str, np.ndarray]], optimized: Path | None = None) -> np.ndarray:
    options = ort.SessionOptions()
    if optimized is not None:
        options.optimized_model_filepath = str(optimized)
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return np.stack([session.run(None, feed)[0] for feed in feeds])


def test_unsigned_activations_change_no_value(quantized) -> None:
    model, feeds = quantized
    assert any(numpy_helper.to_array(t).dtype == np.int8 and not t.dims for t in model.graph.initializer), \
        "NNCF wrote no signed activation grid: nothing to shift"
    shifted = _copy(model)
    activations_to_u8(shifted)
    onnx.checker.check_model(shifted)
    assert np.array_equal(_run(model, feeds), _run(shifted, feeds))


def test_every_silu_convolution_runs_on_int8_kernels(quantized, tmp_path: Path) -> None:
    model, feeds = quantized
    before = _run(model, feeds, tmp_path / "nncf.onnx")
    assert "QLinearConv" not in {n.op_type for n in onnx.load(str(tmp_path / "nncf.onnx")).graph.node}
    completed = _copy(model)
    assert fuse_for_onnxruntime(completed, feeds, threads=1) == 3  # c1, c2 and c3 (through the MaxPool/Concat)
    onnx.checker.check_model(completed)
    after = _run(completed, feeds, tmp_path / "completed.onnx")
    kernels = collections.Counter(n.op_type for n in onnx.load(str(tmp_path / "completed.onnx")).graph.node)
    assert kernels["QLinearConv"] == 3 and kernels["Conv"] == 1, kernels  # the head stays in float
    # c3's SiLU feeds the float head: its product is not quantized, so its sigmoid stays float too
    assert kernels["QLinearSigmoid"] == kernels["QLinearMul"] == 2 and kernels["Sigmoid"] == 1, kernels
    error = np.abs(after - before).max() / np.abs(before).max()
    assert 0 < error < 0.05, f"completing the graph moved the output by {error:.1%} of its range"


def test_bias_is_exact_int32_at_the_products_scale(quantized) -> None:
    model, feeds = quantized
    completed = _copy(model)
    fuse_for_onnxruntime(completed, feeds, threads=1)
    tensors = {t.name: numpy_helper.to_array(t) for t in completed.graph.initializer}
    original = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for name in ("c1", "c2", "c3"):
        integers, scale = tensors[f"{name}_bias_int32"], tensors[f"{name}_bias_scale"]
        assert integers.dtype == np.int32
        np.testing.assert_allclose(integers * scale.astype(np.float64), original[f"{name}.bias"], atol=scale.max())


def test_a_network_without_silu_convolutions_keeps_its_graph_apart_from_the_unsigned_shift() -> None:
    import nncf

    rng = np.random.default_rng(2)
    (conv1, tensors1), (conv2, tensors2) = (_conv_silu("r1", "images", 3, 8, 3, rng, silu=False),
                                            _conv_silu("r2", "r1.relu", 8, 4, 3, rng, silu=False))
    relu = helper.make_node("Relu", ["r1.conv"], ["r1.relu"], name="r1.relu")
    images = helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, SIZE, SIZE])
    output = helper.make_tensor_value_info("r2.conv", TensorProto.FLOAT, [1, 4, SIZE, SIZE])
    graph = helper.make_graph(conv1 + [relu] + conv2, "relu", [images], [output], tensors1 + tensors2)
    feeds = [{"images": rng.random((1, 3, SIZE, SIZE), dtype=np.float32)} for _ in range(4)]
    model = nncf.quantize(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), nncf.Dataset(feeds),
                          subset_size=len(feeds))
    shifted, completed = _copy(model), _copy(model)
    activations_to_u8(shifted)
    assert fuse_for_onnxruntime(completed, feeds, threads=1) == 0
    assert completed == shifted


def uint8_stem_body(stride_stem: bool) -> onnx.ModelProto:
    """What ``--input uint8`` exports, in miniature: the NHWC bytes, ``Transpose -> Cast -> Div(255)``, then a 6x6
    stride-2 stem (rewritten to space-to-depth when ``stride_stem``) with its SiLU and a float head."""
    from yolo_optimize.optimize.space_to_depth import rewrite_strided_stems

    rng = np.random.default_rng(3)
    (stem, stem_tensors), (head, head_tensors) = (_conv_silu("stem", "scaled", 3, 8, 6, rng),
                                                  _conv_silu("head", "stem.out", 8, 4, 1, rng, silu=False))
    del stem[0].attribute[:]
    stem[0].attribute.extend([helper.make_attribute("strides", [2, 2]), helper.make_attribute("pads", [2] * 4)])
    prefix = [helper.make_node("Transpose", ["images"], ["nchw"], name="layout", perm=[0, 3, 1, 2]),
              helper.make_node("Cast", ["nchw"], ["floats"], name="cast", to=TensorProto.FLOAT),
              helper.make_node("Div", ["floats", "levels"], ["scaled"], name="scale")]
    images = helper.make_tensor_value_info("images", TensorProto.UINT8, ["n", SIZE, SIZE, 3])
    output = helper.make_tensor_value_info("head.conv", TensorProto.FLOAT, ["n", 4, SIZE // 2, SIZE // 2])
    levels = numpy_helper.from_array(np.array(255, np.float32), "levels")
    graph = helper.make_graph(prefix + stem + head, "u8", [images], [output], [levels, *stem_tensors, *head_tensors])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    if stride_stem:
        assert rewrite_strided_stems(model) == ["stem"]
    return model


@pytest.mark.parametrize("stride_stem", [True, False])
def test_a_uint8_image_is_read_on_its_own_grid_by_an_int8_stem(stride_stem: bool, tmp_path: Path) -> None:
    """NNCF quantizes the scaled image on a calibrated grid, ahead of the stem's SpaceToDepth. Folded, the graph reads
    the bytes themselves at 1/255 (no Cast, Div or QuantizeLinear left; exact, so no further from the float model than
    NNCF's graph), the SpaceToDepth moves onto the bytes, and ONNX Runtime runs the stem as an integer convolution."""
    import nncf

    from yolo_optimize.artifact import Manifest
    from yolo_optimize.optimize.onnxruntime_fusion import dequantize_after_layout, fold_uint8_input
    from yolo_optimize.runtime.runners.onnxruntime import OnnxRuntimeRunner

    rng = np.random.default_rng(4)
    feeds = [{"images": rng.integers(0, 256, (1, SIZE, SIZE, 3), dtype=np.uint8)} for _ in range(8)]
    body = uint8_stem_body(stride_stem)
    model = nncf.quantize(body, nncf.Dataset(feeds), preset=nncf.QuantizationPreset.MIXED, subset_size=len(feeds),
                          ignored_scope=nncf.IgnoredScope(names=["head"]))
    folded = _copy(model)
    activations_to_u8(folded)
    assert fold_uint8_input(folded) and dequantize_after_layout(folded) == int(stride_stem)
    want = _run(body, feeds)
    nncf_error, folded_error = (np.abs(_run(m, feeds) - want).max() for m in (model, folded))
    assert folded_error <= nncf_error * 1.01 + 1e-6, (folded_error, nncf_error)
    assert fuse_for_onnxruntime(model, feeds, threads=1) == 1
    onnx.checker.check_model(model)
    ops = [node.op_type for node in model.graph.node]
    assert not {"Cast", "Div"} & set(ops)
    assert ops[:2] == ["Transpose", "SpaceToDepth" if stride_stem else "DequantizeLinear"]
    first = next(node for node in model.graph.node if node.op_type == "DequantizeLinear")
    grid = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    assert float(grid[first.input[1]]) == np.float32(1 / 255) and int(grid[first.input[2]]) == 0
    onnx.save(model, str(tmp_path / "model.onnx"))
    manifest = Manifest("onnx-int8", "onnx-int8", "m", "onnx", "int8", "model.onnx", "k", {}, {}, {}, {})
    with OnnxRuntimeRunner(tmp_path, manifest, threads=1) as runner:
        assert runner.convolutions == (1, 2) and runner.executed_precision == "int8+fp32 (1 of 2 convolutions in int8)"
