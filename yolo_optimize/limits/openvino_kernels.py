"""OpenVINO's peak kernels: a MatMul and a Convolution, in f32, in bf16 where the CPU has it natively, and in
int8 the way OpenVINO meets it in a quantized IR (FakeQuantize on activations and weights).

The precision each kernel executes in is read back from the compiled model's runtime graph.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from yolo_optimize.host.cpu import has_native_bf16
from yolo_optimize.limits.kernels import ConvShape, GemmShape, Kernel, Shape
from yolo_optimize.runtime.runners.openvino import EXECUTION_HINTS, ov_precision

PRECISIONS = ("fp32", "bf16", "int8")
COMPUTE_LAYERS = ("FullyConnected", "MatMul", "Convolution")


def unavailable_reason(precision: str) -> str | None:
    if precision == "bf16" and not has_native_bf16():
        return "no native bf16 on this CPU (OpenVINO would compute in f32)"
    return None if precision in PRECISIONS else f"OpenVINO's CPU plugin has no {precision} kernels"


def kernel(shape: Shape, precision: str, threads: int) -> Kernel:
    import openvino as ov

    quantized = precision == "int8"
    parameter, output = _gemm(shape, quantized) if isinstance(shape, GemmShape) else _conv(shape, quantized)
    core = ov.Core()
    compiled = core.compile_model(ov.Model([output], [parameter], "peak"), "CPU", {
        "INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY",
        "INFERENCE_PRECISION_HINT": EXECUTION_HINTS[precision]})  # int8: from FakeQuantize
    request = compiled.create_infer_request()
    data = np.random.default_rng(0).uniform(0, 2.55, tuple(parameter.get_partial_shape().to_shape())).astype(np.float32)
    return Kernel(lambda: request.infer({0: data}, share_inputs=True, share_outputs=True), _executed(compiled))


def _executed(compiled: Any) -> str:
    """The runtime precision of the compiled graph's compute layer (its ``runtimePrecision``)."""
    for op in compiled.get_runtime_model().get_ordered_ops():
        info = op.get_rt_info()
        if info["layerType"].astype(str) in COMPUTE_LAYERS:
            return ov_precision(info["runtimePrecision"].astype(str))
    return "unknown"


def _gemm(shape: GemmShape, quantized: bool) -> tuple[Any, Any]:
    import openvino.opset13 as ops

    parameter = ops.parameter([shape.m, shape.k], np.float32, name="x")
    weights = _weights((shape.k, shape.n), quantized)
    return parameter, ops.matmul(_activations(parameter, quantized), weights, False, False)


def _conv(conv: ConvShape, quantized: bool) -> tuple[Any, Any]:
    import openvino.opset13 as ops

    parameter = ops.parameter([conv.batch, conv.channels, conv.size, conv.size], np.float32, name="x")
    pad = conv.kernel // 2
    weights = _weights((conv.filters, conv.channels, conv.kernel, conv.kernel), quantized)
    return parameter, ops.convolution(_activations(parameter, quantized), weights, [1, 1], [pad, pad], [pad, pad],
                                      [1, 1])


def _activations(parameter: Any, quantized: bool) -> Any:
    """u8 activations in a quantized model: FakeQuantize with 256 levels over [0, 2.55]."""
    return _fake_quantize(parameter, 0.0, 2.55, 256) if quantized else parameter


def _weights(shape: tuple[int, ...], quantized: bool) -> Any:
    """Random weights; in a quantized model symmetric i8 (255 levels), as NNCF writes them."""
    import openvino.opset13 as ops

    weights = ops.constant(np.random.default_rng(0).uniform(-1.27, 1.27, shape).astype(np.float32))
    return _fake_quantize(weights, -1.27, 1.27, 255) if quantized else weights


def _fake_quantize(node: Any, low: float, high: float, levels: int) -> Any:
    import openvino.opset13 as ops

    bounds = [ops.constant(np.array(v, np.float32)) for v in (low, high, low, high)]
    return ops.fake_quantize(node, *bounds, levels)
