"""A detection head's split decode rewritten as one elementwise chain, for the OpenVINO IR.

YOLOv5's and YOLOv7's heads decode each level as ``Sigmoid -> Split`` along the outputs' axis (x y, w h, the scores),
arithmetic with constants on each part (``(xy * 2 + grid) * stride``, ``(wh * 2) ** 2 * anchors``) and a ``Concat``
of the parts on the same axis. Each part is a quadratic of its sigmoid ``s``, so the whole decode is
``s * (A * s + B) + C``, with A, B and C the parts' coefficients side by side. OpenVINO runs the split and the
concatenation as two copies of every output value, but fuses an elementwise chain into one kernel: on yolov5n at
640 and batch 8 the chain took its INT8 IR from 297 to 283 ms and its FP32 IR from 542 to 494 ms (AVX2,
bench/archive/export_graph/README.md "The chain at batch 8, on top of channels last"). ONNX Runtime runs each operation
of the chain as its own pass over every value, which cost onnx-int8 5-10% at batch 8, so the rewrite is OpenVINO's alone
(export/openvino.py).

The coefficients are read off numerically, not from the operations' names: each part's arithmetic is evaluated at
four values of ``s`` and a part that is not a quadratic of it (found at the fourth value) leaves the head as it was.
C, which holds the grid's offsets (``[1, H, W, 1, outputs]`` in yolov5's channels-last form), is stored as a sum of
one constant per axis when it is one, so the file does not grow by an output-sized constant."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

ELEMENTWISE = {"Mul", "Add", "Sub", "Div", "Pow"}
PROBES = (0.0, 0.5, 1.0, 0.25)  # s at which each part is evaluated: three fix the quadratic, the fourth checks it
LARGEST_FULL_CONSTANT = 1 << 16  # values a coefficient may keep when it is not a sum of one constant per axis


@dataclass(frozen=True)
class SplitDecode:
    """One head level's decode: the split of ``sigmoid``'s output along ``axis`` into parts of ``widths``, each
    part's arithmetic (the nodes from the split's output to the concatenation's input, in order) and the ``concat``
    that puts them back."""

    sigmoid_output: str
    split: Any
    rank: int
    axis: int
    widths: tuple[int, ...]
    branches: tuple[tuple[Any, ...], ...]
    concat: Any


def chain_decodes(model: Any) -> tuple[Any, int]:
    """``model`` (an ``onnx.ModelProto``, rewritten in place) with every split decode made one chain, and how many
    were rewritten."""
    constants = {tensor.name: tensor for tensor in model.graph.initializer}
    rewritten = 0
    for decode in split_decodes(model, constants):
        coefficients = decode_coefficients(decode, constants)
        chain = as_chain(*coefficients, decode.axis) if coefficients is not None else None
        if chain is None:
            continue
        replace_with_chain(model, decode, chain)
        rewritten += 1
    if rewritten:
        read = {name for node in model.graph.node for name in node.input}
        unread = [tensor for tensor in model.graph.initializer if tensor.name not in read]
        for tensor in unread:  # the parts' own constants
            model.graph.initializer.remove(tensor)
    return model, rewritten


def split_decodes(model: Any, constants: dict[str, Any]) -> list[SplitDecode]:
    """Every ``Sigmoid -> Split -> elementwise with constants -> Concat`` on the split's axis in ``model``."""
    graph = model.graph
    producer = {output: node for node in graph.node for output in node.output}
    readers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    rank = _ranks(model)
    found = []
    for concat in (node for node in graph.node if node.op_type == "Concat"):
        branches: list[tuple[Any, ...]] = []
        split: str | None = None  # the split's first output
        for value in concat.input:
            branch: list[Any] = []
            while (node := producer.get(value)) is not None and node.op_type in ELEMENTWISE \
                    and _constant_operand(node, constants) is not None and len(readers[node.output[0]]) == 1:
                branch.insert(0, node)
                value = next(name for name in node.input if name not in constants)
            source = producer.get(value)
            if source is None or source.op_type != "Split" or split not in (None, source.output[0]):
                break
            split = source.output[0]
            if list(source.output).index(value) != len(branches) or len(readers[value]) != 1:
                break
            branches.append(tuple(branch))
        else:
            decode = _as_decode(concat, producer.get(split or ""), branches, producer, constants, rank)
            if decode is not None:
                found.append(decode)
    return found


