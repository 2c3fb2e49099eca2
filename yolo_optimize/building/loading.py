"""The ``load`` node: verifies the model and records the facts every artifact embeds."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from yolo_optimize.building.stage import Stage, StageContext, StageOutput
from yolo_optimize.checkpoint import ModelSource
from yolo_optimize.families import family_named
from yolo_optimize.metadata import FLOAT_INPUT, ArtifactMetadata
from yolo_optimize.versions import __version__


@dataclass(frozen=True)
class LoadConfig:
    """No parameters: the load node's key is the model's identity (checkpoint sha256 or config + seed) and family."""


class LoadStage(Stage):
    name = "load"
    inputs = ()
    tools = ("torch",)  # the family's own tools enter the key through the source (dag.cache_keys)

    def run(self, ctx: StageContext) -> StageOutput:
        from yolo_optimize.checkpoint import load_model

        model = load_model(ctx.source)
        source = {**asdict(ctx.source), "checkpoint": str(ctx.source.checkpoint) if ctx.source.checkpoint else None}
        return StageOutput(entry=None, metadata=model_metadata(model, ctx).to_dict(), info={"source": source})


def model_metadata(model: Any, ctx: StageContext) -> ArtifactMetadata:
    """Model facts shared by all artifacts (the family's own, size, compute): what every artifact's metadata starts
    from."""
    import copy

    import thop
    import torch

    family = family_named(ctx.source.family)
    imgsz = family.default_imgsz
    macs, _ = thop.profile(copy.deepcopy(model), inputs=(torch.zeros(1, 3, imgsz, imgsz),), verbose=False)
    facts = ArtifactMetadata(family=family.name, pretrained=ctx.source.pretrained, task=family.task, extra={
        "producer": f"yolo-optimize {__version__}",
        "model": ctx.source.model_id,
        "architecture": ctx.source.architecture,
        "parameters": sum(p.numel() for p in model.parameters()),
        "gflops": {"imgsz": imgsz, "value": round(2 * macs / 1e9, 3)},
    })
    return facts.with_facts(family.embedded_facts(model))


def export_module(source: ModelSource, input_form: str) -> Any:
    """The model every artifact is exported from (``checkpoint.load_model``), taking ``input_form``."""
    from yolo_optimize.checkpoint import load_model

    model = load_model(source)
    if input_form == FLOAT_INPUT:
        return model
    from yolo_optimize.families.modules import Uint8Input

    return Uint8Input(model).eval()


def example_input(input_form: str, batch: int, imgsz: int, device: str = "cpu") -> Any:
    """A zero batch in ``input_form`` for tracing and export."""
    import torch

    if input_form == FLOAT_INPUT:
        return torch.zeros(batch, 3, imgsz, imgsz, device=device)
    return torch.zeros(batch, imgsz, imgsz, 3, dtype=torch.uint8, device=device)


def warmed_up(source: ModelSource, input_form: str, imgsz: int, one_shape: bool = False) -> tuple[Any, Any]:
    """The export module and a one-image example, after one forward pass where the family builds what it caches on
    its first call (YOLOv5/v7 heads' anchor grids: ``Family.export_warm_up``), so that an exporter records them as
    constants. ``one_shape``: the graph only ever takes the example's shape (NCNN's), so the pass is made for every
    family: what a head caches per input shape, batch included (Ultralytics' anchors), is then a constant too."""
    import torch

    module, example = export_module(source, input_form), example_input(input_form, 1, imgsz)
    if one_shape or family_named(source.family).export_warm_up:
        with torch.no_grad():
            module(example)
    return module, example
