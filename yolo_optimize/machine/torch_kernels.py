"""PyTorch's peak kernels (the eager baseline and TorchScript run on them): ``torch.mm`` and ``conv2d`` in fp32."""

from __future__ import annotations

from yolo_optimize.machine.kernels import GemmShape, Kernel, Shape

PRECISIONS = ("fp32",)


def unavailable_reason(precision: str) -> str | None:
    return None if precision in PRECISIONS else f"no {precision} artifact runs on PyTorch's CPU kernels here"


def build(shape: Shape, precision: str, threads: int) -> Kernel:
    import torch

    torch.set_num_threads(threads)
    generator = torch.Generator().manual_seed(0)
    if isinstance(shape, GemmShape):
        a = torch.randn(shape.m, shape.k, generator=generator)
        b = torch.randn(shape.k, shape.n, generator=generator)
        return Kernel(lambda: _no_grad(torch.mm, a, b), precision)
    x = torch.randn(shape.batch, shape.channels, shape.size, shape.size, generator=generator)
    w = torch.randn(shape.filters, shape.channels, shape.kernel, shape.kernel, generator=generator)
    return Kernel(lambda: _no_grad(torch.nn.functional.conv2d, x, w, padding=shape.kernel // 2), precision)


def _no_grad(function, *args, **kwargs):  # type: ignore[no-untyped-def]
    import torch

    with torch.no_grad():
        return function(*args, **kwargs)
