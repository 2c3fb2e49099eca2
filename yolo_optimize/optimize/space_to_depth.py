"""A strided stem convolution on few channels rewritten as space-to-depth and a stride-1 convolution: the same sums.

YOLOv5's first layer is a 6x6 stride-2 convolution on the 3-channel image. Integer convolution
kernels want input channels in groups of four (ONNX Runtime's symmetric int8 convolution,
MlasConvSym, needs C % 4 == 0); with 3 channels ONNX Runtime falls back to a generic im2col
GEMM, and that one layer took 13.7% of yolov5n's INT8 pass for 8% of its operations (issue 21).
With s the stride, a k x k convolution with k and its paddings multiples of s equals
``SpaceToDepth(s)`` (s*s*C channels at 1/s the size) followed by a (k/s) x (k/s) stride-1
convolution whose weights are the original ones rearranged:
W'[o, (rh*s + rw)*C + c, a, b] = W[o, c, s*a + rh, s*b + rw], paddings divided by s. Every
product is the same; only the order of the additions changes (parity checks it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

MIN_ALIGNED_CHANNELS = 4  # integer kernels take input channels in groups of this many


def rewrite_strided_stems(model: Any) -> list[str]:
    """Rewrite, in place, every convolution of a float ONNX graph that qualifies (``_block_size``); the rewritten
    convolutions' names."""
    from onnx import helper, numpy_helper

    graph = model.graph
    initializers = {tensor.name: tensor for tensor in graph.initializer}
    shapes = _input_shapes(model)
    rewritten: list[str] = []
    nodes = []
    for node in graph.node:
        block = _block_size(node, initializers, shapes)
        if block:
            weight = initializers[node.input[1]]
            weight.CopyFrom(numpy_helper.from_array(stride_one_weights(numpy_helper.to_array(weight), block),
                                                    weight.name))
            _divide_attributes(node, block)
            moved = f"{node.input[0]}_space_to_depth{block}"
            nodes.append(helper.make_node("SpaceToDepth", [node.input[0]], [moved], name=f"{node.name}_space_to_depth",
                                          blocksize=block))
            node.input[0] = moved
            rewritten.append(node.name)
        nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.value_info[:]  # shapes inferred before the rewrite no longer hold
    return rewritten


def stride_one_weights(weights: np.ndarray, block: int) -> np.ndarray:
    """[O, C, k, k] stride-``block`` weights -> [O, block*block*C, k/block, k/block] for the space-to-depth input."""
    out, channels, height, width = weights.shape
    moved = np.zeros((out, block * block * channels, height // block, width // block), weights.dtype)
    for row in range(block):
        for column in range(block):
            first = (row * block + column) * channels
            moved[:, first:first + channels] = weights[:, :, row::block, column::block]
    return moved


def _block_size(node: Any, initializers: dict[str, Any], shapes: dict[str, list[int]]) -> int:
    """The stride of a convolution this rewrite applies to, else 0: a plain (group 1, no dilation) square-strided
    convolution with constant weights on a known-size input of too few channels for integer kernels, whose kernel,
    paddings and input size are multiples of the stride, and whose input then has a multiple of four channels."""
    from onnx import helper

    if node.op_type != "Conv" or len(node.input) < 2 or node.input[1] not in initializers:
        return 0
    attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    strides = attributes.get("strides", [1, 1])
    kernel = list(initializers[node.input[1]].dims[2:])
    shape = shapes.get(node.input[0], [])
    block = strides[0]
    channels = shape[1] if len(shape) == 4 else 0
    sizes = [d for d in shape[2:] if isinstance(d, int) and d > 0]
    return block if (block > 1 and len(set(strides)) == 1 and attributes.get("group", 1) == 1
                     and set(attributes.get("dilations", [1])) == {1}
                     and attributes.get("auto_pad", b"NOTSET") == b"NOTSET" and 0 < channels % MIN_ALIGNED_CHANNELS
                     and (channels * block * block) % MIN_ALIGNED_CHANNELS == 0 and len(sizes) == 2
                     and all(v % block == 0 for v in [*kernel, *attributes.get("pads", [0]), *sizes])) else 0


def _divide_attributes(node: Any, block: int) -> None:
    for attribute in node.attribute:
        if attribute.name == "strides":
            attribute.ints[:] = [1] * len(attribute.ints)
        elif attribute.name in ("pads", "kernel_shape"):
            attribute.ints[:] = [value // block for value in attribute.ints]


def _input_shapes(model: Any) -> dict[str, list[int]]:
    """Static shapes of every tensor ONNX's shape inference can tell (symbolic dimensions as -1)."""
    import onnx

    inferred = onnx.shape_inference.infer_shapes(model)
    infos = [*inferred.graph.value_info, *inferred.graph.input]
    return {info.name: [d.dim_value if d.HasField("dim_value") else -1 for d in info.type.tensor_type.shape.dim]
            for info in infos}