def _as_decode(concat: Any, split: Any, branches: list[tuple[Any, ...]], producer: dict[str, Any],
               constants: dict[str, Any], rank: dict[str, int]) -> SplitDecode | None:
    """The decode ``concat`` closes, when its split reads a sigmoid along the same axis with constant widths."""
    if split is None or len(branches) != len(split.output) or split.input[0] not in rank:
        return None
    source = producer.get(split.input[0])
    if source is None or source.op_type != "Sigmoid" or len(split.input) < 2 or split.input[1] not in constants:
        return None
    dims = rank[split.input[0]]
    axis, concat_axis = (_attribute(node, "axis", 0) % dims for node in (split, concat))
    if axis != concat_axis:
        return None
    widths = tuple(int(w) for w in _array(constants[split.input[1]]))
    return SplitDecode(split.input[0], split, dims, axis, widths, tuple(branches), concat)


def decode_coefficients(decode: SplitDecode, constants: dict[str, Any]) -> tuple[np.ndarray, np.ndarray,
                                                                                 np.ndarray] | None:
    """A, B and C of ``s * (A * s + B) + C`` for the whole decode (the parts' side by side on its axis, broadcast
    to a common shape), or None where a part is not a quadratic of ``s``."""
    parts = []
    for branch, width in zip(decode.branches, decode.widths):
        shape = [1] * decode.rank
        shape[decode.axis] = width
        values = [_evaluated(branch, np.full(shape, probe), constants) for probe in PROBES]
        values = list(np.broadcast_arrays(*values))
        f0, f_half, f1, f_quarter = values
        a = 2 * f1 - 4 * f_half + 2 * f0
        b = f1 - f0 - a
        if not np.allclose(a / 16 + b / 4 + f0, f_quarter, rtol=1e-6, atol=1e-6 * (1 + np.abs(f_quarter).max())):
            return None
        parts.append(tuple(_smallest(x, decode.axis) for x in (a, b, f0)))
    found = []
    for k in range(3):
        common = _common_shape([part[k].shape for part in parts], decode.axis)
        found.append(np.concatenate([np.broadcast_to(part[k], _with_width(common, width, decode.axis))
                                     for part, width in zip(parts, decode.widths)], decode.axis).astype(np.float32))
    return found[0], found[1], found[2]


@dataclass(frozen=True)
class Chain:
    """``(s + D) * (A * s + B) + sum(tails)``: the decode's ``s * (A * s + B) + C`` with C's first term, divided by
    B, moved next to ``s`` (where A is zero, as on x and y), so that no two of C's terms meet in one addition that
    OpenVINO would fold into a constant the size of the output (2.8 of yolov5n's 7.5 MB at 640)."""

    a: np.ndarray
    b: np.ndarray
    d: np.ndarray | None
    tails: tuple[np.ndarray, ...]


def as_chain(a: np.ndarray, b: np.ndarray, c: np.ndarray, outputs_axis: int) -> Chain | None:
    """The chain of the coefficients, or None where A, B or an undivided C would be large constants."""
    terms = additive_terms(c, outputs_axis)
    if terms is None or max(a.size, b.size) > LARGEST_FULL_CONSTANT:
        return None
    terms = [term for term in terms if np.any(term)]
    if len(terms) > 1:
        d = np.divide(terms[0], b, out=np.zeros(np.broadcast_shapes(terms[0].shape, b.shape), np.float32),
                      where=b != 0)
        if np.allclose(d * b, terms[0], rtol=1e-6, atol=0) and not np.any(a * d):
            return Chain(a, b, d, tuple(terms[1:]))
    return Chain(a, b, None, tuple(terms))


