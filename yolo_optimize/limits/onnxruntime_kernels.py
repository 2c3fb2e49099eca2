"""ONNX Runtime's peak kernels: float MatMul/Conv, and its integer kernels MatMulInteger (u8 x s8) and QLinearConv.

The integer ops are the kernels a fused INT8 model runs; they are written directly so the
peak does not depend on whether ONNX Runtime fuses a QDQ pattern.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from yolo_optimize.limits.kernels import ConvShape, GemmShape, Kernel, Shape

PRECISIONS = ("fp32", "int8")


def unavailable_reason(precision: str) -> str | None:
    return None if precision in PRECISIONS else f"ONNX Runtime's CPU provider has no {precision} kernels"


def kernel(shape: Shape, precision: str, threads: int) -> Kernel:
    import onnxruntime as ort

    model, feed = _gemm(shape, precision) if isinstance(shape, GemmShape) else _conv(shape, precision)
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return Kernel(lambda: session.run(None, feed), precision)


def _gemm(shape: GemmShape, precision: str) -> tuple[Any, dict[str, np.ndarray]]:
    from onnx import TensorProto, helper, numpy_helper

    m, k, n = shape.m, shape.k, shape.n
    rng = np.random.default_rng(0)
    if precision == "int8":
        weights = numpy_helper.from_array(rng.integers(-127, 128, (k, n), dtype=np.int8), "w")
        zero = numpy_helper.from_array(np.array(128, np.uint8), "x_zero")
        node = helper.make_node("MatMulInteger", ["x", "w", "x_zero"], ["y"])
        graph = _graph(node, [weights, zero], TensorProto.UINT8, [m, k], TensorProto.INT32)
        return graph, {"x": rng.integers(0, 256, (m, k), dtype=np.uint8)}
    weights = numpy_helper.from_array(rng.standard_normal((k, n), dtype=np.float32), "w")
    node = helper.make_node("MatMul", ["x", "w"], ["y"])
    graph = _graph(node, [weights], TensorProto.FLOAT, [m, k], TensorProto.FLOAT)
    return graph, {"x": rng.standard_normal((m, k), dtype=np.float32)}


def _conv(conv: ConvShape, precision: str) -> tuple[Any, dict[str, np.ndarray]]:
    from onnx import TensorProto, helper, numpy_helper

    shape, kernel = [conv.batch, conv.channels, conv.size, conv.size], conv.kernel
    weight_shape = (conv.filters, conv.channels, kernel, kernel)
    attributes: dict[str, Any] = {"pads": [kernel // 2] * 4, "kernel_shape": [kernel, kernel]}
    rng = np.random.default_rng(0)
    if precision == "int8":
        constants = [numpy_helper.from_array(rng.integers(-127, 128, weight_shape, dtype=np.int8), "w"),
                     *(numpy_helper.from_array(np.array(v, dtype), name) for name, v, dtype in (
                         ("x_scale", 0.02, np.float32), ("x_zero", 128, np.uint8), ("w_scale", 0.01, np.float32),
                         ("w_zero", 0, np.int8), ("y_scale", 0.05, np.float32), ("y_zero", 128, np.uint8)))]
        node = helper.make_node("QLinearConv", ["x", "x_scale", "x_zero", "w", "w_scale", "w_zero", "y_scale",
                                                "y_zero"], ["y"], **attributes)
        graph = _graph(node, constants, TensorProto.UINT8, shape, TensorProto.UINT8)
        return graph, {"x": rng.integers(0, 256, shape, dtype=np.uint8)}
    weights = numpy_helper.from_array(rng.standard_normal(weight_shape, dtype=np.float32) * 0.05, "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], **attributes)
    return _graph(node, [weights], TensorProto.FLOAT, shape, TensorProto.FLOAT), {
        "x": rng.standard_normal(shape, dtype=np.float32)}


def _graph(node: Any, constants: list[Any], input_type: int, input_shape: list[int], output_type: int) -> Any:
    from onnx import helper

    graph = helper.make_graph([node], "peak", [helper.make_tensor_value_info("x", input_type, input_shape)],
                              [helper.make_tensor_value_info("y", output_type, None)], constants)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
