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
        try:
            prepared = prepare_pt2e(graph, _without(quantizer, get_module_name_filter(kept)) if kept else quantizer)
        except KeyError as err:  # torchao 0.18's prepare, on a shared spec whose node lost its annotation
            raise RuntimeError(f"PT2E cannot quantize this graph with {kept} kept in float: the quantizer shares a "
                               f"quantization with {err.args[0]}, a node kept in float (seen on RT-DETR)") from None
        for image in images:
            prepared(torch.from_numpy(image))
        converted = convert_pt2e(prepared)
        return torch.export.export(converted, (example,)), _int8_convolutions(converted)


def _without(quantizer: Any, inside: Any) -> Any:
    """``quantizer`` with every annotation of the nodes ``inside`` selects removed after it has annotated the graph
    (module docstring: its filter does not hold for every operator)."""
    from torchao.quantization.pt2e.quantizer import Quantizer

    class KeptInFloat(Quantizer):
        def transform_for_annotation(self, model: Any) -> Any:
            return quantizer.transform_for_annotation(model)

        def annotate(self, model: Any) -> Any:
            quantizer.annotate(model)
            for node in model.graph.nodes:
                if inside(node):
                    node.meta.pop(ANNOTATION, None)
            return model

        def validate(self, model: Any) -> None:
            quantizer.validate(model)

    return KeptInFloat()


def _int8_convolutions(converted: Any) -> list[int]:
    """[convolutions whose weight is dequantized from int8, all convolutions] of a converted PT2E graph."""
    import torch

    convolutions = [node for node in converted.graph.nodes if node.target == torch.ops.aten.conv2d.default]
    integer = sum(1 for node in convolutions if "dequantize" in str(getattr(node.args[1], "target", "")))
    return [integer, len(convolutions)]