def replace_with_chain(model: Any, decode: SplitDecode, chain: Chain) -> None:
    """The split, the parts' arithmetic and the concatenation replaced by ``chain``, whose last node writes the
    concatenation's output."""
    from onnx import helper, numpy_helper

    stem = decode.concat.name or decode.concat.output[0]
    s, out = decode.sigmoid_output, decode.concat.output[0]
    named = {"a": chain.a, "b": chain.b, **({"d": chain.d} if chain.d is not None else {}),
             **{f"c{i}": term for i, term in enumerate(chain.tails)}}
    model.graph.initializer.extend(numpy_helper.from_array(value.astype(np.float32), f"{stem}/chain_{key}")
                                   for key, value in named.items())
    nodes = []

    def step(op: str, left: str, right: str, output: str) -> str:
        nodes.append(helper.make_node(op, [left, right], [f"{stem}/chain_{output}"], name=f"{stem}/chain_{output}"))
        return f"{stem}/chain_{output}"

    offset = step("Add", s, f"{stem}/chain_d", "s_plus_d") if chain.d is not None else s
    value = step("Mul", offset, step("Add", step("Mul", s, f"{stem}/chain_a", "as"), f"{stem}/chain_b", "as_plus_b"),
                 "product")
    for i in range(len(chain.tails)):
        value = step("Add", value, f"{stem}/chain_c{i}", f"plus_c{i}")
    nodes[-1].output[0] = out
    removed = {node.output[0] for node in (decode.split, decode.concat, *(n for part in decode.branches for n in part))}
    position = next(i for i, node in enumerate(model.graph.node) if node.output[0] == decode.split.output[0])
    kept = [node for node in model.graph.node if node.output[0] not in removed]
    del model.graph.node[:]
    model.graph.node.extend(kept[:position] + nodes + kept[position:])


def additive_terms(c: np.ndarray, outputs_axis: int) -> list[np.ndarray] | None:
    """``c`` as a sum of constants each varying along one axis besides the outputs' (the grid's rows and columns),
    when it is one; else ``c`` itself if small enough to keep, None if not."""
    free = [axis for axis in range(c.ndim) if axis != outputs_axis and c.shape[axis] > 1]
    if len(free) <= 1:
        return [c]
    base = c.mean(axis=tuple(free), keepdims=True)
    terms = [c.mean(axis=tuple(a for a in free if a != axis), keepdims=True) - base for axis in free]
    if np.allclose(sum(terms) + base, c, rtol=1e-6, atol=1e-6 * (1 + np.abs(c).max())):
        terms[0] = terms[0] + base
        return [term.astype(np.float32) for term in terms]
    return [c] if c.size <= LARGEST_FULL_CONSTANT else None


def _evaluated(branch: tuple[Any, ...], value: np.ndarray, constants: dict[str, Any]) -> np.ndarray:
    """A part's arithmetic applied to ``value`` in float64, each node's constant broadcast as ONNX broadcasts."""
    for node in branch:
        constant = _array(constants[next(name for name in node.input if name in constants)]).astype(np.float64)
        first = node.input[0] not in constants
        left, right = (value, constant) if first else (constant, value)
        value = {"Mul": np.multiply, "Add": np.add, "Sub": np.subtract, "Div": np.divide,
                 "Pow": np.power}[node.op_type](left, right)
    return value


def _constant_operand(node: Any, constants: dict[str, Any]) -> str | None:
    """The name of a binary node's one constant input, None unless exactly one of its two inputs is constant."""
    found = [name for name in node.input if name in constants]
    return found[0] if len(node.input) == 2 and len(found) == 1 else None


def _smallest(x: np.ndarray, outputs_axis: int) -> np.ndarray:
    """``x`` kept whole only along the axes it varies on (besides the outputs' axis, kept at the part's width)."""
    for axis in range(x.ndim):
        first = x.take([0], axis)
        if axis != outputs_axis and np.allclose(x, first, rtol=1e-9, atol=1e-9 * (1 + np.abs(x).max())):
            x = first
    return x


def _common_shape(shapes: list[tuple[int, ...]], axis: int) -> tuple[int, ...]:
    """The shape every part's coefficient broadcasts to, off the split's axis (where each keeps its width)."""
    return tuple(1 if i == axis else max(shape[i] for shape in shapes) for i in range(len(shapes[0])))


def _with_width(shape: tuple[int, ...], width: int, axis: int) -> tuple[int, ...]:
    return (*shape[:axis], width, *shape[axis + 1:])


def _array(tensor: Any) -> np.ndarray:
    from onnx import numpy_helper

    return numpy_helper.to_array(tensor)


def _attribute(node: Any, name: str, default: int) -> int:
    return next((int(attribute.i) for attribute in node.attribute if attribute.name == name), default)


def _ranks(model: Any) -> dict[str, int]:
    """Each value's rank, by ONNX's shape inference."""
    import onnx

    inferred = onnx.shape_inference.infer_shapes(model)
    values = [*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output]
    return {value.name: len(value.type.tensor_type.shape.dim) for value in values
            if value.type.tensor_type.HasField("shape")}
