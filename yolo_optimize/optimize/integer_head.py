"""The anchor head's output convolutions on ONNX Runtime's integer GEMM, their outputs kept in float.

INT8 passes keep the Detect head out of NNCF's quantizers (optimize/int8_onnx.py ``float_nodes``): a QLinearConv would
round its output, the raw box and class logits the decode reads, to 8 bits. In ONNX Runtime's
graph the head's three 1x1 convolutions then run in float on dequantized activations (10% of
yolov5n's INT8 forward time here), and the layout change after each (``[B, anchors * outputs, H, W]``
reshaped and permuted to ``[B, anchors, H, W, outputs]``) is a float transpose of every logit.

A 1x1 convolution is a matrix product over channels, and ONNX Runtime's ``com.microsoft``
``MatMulIntegerToFloat`` multiplies u8 activations by s8 weights and writes float (the scales
and the bias applied in its output stage), so nothing after the product is rounded:

- the input is quantized on the u8 grid the graph already has for it (the quantizer of the next
  layer reading the same tensor), else on one calibrated here like the fusion pass's;
- the weights are symmetric per output channel, on as many bits as the file's other weights
  (7 where the CPU has no VNNI: the u8 x s8 pairs may not saturate, optimize/int8_onnx.py);
- the product runs channels-last (a transpose of u8 bytes, a quarter of the float one). Its
  ``[B, H, W, anchors * outputs]`` result is what YOLOv5's head reads (it decodes channels last,
  families/modules.py ``decoded_channels_last``), so it replaces that head's transpose; for YOLOv7's
  it reaches ``[B, anchors, H, W, outputs]`` by moving whole rows of outputs, which replaces the
  head's own reshape and permute.

Applies to the YOLOv5/YOLOv7 anchor heads (the two patterns above); other heads are
left as they are. Measured in bench/levers.py (README "INT8 and BF16 levers").
"""

from __future__ import annotations

from typing import Any

import numpy as np

from yolo_optimize.optimize.qdq_graph import QdqGraph, observed_ranges, u8_grid
from yolo_optimize.runtime.runners.onnxruntime import INTEGER_CONVOLUTION_SUFFIX

ANCHOR_PERMUTE = [0, 1, 3, 4, 2]  # [B, anchors, outputs, H, W] -> [B, anchors, H, W, outputs]
CHANNELS_LAST = [0, 2, 3, 1]  # [B, C, H, W] -> [B, H, W, C]
MICROSOFT_DOMAIN = "com.microsoft"


def integer_head(model: Any, feeds: list[dict[str, np.ndarray]], threads: int, weight_bits: int) -> list[str]:
    """Rewrite ``model``'s anchor-head output convolutions in place (see the module docstring); their names."""
    graph = QdqGraph(model)
    heads = [(conv, found) for conv in model.graph.node if (found := _anchor_head(graph, conv)) is not None]
    names = [conv.name for conv, _ in heads]
    grids = {conv.name: _existing_u8_grid(graph, conv.input[0]) for conv, _ in heads}
    ungridded = [conv.input[0] for conv, _ in heads if grids[conv.name] is None]
    ranges = observed_ranges(model, ungridded, feeds, threads) if ungridded else {}
    for conv, layout in heads:
        grid = grids[conv.name] or u8_grid(graph, conv.name + "_input", *ranges[conv.input[0]])
        _as_integer_matmul(graph, conv, _quantized_input(graph, conv, grid), weight_bits)
        if len(layout) == 1:  # the head reads the convolution channels last: the product already is
            conv.output[0] = layout[0].output[0]
            graph.removed.add(layout[0].name)
        else:
            reshape, permute = layout
            _rows_moved(graph, conv, graph.array(reshape.input[1]), permute.output[0])
            graph.removed.update({reshape.name, permute.name})
    if names and not any(opset.domain == MICROSOFT_DOMAIN for opset in model.opset_import):
        from onnx import helper

        model.opset_import.append(helper.make_opsetid(MICROSOFT_DOMAIN, 1))
    graph.write_nodes()
    return names


