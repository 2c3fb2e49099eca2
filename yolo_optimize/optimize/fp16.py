"""FP16 ONNX with FP32 inputs and outputs, so callers feed and read the same tensors as FP32."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from yolo_optimize.building.stage import REFERENCE, SOURCE, Stage, StageContext, StageOutput
from yolo_optimize.metadata import ArtifactMetadata
from yolo_optimize.optimize.onnx_io import save_onnx

if TYPE_CHECKING:
    import onnx

    from yolo_optimize.building.request import BuildRequest


@dataclass(frozen=True)
class OnnxFp16Config:
    precision: str = "fp16"
    keep_io_types: bool = True


class OnnxFp16(Stage):
    name = "onnx-fp16"
    inputs = (SOURCE, REFERENCE)
    tools = ("onnx", "onnxruntime", "onnx-ir")
    target = "onnx"

    @classmethod
    def planned(cls, request: BuildRequest, precision: str) -> OnnxFp16:
        return cls(OnnxFp16Config())

    def run(self, ctx: StageContext) -> StageOutput:
        import onnx
        import onnx_ir
        from onnxruntime.transformers.float16 import convert_float_to_float16

        source = named_nodes(onnx.load(str(ctx.entry(SOURCE))))
        kept = nms_box_nodes(source)
        model = without_round_trips(convert_float_to_float16(source, keep_io_types=self.config.keep_io_types,
                                                             node_block_list=kept), kept)
        graph = onnx_ir.from_proto(model)
        graph.graph.sort()  # the converter appends its output casts after their consumers
        model = onnx_ir.to_proto(graph)
        metadata = replace(ArtifactMetadata.of(ctx.manifest(SOURCE)), precision=self.config.precision)
        entry = ctx.manifest(SOURCE).entry
        assert entry
        save_onnx(model, ctx.out_dir / entry, metadata)
        return StageOutput(entry=entry, metadata=metadata.to_dict())


# What computes the boxes an NMS reads from the candidates it gathered: elementwise arithmetic and reshaping, which
# the backward walk from the NMS may cross; anything else (the gather of the candidates) ends it.
BOX_ARITHMETIC = {"Add", "Sub", "Mul", "Div", "Clip", "Max", "Min", "Cast", "Concat", "Unsqueeze", "Squeeze",
                  "Reshape", "Expand", "Identity"}


def named_nodes(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with a name on every node (the converter blocks nodes by name; an exporter may leave some unnamed)."""
    names = {node.name for node in model.graph.node}
    for index, node in enumerate(model.graph.node):
        if not node.name:
            node.name = f"{node.op_type}_{index}"
            while node.name in names:
                node.name += "_"
            names.add(node.name)
    return model


def nms_box_nodes(model: onnx.ModelProto) -> list[str]:
    """The nodes that compute every NonMaxSuppression's boxes from the candidates (``suppression._suppressed``): the
    per-class regions added there pass 150,000 at 640 (class 79 x 1,921 pixels), past FP16's largest number,
    so they must stay float32 or NMS suppresses across classes and keeps near-duplicates of one class."""
    producers = {output: node for node in model.graph.node for output in node.output}
    blocked: list[str] = []
    pending = [node.input[0] for node in model.graph.node if node.op_type == "NonMaxSuppression"]
    while pending:
        node = producers.get(pending.pop())
        if node is None or node.op_type not in BOX_ARITHMETIC or node.name in blocked:
            continue
        blocked.append(node.name)
        pending += list(node.input)
    return blocked


def without_round_trips(model: onnx.ModelProto, kept: list[str]) -> onnx.ModelProto:
    """``model`` without the casts to FP16 and straight back that the converter puts after every node it kept in
    float32 (``kept``), even between two such nodes: each round trip would round the float32 value to FP16 (a
    region of 153,760 to infinity)."""
    import onnx

    producers = {output: node for node in model.graph.node for output in node.output}
    rewired: dict[str, str] = {}
    for node in model.graph.node:
        first = producers.get(node.input[0]) if node.op_type == "Cast" else None
        if first is not None and first.op_type == "Cast" and _cast_to(node) == onnx.TensorProto.FLOAT \
                and _cast_to(first) == onnx.TensorProto.FLOAT16 and producers.get(first.input[0], first).name in kept:
            rewired[node.output[0]] = first.input[0]
    for node in model.graph.node:
        node.input[:] = [rewired.get(name, name) for name in node.input]
    used = {name for node in model.graph.node for name in node.input} | {o.name for o in model.graph.output}
    alive = [node for node in model.graph.node if node.op_type != "Cast" or any(o in used for o in node.output)]
    del model.graph.node[:]
    model.graph.node.extend(alive)
    return model


def _cast_to(node: onnx.NodeProto) -> int:
    return next(attribute.i for attribute in node.attribute if attribute.name == "to")
