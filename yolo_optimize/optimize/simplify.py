"""The deployable FP32 ONNX: onnxsim constant-folds and fuses the raw export (its nodes keep their names, so the
export's float part is passed on, less the nodes onnxsim folded away)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from yolo_optimize.building.stage import (
    FLOAT_PART,
    REFERENCE,
    SOURCE,
    Stage,
    StageContext,
    StageOutput,
    recorded_float_part,
)
from yolo_optimize.formats import format_named
from yolo_optimize.metadata import ArtifactMetadata, artifact_metadata
from yolo_optimize.optimize.onnx_io import save_onnx

if TYPE_CHECKING:
    from yolo_optimize.building.request import BuildRequest


@dataclass(frozen=True)
class SimplifyConfig:
    imgsz: int
    precision: str = "fp32"


class OnnxSimplify(Stage):
    name = "onnx-simplify"
    revision = 2  # 2: the export's float part passed on
    inputs = (SOURCE, REFERENCE)
    tools = ("onnx", "onnxsim")
    target = "onnx"

    @classmethod
    def planned(cls, request: BuildRequest, precision: str) -> OnnxSimplify:
        return cls(SimplifyConfig(request.imgsz))

    def run(self, ctx: StageContext) -> StageOutput:
        import onnx
        from onnxsim import simplify

        simplified, ok = simplify(onnx.load(str(ctx.entry(SOURCE))))
        if not ok:
            raise RuntimeError("onnxsim could not validate the simplified graph")
        metadata = artifact_metadata(ArtifactMetadata.of(ctx.manifest(SOURCE)), target=self.target,
                                     precision=self.config.precision, imgsz=self.config.imgsz)
        entry = format_named(self.target).entry_for(ctx.source.model_id)
        save_onnx(simplified, ctx.out_dir / entry, metadata)
        kept = {node.name for node in simplified.graph.node}
        float_part = [name for name in recorded_float_part(ctx.manifest(SOURCE)) if name in kept]
        return StageOutput(entry=entry, metadata=metadata.to_dict(), info={FLOAT_PART: float_part})
