"""Complete NNCF's QDQ graph so ONNX Runtime's CPU provider runs its convolutions on int8 kernels.

NNCF quantizes the inputs of operations, which is what OpenVINO fuses. ONNX Runtime computes a
convolution in int8 (QLinearConv) only for the whole unit ``DequantizeLinear(x), DequantizeLinear(w),
DequantizeLinear(int32 bias) -> Conv -> QuantizeLinear``, input and output of one type
(``ConvNodeGroupSelector`` in onnxruntime/core/optimizer/qdq_transformer/selectors_actions/qdq_selectors.cc).
Left as NNCF writes it, every convolution runs in float on dequantized tensors, slower than FP32.
This pass completes the units around each convolution whose input and weights NNCF quantized and
whose output feeds a SiLU (``x * sigmoid(x)``, every YOLO detector's activation), without moving
NNCF's own quantizers:

- activations become unsigned (the same grid shifted by 128): ONNX Runtime's x86 kernels take u8
  activations with s8 weights, and a convolution's output must have its input's type;
- the float bias becomes int32 at scale ``x_scale * w_scale``, the sums QLinearConv accumulates;
- a Concat (and MaxPools or Splits before it) whose inputs NNCF quantized on one shared grid get that
  grid on their outputs, which changes no value;
- the convolution's output gets a Q/DQ pair whose range is the mean over calibration images of each
  image's min and max; where it feeds a SiLU its low end is cut at ``-silu_floor``: SiLU(x) for
  x < -6 lies within 0.015 of 0, while early layers reach -85, which would coarsen the grid 7x;
- the SiLU's sigmoid gets the fixed [0, 1] grid (step 1/255) where the SiLU's product is quantized
  anyway, so ONNX Runtime runs the SiLU as QLinearSigmoid and QLinearMul on int8 tensors instead of
  dequantizing around it;
- a uint8 image input (``optimize build --input uint8``) is read on its own exact grid: the graph's
  ``Cast -> Div(255) -> QuantizeLinear`` becomes nothing, and the first convolution dequantizes the
  image bytes at scale 1/255 (layout changes such as the stem's SpaceToDepth move to the uint8 bytes).

Every choice is measured in bench/archive/int8_recipes/onnx_int8_routes.py (README "Which INT8 ONNX recipe").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from yolo_optimize.optimize.qdq_graph import U8_LEVELS, QdqGraph, observed_ranges, u8_grid

SIGMOID_SCALE = np.array(1 / U8_LEVELS, np.float32)  # the fixed grid of a sigmoid's [0, 1] output


@dataclass(frozen=True)
class FusionOptions:
    silu_floor: float | None = 6.0  # None: the observed low end (see the module docstring)
    quantize_sigmoid: bool = True


@dataclass(frozen=True)
class _Site:
    conv: Any
    input_dq: Any  # the DequantizeLinear whose grid the convolution's input is on
    on_input_grid: tuple[Any, ...]  # MaxPools, Splits and a Concat between that grid and the convolution
    sigmoid: Any
    mul: Any


def fuse_for_onnxruntime(model: Any, feeds: list[dict[str, np.ndarray]], threads: int,
                         options: FusionOptions = FusionOptions()) -> int:
    """Rewrite ``model`` in place (see the module docstring); returns how many convolutions it made int8."""
    activations_to_u8(model)
    fold_uint8_input(model)
    dequantize_after_layout(model)
    graph = QdqGraph(model)
    sites = _sites(graph)
    if not sites:  # no SiLU convolution (ReLU networks such as ResNet): ONNX Runtime fuses those graphs as written
        return 0
    ranges = observed_ranges(model, [site.conv.output[0] for site in sites], feeds, threads)
    for site in sites:
        _quantize_bias(graph, site)
        low, high = ranges[site.conv.output[0]]
        if options.silu_floor is not None:
            low = max(low, -options.silu_floor)
        _quantize_output(graph, site.conv, u8_grid(graph, site.conv.name + "_output", low, high))
        for node in site.on_input_grid:
            if node.name not in graph.after:  # not yet done for another convolution reading it
                _quantize_output(graph, node, (site.input_dq.input[1], site.input_dq.input[2]))
        if options.quantize_sigmoid and _only_quantized(graph, site.mul.output[0]):
            grid = (graph.add_initializer("sigmoid_scale", SIGMOID_SCALE),
                    graph.add_initializer("sigmoid_zero_point", np.array(0, np.uint8)))
            _quantize_output(graph, site.sigmoid, grid)
    graph.write_nodes()
    return len(sites)


def activations_to_u8(model: Any) -> None:
    """Shift every s8 activation Q/DQ pair to u8 (zero point + 128: the same values), weights untouched."""
    from onnx import TensorProto

    graph = QdqGraph(model)
    shifted: set[str] = set()
    for quantize in [node for node in model.graph.node if node.op_type == "QuantizeLinear"]:
        if quantize.input[0] in graph.initializers or len(quantize.input) < 3:
            continue
        zero_point = graph.array(quantize.input[2])
        if zero_point.dtype != np.int8:
            continue
        zero_point_u8 = (zero_point.astype(np.int16) + 128).astype(np.uint8)
        unsigned = graph.add_initializer(quantize.input[2] + "_u8", zero_point_u8)
        for node in [quantize, *graph.consumers.get(quantize.output[0], [])]:
            node.input[2] = unsigned
        shifted.add(quantize.output[0])
    for info in model.graph.value_info:
        if info.name in shifted:
            info.type.tensor_type.elem_type = TensorProto.UINT8
    graph.write_nodes()


LAYOUT_OPS = ("SpaceToDepth",)  # between the scaling and the first quantizer: they move values, whatever their type


def fold_uint8_input(model: Any) -> bool:
    """A uint8 image input read by ``Transpose -> Cast -> Div(255) [-> SpaceToDepth] -> QuantizeLinear`` (NNCF's
    first quantizer, on its calibrated grid) becomes ``Transpose [-> SpaceToDepth]`` on the bytes, and the
    quantizer's DequantizeLinears read them at scale 1/255, zero point 0: the image's own grid, exact."""
    from onnx import TensorProto

    graph = QdqGraph(model)
    image = model.graph.input[0]
    transpose = graph.only_consumer(image.name, "Transpose")
    if image.type.tensor_type.elem_type != TensorProto.UINT8 or transpose is None:
        return False
    cast = graph.only_consumer(transpose.output[0], "Cast")
    divide = graph.only_consumer(cast.output[0], "Div") if cast is not None else None
    if divide is None or divide.input[1] not in graph.initializers or float(graph.array(divide.input[1])) != U8_LEVELS:
        return False
    layout, node = _layout_chain(graph, divide.output[0])
    if node is None or node.op_type != "QuantizeLinear":
        return False
    bytes_out = transpose.output[0]
    if layout:
        layout[0].input[0] = transpose.output[0]
        bytes_out = layout[-1].output[0]
    grid = (graph.add_initializer("image_scale", np.array(1 / U8_LEVELS, np.float32)),
            graph.add_initializer("image_zero_point", np.array(0, np.uint8)))
    for dequantize in graph.consumers.get(node.output[0], []):
        dequantize.input[:] = [bytes_out, *grid]
    graph.removed.update({cast.name, divide.name, node.name})
    del model.graph.value_info[:]  # the moved layout ops now carry uint8
    graph.write_nodes()
    return True


def dequantize_after_layout(model: Any) -> int:
    """``DequantizeLinear -> layout ops -> Conv`` becomes ``layout ops -> DequantizeLinear -> Conv``: NNCF quantizes
    ahead of the stem's SpaceToDepth, and ONNX Runtime fuses a convolution only when it reads a DequantizeLinear
    directly. Returns how many DequantizeLinears moved."""
    graph = QdqGraph(model)
    moved = 0
    for dequantize in [node for node in model.graph.node if node.op_type == "DequantizeLinear"]:
        layout, reader = _layout_chain(graph, dequantize.output[0])
        if layout and reader is not None and reader.op_type == "Conv":
            _move_above(graph, dequantize, layout)
            moved += 1
    if moved:
        del model.graph.value_info[:]  # the moved layout ops now carry integers
        graph.write_nodes()
    return moved


def _layout_chain(graph: QdqGraph, tensor: str) -> tuple[list[Any], Any]:
    """The layout ops reading ``tensor`` one after the other (each the only reader of the last), and the node after."""
    chain: list[Any] = []
    users = graph.consumers.get(tensor, [])
    while len(users) == 1 and users[0].op_type in LAYOUT_OPS:
        chain.append(users[0])
        users = graph.consumers.get(users[0].output[0], [])
    return chain, users[0] if len(users) == 1 else None


def _move_above(graph: QdqGraph, dequantize: Any, layout: list[Any]) -> None:
    """``DequantizeLinear -> layout ops`` becomes ``layout ops -> DequantizeLinear`` (they move values whatever their
    type), the DequantizeLinear then writing the tensor the last layout op wrote."""
    from onnx import helper

    if not layout:
        return
    source, last = dequantize.input[0], layout[-1].output[0]
    for node in layout:
        moved = helper.make_node(node.op_type, [source], [f"{node.output[0]}_u8"], name=f"{node.name}_u8")
        moved.attribute.extend(node.attribute)
        graph.before.setdefault(dequantize.name, []).append(moved)
        graph.removed.add(node.name)
        source = moved.output[0]
    dequantize.input[0] = source
    dequantize.output[0] = last


def _sites(graph: QdqGraph) -> list[_Site]:
    """Convolutions with NNCF-quantized input and weights whose output only feeds a SiLU (with or without a bias)."""
    sites = []
    for conv in graph.model.graph.node:
        if conv.op_type != "Conv" or not graph.made_by(conv.input[1], "DequantizeLinear"):
            continue
        silu = _silu(graph, conv.output[0])
        input_dq, on_input_grid = _input_grid(graph, conv.input[0])
        if silu and input_dq is not None:
            sites.append(_Site(conv, input_dq, on_input_grid, *silu))
    return sites


def _silu(graph: QdqGraph, tensor: str) -> tuple[Any, Any] | None:
    """(Sigmoid, Mul) when ``tensor`` feeds exactly ``tensor * sigmoid(tensor)``."""
    users = graph.consumers.get(tensor, [])
    sigmoid = next((node for node in users if node.op_type == "Sigmoid"), None)
    mul = next((node for node in users if node.op_type == "Mul"), None)
    if len(users) != 2 or sigmoid is None or mul is None or set(mul.input) != {tensor, sigmoid.output[0]}:
        return None
    return sigmoid, mul


def _input_grid(graph: QdqGraph, tensor: str) -> tuple[Any, tuple[Any, ...]]:
    """The DequantizeLinear whose grid ``tensor`` is on, and the nodes on the way that keep values on it.

    Those are MaxPools and Splits (their outputs are some of their inputs) and a Concat whose inputs are all on one
    grid; putting their outputs on that grid changes no value. (None, ()) where there is no single grid.
    """
    concat = graph.made_by(tensor, "Concat")
    sources = [_grid_source(graph, name) for name in (concat.input if concat is not None else [tensor])]
    dqs = [dq for dq, _ in sources]
    if None in dqs or len({(graph.array(dq.input[1]).tobytes(), graph.array(dq.input[2]).tobytes())
                           for dq in dqs}) != 1:
        return None, ()
    keeping = tuple(node for _, nodes in sources for node in nodes) + ((concat,) if concat is not None else ())
    return dqs[0], keeping


GRID_KEEPING = ("MaxPool", "Split")  # each output holds some of its input's values, so it can share its grid


def _grid_source(graph: QdqGraph, tensor: str) -> tuple[Any, list[Any]]:
    """The DequantizeLinear at the start of a chain of MaxPools and Splits (YOLOv8's and YOLO11's C2f and C3k2 split
    a convolution's output in two) ending in ``tensor``, and the nodes of that chain."""
    chain = []
    node = graph.producer.get(tensor)
    while node is not None and node.op_type in GRID_KEEPING:
        chain.append(node)
        node = graph.producer.get(node.input[0])
    return (node if node is not None and node.op_type == "DequantizeLinear" else None), chain


def _only_quantized(graph: QdqGraph, tensor: str) -> bool:
    users = graph.consumers.get(tensor, [])
    return bool(users) and all(node.op_type == "QuantizeLinear" for node in users)


def _quantize_output(graph: QdqGraph, node: Any, grid: tuple[str, str]) -> None:
    """Insert Q -> DQ on the grid after each output of ``node``; its consumers read the same tensor names as before."""
    from onnx import helper

    for index, tensor in enumerate(list(node.output)):
        node.output[index] = tensor + "_float"
        quantized = tensor + "_u8"
        graph.after.setdefault(node.name, []).extend([
            helper.make_node("QuantizeLinear", [node.output[index], *grid], [quantized], name=tensor + "_quantize"),
            helper.make_node("DequantizeLinear", [quantized, *grid], [tensor], name=tensor + "_dequantize")])


def _quantize_bias(graph: QdqGraph, site: _Site) -> None:
    """The float bias as int32 at the scale QLinearConv accumulates in. A convolution without one stays without: the
    exporter drops a bias of zeros, which is what folding an untrained BatchNorm gives (random-weight models)."""
    from onnx import helper

    conv = site.conv
    if len(conv.input) < 3 or not conv.input[2]:
        return
    weight_scale = graph.array(graph.producer[conv.input[1]].input[1]).astype(np.float64)
    scale = (float(graph.array(site.input_dq.input[1])) * weight_scale).astype(np.float32)
    bias = np.round(graph.array(conv.input[2]).astype(np.float64) / scale)
    integers = np.clip(bias, np.iinfo(np.int32).min, np.iinfo(np.int32).max).astype(np.int32)
    inputs = [graph.add_initializer(conv.name + "_bias_int32", integers),
              graph.add_initializer(conv.name + "_bias_scale", scale),
              graph.add_initializer(conv.name + "_bias_zero_point", np.zeros_like(integers))]
    conv.input[2] = conv.name + "_bias"
    graph.before.setdefault(conv.name, []).append(
        helper.make_node("DequantizeLinear", inputs, [conv.input[2]], name=conv.input[2] + "_dequantize", axis=0))
