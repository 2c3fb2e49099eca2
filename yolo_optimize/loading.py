"""The ``load`` node: verifies the model and records the facts every artifact embeds."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from yolo_optimize import __version__
from yolo_optimize.stage import Stage, StageContext, StageOutput

OUTPUT_LAYOUT = "xywh (input pixels), objectness, per-class probabilities"


@dataclass(frozen=True)
class LoadConfig:
    """No parameters: the load node's key is the model's identity (checkpoint sha256 or YAML + seed)."""


class LoadStage(Stage):
    name = "load"
    tools = ("torch", "yolov5")

    def run(self, ctx: StageContext) -> StageOutput:
        from yolo_optimize.checkpoint import load_model

        model = load_model(ctx.source)
        source = {**asdict(ctx.source), "checkpoint": str(ctx.source.checkpoint) if ctx.source.checkpoint else None}
        return StageOutput(entry=None, metadata=describe(model, ctx), info={"source": source})


def describe(model: Any, ctx: StageContext) -> dict[str, Any]:
    """Model facts shared by all artifacts (names, strides, size) in JSON-able form."""
    import copy

    import thop
    import torch

    macs, _ = thop.profile(copy.deepcopy(model), inputs=(torch.zeros(1, 3, 640, 640),), verbose=False)
    names = model.names if isinstance(model.names, list) else [model.names[i] for i in sorted(model.names)]
    return {
        "producer": f"yolo-optimize {__version__}",
        "model": ctx.source.model_id,
        "architecture": ctx.source.architecture,
        "pretrained": ctx.source.pretrained,
        "task": "detect",
        "names": list(names),
        "nc": len(names),
        "stride": int(model.stride.max()),
        "strides": [int(s) for s in model.stride],
        "parameters": sum(p.numel() for p in model.parameters()),
        "gflops_at_640": round(2 * macs / 1e9, 3),
    }


def artifact_metadata(base: dict[str, Any], *, target: str, precision: str, imgsz: int,
                      max_batch: int | None = None) -> dict[str, Any]:
    """What a deployed file must carry to be used without this package."""
    return {
        **base,
        "format": target,
        "precision": precision,
        "imgsz": [imgsz, imgsz],
        "batch": {"min": 1, "max": max_batch},  # max None: any batch size
        "input": {"name": "images", "layout": "NCHW", "dtype": "float32",
                  "preprocess": "letterbox to imgsz (pad 114), RGB, /255"},
        "output": {"name": "output0", "shape": ["batch", "anchors", 5 + base["nc"]], "layout": OUTPUT_LAYOUT},
    }
