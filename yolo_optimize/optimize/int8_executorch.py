"""INT8 ExecuTorch programs: PyTorch's post-training quantization (PT2E) with ExecuTorch's own XNNPACK quantizer,
lowered to XNNPACK like every ``executorch`` program, gated like every INT8 artifact.

The recipe is ExecuTorch's for XNNPACK: ``XNNPACKQuantizer`` with its symmetric configuration (s8 weights per
output channel, s8 activations per tensor from histogram ranges), calibrated on every ``--calib-images`` image,
converted, exported again and lowered, so that XNNPACK runs the quantized convolutions in int8. The family's float
module (the Detect head) stays in float32, as in every INT8 recipe here.

The head is taken out of the annotation after the quantizer has annotated the graph, not through its filter: the
quantizer's concatenation annotator ignores the filter (executorch 1.5.1), so the head's last ``cat``, which joins
boxes in pixels and scores in 0..1, was quantized on one int8 scale of about 1.3. That cost yolov5n 17.8 points of
mAP50-95 (gate refused) with the head "excluded"; with the head's annotations removed, the gate passes.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from yolo_optimize.building.loading import warmed_up
from yolo_optimize.building.stage import REFERENCE, SOURCE, Stage, StageContext, StageOutput
from yolo_optimize.export.executorch import write_program
from yolo_optimize.families import family_named
from yolo_optimize.metadata import FLOAT_INPUT
from yolo_optimize.optimize.calibration import Int8Config, gated_int8, int8_metadata

if TYPE_CHECKING:
    from yolo_optimize.building.request import BuildRequest

ROUTE = "PT2E, XNNPACKQuantizer symmetric per-channel (executorch)"
ANNOTATION = "quantization_annotation"  # where PT2E's quantizers write a node's annotation (node.meta)


@dataclass(frozen=True)
class ExecuTorchInt8Config(Int8Config):
    input_form: str = FLOAT_INPUT
    precision: str = "int8"


class ExecuTorchInt8(Stage):
    """Quantizes the family's export module (PT2E), lowers it and gates it against its FP32 program (SOURCE)."""

    name = "executorch-int8"
    inputs = (SOURCE, REFERENCE)
    tools = ("torch", "torchao", "executorch")
    target = "executorch"
    config: ExecuTorchInt8Config

    @classmethod
    def planned(cls, request: BuildRequest, precision: str) -> ExecuTorchInt8:
        return cls(ExecuTorchInt8Config(request.imgsz, request.calib_images, request.int8_gate, request.input_form))

    def run(self, ctx: StageContext) -> StageOutput:
        parent = ctx.manifest(SOURCE)
        family = family_named(ctx.source.family)
        module, example = warmed_up(ctx.source, self.config.input_form, self.config.imgsz)
        kept = family.float_module(module)
        metadata = int8_metadata(parent, kept, ROUTE)
        written: dict[str, Any] = {}

        def write(images: list[np.ndarray]) -> None:
            program, convolutions = quantized(module, example, kept, images)
            written.update(write_program(program, ctx.out_dir / str(parent.entry), metadata),
                           int8_convolutions=convolutions)

        record = gated_int8(ctx, self.name, self.config, family, metadata, ROUTE, write)
        return StageOutput(entry=parent.entry, metadata=metadata.to_dict(),
                           info={**written, "kept_in_float": metadata.kept_in_float,
                                 "gate": record.result(self.config.calib_images)})


def quantized(module: Any, example: Any, kept: str | None, images: list[np.ndarray]) -> tuple[Any, list[int]]:
    """The quantized program (annotated with ``kept`` left in float, calibrated on ``images``, converted, exported)
    and how many of its convolutions take int8 weights, of how many."""
    import torch
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_module_name_filter,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    with torch.no_grad():
        graph = torch.export.export(module, (example,)).module()
        prepared = prepare_pt2e(graph, _without(quantizer, get_module_name_filter(kept) if kept else _nothing))
        for image in images:
            prepared(torch.from_numpy(image))
        converted = _weights_folded(convert_pt2e(prepared))
        return torch.export.export(converted, (example,)), _int8_convolutions(converted)


def _without(quantizer: Any, inside: Any) -> Any:
    """``quantizer`` with every annotation of the nodes ``inside`` selects removed after it has annotated the graph
    (module docstring: its filter does not hold for every operator), and with what XNNPACK or PT2E cannot run as the
    quantizer leaves it mended (the three functions below)."""
    from torchao.quantization.pt2e.quantizer import Quantizer

    class KeptInFloat(Quantizer):
        def transform_for_annotation(self, model: Any) -> Any:
            return _integer_scalars_kept(model, quantizer.transform_for_annotation)

        def annotate(self, model: Any) -> Any:
            quantizer.annotate(model)
            for node in model.graph.nodes:
                if inside(node) or _computed_weight(node):
                    node.meta.pop(ANNOTATION, None)
            _unshared_with_float(model)
            return model

        def validate(self, model: Any) -> None:
            quantizer.validate(model)

    return KeptInFloat()


