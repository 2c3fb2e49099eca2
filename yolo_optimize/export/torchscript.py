"""TorchScript export (``torch.jit.trace``), metadata in ``_extra_files['config.txt']``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from yolo_optimize.building.loading import example_input, export_module
from yolo_optimize.building.stage import MODEL, REFERENCE, Stage, StageContext, StageOutput
from yolo_optimize.formats import format_named
from yolo_optimize.metadata import FLOAT_INPUT, ArtifactMetadata, artifact_metadata

if TYPE_CHECKING:
    from yolo_optimize.building.request import BuildRequest

METADATA_FILE = "config.txt"


@dataclass(frozen=True)
class TorchScriptConfig:
    imgsz: int
    precision: str
    device: str
    input_form: str = FLOAT_INPUT


class TorchScriptExport(Stage):
    name = "torchscript"
    inputs = (MODEL, REFERENCE)
    tools = ("torch",)
    target = "torchscript"

    @classmethod
    def planned(cls, request: BuildRequest, precision: str) -> TorchScriptExport:
        return cls(TorchScriptConfig(request.imgsz, precision, request.device, request.input_form))

    def unavailable_reason(self, device: str) -> str | None:
        if self.config.precision == "fp16" and device != "cuda":
            return ("FP16 TorchScript needs a CUDA device (PyTorch's CPU half-precision convolutions are slower "
                    "than FP32)")
        return None

    def run(self, ctx: StageContext) -> StageOutput:
        import torch

        half = self.config.precision == "fp16"
        model = export_module(ctx.source, self.config.input_form).to(ctx.device)
        example = example_input(self.config.input_form, 1, self.config.imgsz, ctx.device)
        if half:
            model = model.half()
            example = example if self.config.input_form != FLOAT_INPUT else example.half()
        metadata = artifact_metadata(ArtifactMetadata.of(ctx.manifest(MODEL)), target=self.target,
                                     precision=self.config.precision, imgsz=self.config.imgsz,
                                     input_form=self.config.input_form)
        if self.config.input_form == FLOAT_INPUT:
            metadata = metadata.with_input_dtype("float16" if half else "float32")
        with torch.no_grad():
            traced = torch.jit.trace(model, example, strict=False, check_trace=False)
        entry = format_named(self.target).entry_for(ctx.source.model_id)
        traced.save(str(ctx.out_dir / entry), _extra_files={METADATA_FILE: json.dumps(metadata.to_dict())})
        return StageOutput(entry=entry, metadata=metadata.to_dict())
