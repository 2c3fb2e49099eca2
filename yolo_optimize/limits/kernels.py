"""What every runtime's peak kernels share: their shapes, their operation counts, and what a built kernel is.

One GEMM and two 3x3 convolutions, each large enough that its rate is the runtime's compute
rate, not call overhead (milliseconds per call on 2 cores), shaped like the convolutions of
the models measured here (wide and early, narrow and late). A runtime's peak for a precision
is the highest rate of its kernels.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class GemmShape:
    m: int
    k: int
    n: int

    @property
    def name(self) -> str:
        return f"gemm {self.m}x{self.k}x{self.n}"

    @property
    def operations(self) -> int:
        """2 per multiply-add: the count GFLOP/s and GOP/s are quoted in."""
        return 2 * self.m * self.k * self.n


@dataclass(frozen=True)
class ConvShape:
    channels: int
    filters: int
    size: int  # height = width; padding keeps it
    kernel: int = 3
    batch: int = 1

    @property
    def name(self) -> str:
        return f"conv {self.kernel}x{self.kernel} {self.channels}->{self.filters} at {self.size}x{self.size}"

    @property
    def operations(self) -> int:
        return 2 * self.batch * self.filters * self.size ** 2 * self.channels * self.kernel ** 2


Shape = GemmShape | ConvShape
SHAPES: tuple[Shape, ...] = (GemmShape(1024, 1024, 1024), ConvShape(128, 128, 56), ConvShape(256, 256, 28))


@dataclass
class Kernel:
    """One call of a built kernel, and the precision the runtime says it executes in."""

    call: Callable[[], object]
    executed: str