def _nothing(node: Any) -> bool:
    """The selection of a family that keeps nothing in float (a classifier)."""
    return False


def _integer_scalars_kept(model: Any, transform: Any) -> Any:
    """``model`` after the quantizer's ``transform``, with the scalars of its integer arithmetic given back: XNNPACK's
    quantizer makes every scalar of an add or a multiplication a float32 tensor, which turned RT-DETR's class index
    (``index - index // 80 * 80``) into a float that its ``cat`` refused ("Tensor dtype mismatch")."""
    import torch

    integer = {node: node.args for node in model.graph.nodes
               if isinstance(node.meta.get("val"), torch.Tensor) and not node.meta["val"].is_floating_point()}
    before = set(model.graph.nodes)
    model = transform(model)
    for node, args in integer.items():
        node.args = args
    for node in [node for node in model.graph.nodes if node not in before and not node.users]:
        model.graph.erase_node(node)
    model.recompile()
    return model


def _computed_weight(node: Any) -> bool:
    """Whether ``node`` is a linear layer or convolution whose weight the graph computes rather than holds: XNNPACK
    takes int8 weights only as constants, so quantized they would be left to portable kernels, which have no
    dequantize operator. ``nn.MultiheadAttention`` splits its packed input projection into three (RT-DETR's encoder)."""
    import torch

    return (node.target in (torch.ops.aten.linear.default, torch.ops.aten.conv2d.default) and len(node.args) > 1
            and getattr(node.args[1], "op", "get_attr") != "get_attr")


def _unshared_with_float(model: Any) -> None:
    """Drops the annotations that share a quantization with a tensor left in float (their nodes stay in float too),
    until none is left: PT2E's prepare looks the shared one up and fails on its absence (``KeyError``, torchao 0.18).
    On RT-DETR the views after a node left in float share its output's: the decoder's ``cat``, and the attention
    projections ``_computed_weight`` leaves."""
    from torchao.quantization.pt2e.quantizer import SharedQuantizationSpec

    while True:
        annotated = {node: node.meta[ANNOTATION] for node in model.graph.nodes if ANNOTATION in node.meta}
        quantized = {(arg, node) for node, annotation in annotated.items() for arg in annotation.input_qspec_map}
        quantized |= {node for node, annotation in annotated.items() if annotation.output_qspec is not None}
        dangling = [node for node, annotation in annotated.items()
                    if any(isinstance(spec, SharedQuantizationSpec) and spec.edge_or_node not in quantized
                           for spec in (*annotation.input_qspec_map.values(), annotation.output_qspec))]
        if not dangling:
            return
        for node in dangling:
            del node.meta[ANNOTATION]


def _weights_folded(converted: Any) -> Any:
    """``converted`` with every weight's quantization folded into an int8 constant. ``convert_pt2e`` leaves a weight
    float, quantized at run time, when it takes it for a producer of a tensor written in place: torchao 0.18's folder
    marks everything upstream of a ``copy_`` mutable, there the six convolutions before YOLOv7-tiny's head, which
    writes its boxes into its output (``y[..., 0:2] = ...``). XNNPACK takes only a constant int8 weight, so those
    were left to portable kernels that have no quantize operator."""
    import torch
    from torchao.quantization.pt2e.constant_fold import replace_node_with_constant

    def value(arg: Any) -> Any:
        is_node = isinstance(arg, torch.fx.Node)
        return functools.reduce(getattr, str(arg.target).split("."), converted) if is_node else arg

    for node in list(converted.graph.nodes):
        if node.target == torch.ops.quantized_decomposed.quantize_per_channel.default and all(
                isinstance(arg, torch.fx.Node) and arg.op == "get_attr" for arg in node.args[:3]):
            replace_node_with_constant(converted, node, node.target(*map(value, node.args)).detach())
    converted.recompile()
    return converted


def _int8_convolutions(converted: Any) -> list[int]:
    """[convolutions whose weight is dequantized from int8, all convolutions] of a converted PT2E graph."""
    import torch

    convolutions = [node for node in converted.graph.nodes if node.target == torch.ops.aten.conv2d.default]
    integer = sum(1 for node in convolutions if "dequantize" in str(getattr(node.args[1], "target", "")))
    return [integer, len(convolutions)]
