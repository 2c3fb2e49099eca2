"""ONNX export through torch's dynamo exporter: one output, only the batch axis dynamic."""

from __future__ import annotations

from dataclasses import dataclass

from yolo_optimize.stage import Stage, StageContext, StageOutput

MAX_BATCH = 1024  # the exporter needs a bound; the graph itself has none


@dataclass(frozen=True)
class OnnxExportConfig:
    imgsz: int
    opset: int


class OnnxExport(Stage):
    """Raw export; the deployable ONNX is its simplified child (optimize/simplify.py)."""

    name = "onnx-export"
    tools = ("torch", "onnx", "onnxscript", "yolov5")

    def run(self, ctx: StageContext) -> StageOutput:
        import torch

        from yolo_optimize.checkpoint import load_model

        model = load_model(ctx.source)
        example = torch.zeros(1, 3, self.config.imgsz, self.config.imgsz)
        batch = torch.export.Dim("batch", min=1, max=MAX_BATCH)
        entry = f"{ctx.source.model_id}.onnx"
        torch.onnx.export(model, (example,), str(ctx.out_dir / entry), dynamo=True, external_data=False,
                          opset_version=self.config.opset, input_names=["images"], output_names=["output0"],
                          dynamic_shapes=({0: batch},), verbose=False)
        return StageOutput(entry=entry, metadata=ctx.parent_manifest("load").metadata)
