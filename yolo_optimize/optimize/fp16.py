"""FP16 ONNX with FP32 inputs and outputs, so callers feed and read the same tensors as FP32."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from yolo_optimize.building.stage import REFERENCE, SOURCE, Stage, StageContext, StageOutput
from yolo_optimize.metadata import ArtifactMetadata
from yolo_optimize.optimize.onnx_io import save_onnx

if TYPE_CHECKING:
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

        model = convert_float_to_float16(onnx.load(str(ctx.entry(SOURCE))),
                                         keep_io_types=self.config.keep_io_types)
        graph = onnx_ir.from_proto(model)
        graph.graph.sort()  # the converter appends its output casts after their consumers
        model = onnx_ir.to_proto(graph)
        metadata = replace(ArtifactMetadata.of(ctx.manifest(SOURCE)), precision=self.config.precision)
        entry = ctx.manifest(SOURCE).entry
        assert entry
        save_onnx(model, ctx.out_dir / entry, metadata)
        return StageOutput(entry=entry, metadata=metadata.to_dict())
