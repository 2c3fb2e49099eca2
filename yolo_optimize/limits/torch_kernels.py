"""PyTorch's peak kernels (the eager baseline, TorchScript and AOTInductor packages run on them): ``torch.mm`` and
``conv2d`` in fp32 and, where the CPU has native bf16, in bf16 (channels-last, as Inductor lays convolutions out);
int8 through the oneDNN kernels an INT8 AOTInductor package calls: ``torch._int_mm`` and ``onednn.qconv_pointwise``
(u8 activations, s8 per-channel weights)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from yolo_optimize.host.cpu import has_native_bf16
from yolo_optimize.limits.kernels import ConvShape, GemmShape, Kernel, Shape

PRECISIONS = ("fp32", "bf16", "int8")


def unavailable_reason(precision: str) -> str | None:
    if precision == "bf16" and not has_native_bf16():
        return "no native bf16 on this CPU: no bf16 artifact is built for PyTorch's kernels here"
    return None if precision in PRECISIONS else f"no {precision} kernels measured for PyTorch"


def kernel(shape: Shape, precision: str, threads: int) -> Kernel:
    import torch

    torch.set_num_threads(threads)
    generator = torch.Generator().manual_seed(0)
    if precision == "int8":
        return Kernel(_int8_gemm(shape, generator) if isinstance(shape, GemmShape) else _int8_conv(shape, generator),
                      precision)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    if isinstance(shape, GemmShape):
        a = torch.randn(shape.m, shape.k, generator=generator).to(dtype)
        b = torch.randn(shape.k, shape.n, generator=generator).to(dtype)
        return Kernel(lambda: _no_grad(torch.mm, a, b), precision)
    layout = torch.channels_last if precision == "bf16" else torch.contiguous_format
    x = torch.randn(shape.batch, shape.channels, shape.size, shape.size, generator=generator)
    w = torch.randn(shape.filters, shape.channels, shape.kernel, shape.kernel, generator=generator)
    x, w = (t.to(dtype, memory_format=layout) for t in (x, w))
    return Kernel(lambda: _no_grad(torch.nn.functional.conv2d, x, w, padding=shape.kernel // 2), precision)


def _int8_gemm(shape: GemmShape, generator: Any) -> Callable[[], object]:
    import torch

    a = torch.randint(-127, 128, (shape.m, shape.k), generator=generator, dtype=torch.int8)
    b = torch.randint(-127, 128, (shape.k, shape.n), generator=generator, dtype=torch.int8)
    return lambda: torch._int_mm(a, b)


def _int8_conv(shape: ConvShape, generator: Any) -> Callable[[], object]:
    """A u8 x s8 convolution with a u8 output, its weights prepacked once, as Inductor's int8 lowering calls it."""
    import torch

    size, pad = [shape.size] * 2, [shape.kernel // 2] * 2
    x = torch.randint(0, 256, (shape.batch, shape.channels, *size), generator=generator,
                      dtype=torch.uint8).contiguous(memory_format=torch.channels_last)
    w = torch.randint(-127, 128, (shape.filters, shape.channels, shape.kernel, shape.kernel), generator=generator,
                      dtype=torch.int8)
    w_scale, w_zero = torch.full((shape.filters,), 0.01), torch.zeros(shape.filters, dtype=torch.int64)
    packed = torch.ops.onednn.qconv_prepack(w, w_scale, 0.02, 0, [1, 1], pad, [1, 1], 1, list(x.shape))
    return lambda: torch.ops.onednn.qconv_pointwise(x, 0.02, 0, packed, w_scale, w_zero, None, [1, 1], pad, [1, 1],
                                                    1, 0.05, 0, torch.uint8, "none", [], "")


def _no_grad(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    import torch

    with torch.no_grad():
        return function(*args, **kwargs)
