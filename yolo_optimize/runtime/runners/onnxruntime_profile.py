"""Per-layer time of an ONNX Runtime session read from its profiler's JSON (a Chrome trace): each node's mean time
per run, the precision and provider it ran in, and the operations of its weighted nodes from the shapes recorded.

Apart from the runner (onnxruntime.py) because it reads a file ONNX Runtime wrote, with no session: the runner's
``profile_layers`` runs the profiled session and hands its trace here.
"""

from __future__ import annotations

from typing import Any

from yolo_optimize.runtime.layers import WEIGHT_INPUT, LayerTime, weighted_gflops

INTEGER_OPS = ("QLinearConv", "ConvInteger", "MatMulInteger", "QLinearMatMul", "MatMulIntegerToFloat",
               "DynamicQuantizeLinear", "QLinearAdd", "QLinearMul", "QLinearConcat", "QLinearSigmoid")


def node_times(events: list[dict[str, Any]], runs: int, float_precision: str) -> list[LayerTime]:
    """Mean time per run of every node, over the last ``runs`` ``model_run`` spans of ONNX Runtime's profile."""
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("name") == "model_run")[-runs:]
    totals: dict[str, list[Any]] = {}
    for event in events:
        name = event.get("name", "")
        if event.get("cat") != "Node" or not name.endswith("_kernel_time"):
            continue
        if any(start <= event["ts"] <= end for start, end in spans):
            args = event.get("args", {})
            entry = totals.setdefault(name.removesuffix("_kernel_time"), [args.get("op_name", ""), 0.0,
                                                                          args.get("provider", ""), _gflops(args)])
            entry[1] += event["dur"]
    return [LayerTime(name, op, round(us / runs / 1e3, 4), "int8" if op in INTEGER_OPS else float_precision, provider,
                      gflops) for name, (op, us, provider, gflops) in totals.items()]


def _gflops(args: dict[str, Any]) -> float | None:
    """A weighted node's operations from the shapes ONNX Runtime's profile records (``[{"float": [...]}]``).

    None where they are not there: ONNX Runtime leaves prepacked weights out of the shapes of its channels-last
    int8 convolutions, so the entry at the weight's index is then a scale vector, not a weight.
    """
    index = WEIGHT_INPUT.get(args.get("op_name", ""))
    inputs, outputs = args.get("input_type_shape", []), args.get("output_type_shape", [])
    if index is None or len(inputs) <= index or not outputs:
        return None
    weight = next(iter(inputs[index].values()))
    return weighted_gflops(weight, next(iter(outputs[0].values()))) if len(weight) >= 2 else None
