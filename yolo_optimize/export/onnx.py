"""ONNX export through torch's dynamo exporter: one output, only the batch axis dynamic.

The export also records, in ONNX's terms, the part of the graph the family keeps in float (``Family.float_module``):
the nodes the exporter placed inside that module. Only the raw export knows this (its name scopes, which onnxsim
drops), so it goes into the manifest's ``float_part`` for the INT8 passes (optimize/int8_onnx.py)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from yolo_optimize.building.loading import example_input, export_module
from yolo_optimize.building.stage import FLOAT_PART, MODEL, Stage, StageContext, StageOutput
from yolo_optimize.families import family_named
from yolo_optimize.metadata import FLOAT_INPUT, ArtifactMetadata, input_spec

if TYPE_CHECKING:
    from yolo_optimize.building.request import BuildRequest

MAX_BATCH = 1024  # the exporter needs a bound; the graph itself has none
NAME_SCOPES = "pkg.torch.onnx.name_scopes"  # the dynamo exporter's node metadata: the module path, then the node


@dataclass(frozen=True)
class OnnxExportConfig:
    imgsz: int
    opset: int
    input_form: str = FLOAT_INPUT


class OnnxExport(Stage):
    """Raw export; the deployable ONNX is its simplified child (optimize/simplify.py)."""

    name = "onnx-export"
    revision = 3  # 2: traced at batch 2; 3: the float part recorded
    inputs = (MODEL,)
    tools = ("torch", "onnx", "onnxscript")

    @classmethod
    def planned(cls, request: BuildRequest, precision: str) -> OnnxExport:
        return cls(OnnxExportConfig(request.imgsz, request.opset, request.input_form))

    def run(self, ctx: StageContext) -> StageOutput:
        import torch

        model = export_module(ctx.source, self.config.input_form)
        # Batch 2, not 1: torch.export specializes dimensions of size 1, and some models (YOLOv7's head)
        # then fail the dynamic batch constraint.
        example = example_input(self.config.input_form, 2, self.config.imgsz)
        batch = torch.export.Dim("batch", min=1, max=MAX_BATCH)
        entry = f"{ctx.source.model_id}.onnx"
        torch.onnx.export(model, (example,), str(ctx.out_dir / entry), dynamo=True, external_data=False,
                          opset_version=self.config.opset, input_names=["images"], output_names=["output0"],
                          dynamic_shapes=({0: batch},), verbose=False)
        _check_opset(ctx.out_dir / entry, self.config.opset)
        metadata = replace(ArtifactMetadata.of(ctx.manifest(MODEL)),
                           input=input_spec(ctx.source.family, self.config.input_form))
        float_part = module_nodes(ctx.out_dir / entry, family_named(ctx.source.family).float_module(model))
        return StageOutput(entry=entry, metadata=metadata.to_dict(), info={FLOAT_PART: float_part})


def module_nodes(path: Path, module: str | None) -> list[str]:
    """The nodes of the exported graph at ``path`` that the exporter placed inside ``module`` (a qualified submodule
    name of the exported module; None: none)."""
    import onnx

    if module is None:
        return []
    inside = []
    for node in onnx.load(str(path), load_external_data=False).graph.node:
        scopes: list[str] = next((ast.literal_eval(p.value) for p in node.metadata_props if p.key == NAME_SCOPES), [])
        if module in scopes[:-1]:  # the last scope is the node itself
            inside.append(node.name)
    if not inside:
        raise RuntimeError(f"the exporter placed no node inside {module!r}, the module the family keeps in float "
                           f"(its {NAME_SCOPES} metadata is missing or names other modules)")
    return inside


def _check_opset(path: Path, wanted: int) -> None:
    """The exporter falls back to its own opset when conversion fails; never ship that silently."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    got = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    if got != wanted:
        raise RuntimeError(f"the exporter wrote opset {got}, not the requested {wanted} (see the log)")
