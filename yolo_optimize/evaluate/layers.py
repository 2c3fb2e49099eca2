"""Per-layer time as each runtime's own profiler reports it, in one typed form for every runner.

Each runner profiles with its runtime's tool (ONNX Runtime's profiling JSON, OpenVINO's
per-layer performance counters, the PyTorch profiler) and writes a Chrome-trace file
(chrome://tracing, ui.perfetto.dev) beside the numbers.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LayerTime:
    """One layer's mean time per forward pass, with what the runtime says it ran."""

    name: str
    kind: str  # the layer's type as the runtime names it (Conv, QLinearConv, Convolution, aten::conv2d...)
    ms: float
    executed: str = ""  # the precision the runtime ran it in, where the runtime says
    kernel: str = ""  # the runtime's implementation (OpenVINO exec type, ONNX Runtime provider)


@dataclass(frozen=True)
class LayerProfile:
    layers: list[LayerTime]
    runs: int  # forward passes the times are averaged over
    trace_note: str  # what the trace file shows (a runtime's own timeline, or one laid out from its counters)
