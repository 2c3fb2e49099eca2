"""Per-layer time of a PyTorch forward pass (eager or TorchScript) by the PyTorch profiler, and its Chrome trace."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from yolo_optimize.runtime.layers import LayerProfile, LayerTime, timed_ms, weighted_gflops

PASS = "yolo-optimize pass"  # the scope each profiled pass runs in (not an op: no "::")
# Their arguments start (input, weight, bias, stride, padding, dilation).
CONVOLUTIONS = ("aten::conv2d", "aten::_convolution", "aten::convolution")
FULLY_CONNECTED = ("aten::linear", "aten::addmm")


def torch_layer_profile(forward: Callable[[], Any], runs: int, trace: Path, executed: str) -> LayerProfile:
    """Each op called directly by a forward pass is a layer (``aten::conv2d #3``: the third op of the pass); the
    scopes between a pass and its ops (TorchScript's own ``forward``) are looked through, ops inside ops are not
    layers, so the layers add up to no more than the pass."""
    from torch.profiler import ProfilerActivity, profile, record_function

    for _ in range(2):
        forward()
    passes = []
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_flops=True) as profiler:
        for _ in range(runs):
            with record_function(PASS):
                passes.append(timed_ms(forward))
    profiler.export_chrome_trace(str(trace))
    totals: dict[str, list[Any]] = {}
    positions: dict[int, int] = {}
    for event in profiler.events():
        scope = _pass_of(event)
        if scope is None:
            continue
        position = positions[scope.id] = positions.get(scope.id, 0) + 1
        entry = totals.setdefault(f"{event.name} #{position}", [event.name, 0.0, _gflops(event)])
        entry[1] += event.cpu_time_total
    layers = [LayerTime(name, kind, round(us / runs / 1e3, 4), executed, gflops=gflops)
              for name, (kind, us, gflops) in totals.items()]
    return LayerProfile(layers, runs, "the PyTorch profiler's own timeline", passes)


def _pass_of(event: Any) -> Any | None:
    """The profiled pass an op is a layer of; None for a scope, for an op inside another op, or outside a pass."""
    if "::" not in event.name:
        return None
    parent = event.cpu_parent
    while parent is not None and parent.name != PASS:
        if "::" in parent.name:
            return None
        parent = parent.cpu_parent
    return parent


def _gflops(event: Any) -> float | None:
    """The profiler's own count (eager ``conv2d``, ``linear``'s ``addmm``), else a convolution's from its recorded
    shapes and stride/padding/dilation (TorchScript calls ``_convolution``, which the profiler does not count)."""
    if event.name not in (*CONVOLUTIONS, *FULLY_CONNECTED):
        return None  # element-wise ops carry a count too, but only weighted layers are compared with GEMM peaks
    counted = event.flops + sum(child.flops for child in event.cpu_children)
    if counted:
        return counted / 1e9
    if event.name not in CONVOLUTIONS or len(event.input_shapes) < 2:
        return None
    image, weight = event.input_shapes[0], event.input_shapes[1]
    stride, padding, dilation = (list(event.concrete_inputs[i]) if isinstance(event.concrete_inputs[i], list | tuple)
                                 else None for i in (3, 4, 5))
    if not (stride and padding and dilation) or len(image) != 4 or len(weight) != 4 or image[1] % weight[1]:
        return None  # padding="same", or a call the JIT fused into another form: not worth guessing
    spatial = [(size + 2 * pad - dil * (kernel - 1) - 1) // step + 1
               for size, kernel, step, pad, dil in zip(image[2:], weight[2:], stride, padding, dilation)]
    return weighted_gflops(weight, [image[0], weight[0], *spatial]) if min(spatial) >= 1 else None