def _anchor_head(graph: QdqGraph, conv: Any) -> tuple[Any, ...] | None:
    """What follows a float 1x1 convolution of an anchor head: (transpose,) where the head reads it channels last
    (YOLOv5's, ``modules.decoded_channels_last``), (reshape, permute) where it reshapes it to ``[B, anchors,
    outputs, H, W]`` and permutes it (YOLOv7's); else None."""
    if conv.op_type != "Conv" or conv.input[1] not in graph.initializers:
        return None
    weight = graph.initializers[conv.input[1]]
    plain = all(value == 1 for a in conv.attribute if a.name in ("strides", "dilations", "group")
                for value in (a.ints or [a.i])) and all(not any(a.ints) for a in conv.attribute if a.name == "pads")
    if len(weight.dims) != 4 or list(weight.dims[2:]) != [1, 1] or not plain:
        return None
    transpose = graph.only_consumer(conv.output[0], "Transpose")
    if transpose is not None and list(transpose.attribute[0].ints) == CHANNELS_LAST:
        rows = graph.only_consumer(transpose.output[0], "Reshape")  # to [B, H, W, anchors, outputs]
        if rows is None or rows.input[1] not in graph.initializers:
            return None
        shape = graph.array(rows.input[1])
        return (transpose,) if len(shape) == 5 and shape[3] * shape[4] == weight.dims[0] else None
    reshape = graph.only_consumer(conv.output[0], "Reshape")
    if reshape is None or reshape.input[1] not in graph.initializers:
        return None
    permute = graph.only_consumer(reshape.output[0], "Transpose")
    shape = graph.array(reshape.input[1])
    if (permute is None or list(permute.attribute[0].ints) != ANCHOR_PERMUTE or len(shape) != 5
            or shape[1] * shape[2] != weight.dims[0]):
        return None
    return reshape, permute


def _existing_u8_grid(graph: QdqGraph, tensor: str) -> tuple[str, str] | None:
    """(scale, zero point) of a quantizer already reading ``tensor`` onto a u8 grid."""
    for node in graph.consumers.get(tensor, []):
        if node.op_type == "QuantizeLinear" and len(node.input) == 3 and node.input[2] in graph.initializers \
                and graph.array(node.input[2]).dtype == np.uint8:
            return node.input[1], node.input[2]
    return None


def _quantized_input(graph: QdqGraph, conv: Any, grid: tuple[str, str]) -> tuple[str, str, str]:
    """(u8 tensor, scale, zero point): the convolution's input quantized on ``grid`` just before it (a quantizer on the
    same grid elsewhere computes the same bytes; ONNX Runtime merges such twins)."""
    from onnx import helper

    quantized = conv.name + "_input_u8"
    graph.before.setdefault(conv.name + INTEGER_CONVOLUTION_SUFFIX, []).append(
        helper.make_node("QuantizeLinear", [conv.input[0], *grid], [quantized], name=quantized + "_quantize"))
    return quantized, *grid


def _as_integer_matmul(graph: QdqGraph, conv: Any, grid: tuple[str, str, str], weight_bits: int) -> None:
    """The convolution node becomes ``MatMulIntegerToFloat`` on the channels-last u8 input and s8 weights."""
    from onnx import helper

    weight = graph.array(conv.input[1]).astype(np.float64)
    outputs, inputs = weight.shape[:2]
    levels = 2 ** (weight_bits - 1) - 1
    scale = np.maximum(np.abs(weight).reshape(outputs, -1).max(axis=1) / levels, np.finfo(np.float32).tiny)
    integers = np.clip(np.round(weight.reshape(outputs, inputs) / scale[:, None]), -levels, levels).astype(np.int8)
    name = conv.name + INTEGER_CONVOLUTION_SUFFIX
    channels_last = conv.input[0] + "_channels_last"
    graph.before.setdefault(name, []).append(
        helper.make_node("Transpose", [grid[0]], [channels_last], name=channels_last, perm=[0, 2, 3, 1]))
    bias = [conv.input[2]] if len(conv.input) > 2 and conv.input[2] else []
    conv.input[:] = [channels_last, graph.add_initializer(name + "_weight", np.ascontiguousarray(integers.T)), grid[1],
                     graph.add_initializer(name + "_weight_scale", scale.astype(np.float32)), grid[2],
                     graph.add_initializer(name + "_weight_zero_point", np.array(0, np.int8)), *bias]
    conv.output[0] = name + "_out"
    conv.name, conv.op_type, conv.domain = name, "MatMulIntegerToFloat", MICROSOFT_DOMAIN
    del conv.attribute[:]


def _rows_moved(graph: QdqGraph, node: Any, anchor_shape: np.ndarray, permuted: str) -> None:
    """``[B, H, W, anchors * outputs]`` -> ``[B, H, W, anchors, outputs]`` -> ``[B, anchors, H, W, outputs]``."""
    from onnx import helper

    batch, anchors, outputs, height, width = (int(v) for v in anchor_shape)
    shape = graph.add_initializer(node.name + "_rows", np.array([batch, height, width, anchors, outputs], np.int64))
    graph.after.setdefault(node.name, []).extend([
        helper.make_node("Reshape", [node.output[0], shape], [node.name + "_rows_out"], name=node.name + "_rows"),
        helper.make_node("Transpose", [node.name + "_rows_out"], [permuted], name=node.name + "_anchors_first",
                         perm=[0, 3, 1, 2, 4])])
