"""Per-layer time of a PyTorch forward pass (eager or TorchScript) by the PyTorch profiler, and its Chrome trace."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from yolo_optimize.evaluate.layers import LayerProfile, LayerTime

FORWARD = "forward"


def torch_layer_profile(forward: Callable[[], Any], runs: int, trace: Path, executed: str) -> LayerProfile:
    """Each op called directly by a forward pass is a layer (``aten::conv2d #3``: the third op of the pass)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    for _ in range(2):
        forward()
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        for _ in range(runs):
            with record_function(FORWARD):
                forward()
    profiler.export_chrome_trace(str(trace))
    totals: dict[str, list[Any]] = {}
    positions: dict[int, int] = {}
    for event in profiler.events():
        parent = event.cpu_parent
        if parent is None or parent.name != FORWARD:
            continue
        position = positions[parent.id] = positions.get(parent.id, 0) + 1
        entry = totals.setdefault(f"{event.name} #{position}", [event.name, 0.0])
        entry[1] += event.cpu_time_total
    layers = [LayerTime(name, kind, round(us / runs / 1e3, 4), executed) for name, (kind, us) in totals.items()]
    return LayerProfile(layers, runs, "the PyTorch profiler's own timeline")
