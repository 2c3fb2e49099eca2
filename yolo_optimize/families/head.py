"""The Detect head: its output convolutions and the decode after them (sigmoid, grid and anchor math, concat).

Quantizing the decode squashes the sigmoid confidences and the box arithmetic, and
quantizing the output convolutions rounds the raw box and class logits before the
decode (measured with ONNX Runtime on the coco128 gate: 1.5 points of mAP50-95 with
them in float, 2.6 without), so the ONNX and PyTorch INT8 passes keep the whole head out of
their quantizers (an INT8 ONNX file then runs the output convolutions as integer GEMMs that
write float: optimize/integer_head.py). OpenVINO has no such kernel, and its INT8 recipe
quantizes the output convolutions' inputs with histogram ranges and full bias correction,
which keeps their accuracy (optimize/int8_openvino.py), so only the decode stays in float
there. The head is found structurally, for any model size: the ops from which no further
convolution can be reached.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any


def onnx_head_nodes(model: Any) -> list[str]:
    """Names of ONNX nodes with no Conv downstream (the graph is topologically sorted)."""
    consumers: dict[str, list[Any]] = defaultdict(list)
    for node in model.graph.node:
        for name in node.input:
            consumers[name].append(node)
    feeds_conv: dict[str, bool] = {}
    for node in reversed(model.graph.node):
        below = [c for out in node.output for c in consumers[out]]
        feeds_conv[node.name] = any(c.op_type == "Conv" or feeds_conv[c.name] for c in below)
    return [n.name for n in model.graph.node if not feeds_conv[n.name]]


def openvino_head_ops(model: Any) -> list[str]:
    """Friendly names of OpenVINO ops with no Convolution downstream (constants and results excluded)."""
    feeds_conv: dict[str, bool] = {}
    ops = model.get_ordered_ops()
    for op in reversed(ops):
        below = [t.get_node() for out in op.outputs() for t in out.get_target_inputs()]
        feeds_conv[op.get_friendly_name()] = any(
            b.get_type_name() == "Convolution" or feeds_conv.get(b.get_friendly_name(), False) for b in below)
    skip = {"Constant", "Parameter", "Result"}
    return [op.get_friendly_name() for op in ops
            if op.get_type_name() not in skip and not feeds_conv[op.get_friendly_name()]]


def openvino_decode_ops(model: Any) -> list[str]:
    """``openvino_head_ops`` less the output convolutions: the decode after them (their bias additions included)."""
    kinds = {op.get_friendly_name(): op.get_type_name() for op in model.get_ordered_ops()}
    return [name for name in openvino_head_ops(model) if kinds[name] != "Convolution"]
