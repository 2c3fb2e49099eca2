"""Per-layer time as each runtime's own profiler reports it, in one typed form for every runner.

Each runner profiles with its runtime's tool (ONNX Runtime's profiling JSON, OpenVINO's
per-layer performance counters, the PyTorch profiler) and writes a Chrome-trace file
(chrome://tracing, ui.perfetto.dev) beside the numbers.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import prod

# Layer types with a weight tensor, and which input holds it, as each runtime names them: their
# operations follow from the weight's and the output's shapes, read from the runtime's own graph.
WEIGHT_INPUT = {
    "Conv": 1, "FusedConv": 1, "ConvInteger": 1, "QLinearConv": 3, "Gemm": 1, "FusedGemm": 1,  # ONNX Runtime
    "Convolution": 1, "GroupConvolution": 1, "FullyConnected": 1,  # OpenVINO's runtime graph
}


@dataclass(frozen=True)
class LayerTime:
    """One layer's mean time per forward pass, with what the runtime says it ran."""

    name: str
    kind: str  # the layer's type as the runtime names it (Conv, QLinearConv, Convolution, aten::conv2d...)
    ms: float
    executed: str = ""  # the precision the runtime ran it in, where the runtime says
    kernel: str = ""  # the runtime's implementation (OpenVINO exec type, ONNX Runtime provider)
    gflops: float | None = None  # 2 x multiply-adds per forward pass, for convolutions and fully connected layers


def weighted_gflops(weight: Sequence[int], output: Sequence[int]) -> float:
    """2 x multiply-adds of a convolution or fully connected layer from its weight and NC... output shapes.

    Every output element of every image takes one multiply-add per weight of its output channel:
    ``prod(weight) / C_out`` of them, times ``N x C_out x spatial`` outputs. Holds for grouped
    convolutions (their weight holds only the group's input channels) and for [N, C] outputs.
    """
    return 2 * prod(weight) * output[0] * prod(output[2:]) / 1e9


@dataclass(frozen=True)
class LayerProfile:
    layers: list[LayerTime]
    runs: int  # forward passes the times are averaged over
    trace_note: str  # what the trace file shows (a runtime's own timeline, or one laid out from its counters)
    passes_ms: list[float]  # wall time of each of those passes, profiler on

    @property
    def pass_ms(self) -> float:
        """The mean profiled pass: what the per-layer sum (a mean per pass too) must account for.

        Why: a profiler slows each pass by its own bookkeeping, and a runtime's profiled session is not the one
        the forward time is measured on, so the layers are checked against the passes they were taken in.
        """
        return round(statistics.fmean(self.passes_ms), 4)


def timed_ms(call: Callable[[], object]) -> float:
    """The wall time of one call, in ms."""
    start = time.perf_counter()
    call()
    return (time.perf_counter() - start) * 1e3
