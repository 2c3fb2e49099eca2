"""NCNN (Tencent's mobile runtime): the family's export module converted by pnnx into ``model.ncnn.param`` (the
graph) and ``model.ncnn.bin`` (the weights), with the metadata beside them in ``metadata.json`` (NCNN files carry
none). FP32 weights for ``ncnn-fp32``, which the runner computes with NCNN's FP16 storage and arithmetic switched off
so that it is held to the FP32 tolerance; FP16 weights for ``ncnn-fp16``, run with NCNN's defaults (FP16 storage and,
on CPUs that have it, FP16 arithmetic: what phones run). An NCNN graph takes one image: it is converted at batch 1,
and a batch runs image by image, or one image per thread (runtime/runners/ncnn.py). With ``--input uint8`` the graph
is the float one and NCNN converts the prepared uint8 image itself, as a deployment does (``ncnn_metadata``)."""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from yolo_optimize.building.loading import warmed_up
from yolo_optimize.building.stage import MODEL, REFERENCE, Stage, StageContext, StageOutput
from yolo_optimize.families import family_named
from yolo_optimize.families.base import Family
from yolo_optimize.formats import format_named
from yolo_optimize.metadata import FLOAT_INPUT, ArtifactMetadata, artifact_metadata
from yolo_optimize.runtime.runners.ncnn import CONVOLUTIONS, UINT8_PREPROCESS, read_layers

if TYPE_CHECKING:
    from yolo_optimize.building.request import BuildRequest

METADATA_FILE = "metadata.json"  # beside the .param and .bin, as Ultralytics' NCNN folders keep metadata.yaml


@dataclass(frozen=True)
class NcnnConfig:
    imgsz: int
    precision: str  # fp16: FP16 weights in the .bin, and NCNN's FP16 options on when it runs
    input_form: str = FLOAT_INPUT


class NcnnExport(Stage):
    name = "ncnn"
    revision = 3  # 2: each convolution's module path recorded (info.convolution_modules); 3: grouped ones too, and
    # the example run once before tracing
    inputs = (MODEL, REFERENCE)
    tools = ("torch", "pnnx", "ncnn")
    target = "ncnn"
    config: NcnnConfig

    @classmethod
    def planned(cls, request: BuildRequest, precision: str) -> NcnnExport:
        return cls(NcnnConfig(request.imgsz, precision, request.input_form))

    def unavailable_reason(self, device: str) -> str | None:
        import importlib.util

        if not (importlib.util.find_spec("pnnx") and importlib.util.find_spec("ncnn")):
            return "the ncnn target needs pnnx and ncnn: pip install 'yolo-optimize[edge]'"
        return None

    def run(self, ctx: StageContext) -> StageOutput:
        import pnnx
        import torch

        module, example = warmed_up(ctx.source, FLOAT_INPUT, self.config.imgsz, one_shape=True)  # ncnn_input
        entry = Path(format_named(self.target).entry_for(ctx.source.model_id))
        folder = ctx.out_dir / entry.parent
        folder.mkdir()
        with tempfile.TemporaryDirectory() as scratch, torch.no_grad():  # pnnx's own files: TorchScript, pnnx IR
            pnnx.export(module, str(Path(scratch) / "model.pt"), (example,), check_trace=False,
                        ncnnparam=str(ctx.out_dir / entry), ncnnbin=str(folder / "model.ncnn.bin"),
                        fp16=self.config.precision == "fp16", **scratch_paths(Path(scratch)))
            modules = convolution_modules(Path(scratch) / "model.pnnx.param", ctx.out_dir / entry)
        refuse_unconverted(ctx.out_dir / entry, family_named(ctx.source.family))
        metadata = ncnn_metadata(ArtifactMetadata.of(ctx.manifest(MODEL)), self.config)
        (folder / METADATA_FILE).write_text(json.dumps(metadata.to_dict(), indent=1))
        return StageOutput(entry=str(entry), metadata=metadata.to_dict(),
                           info={"layers": layer_types(ctx.out_dir / entry), "convolution_modules": modules})


def ncnn_metadata(base: ArtifactMetadata, config: NcnnConfig) -> ArtifactMetadata:
    """The artifact's metadata; with ``--input uint8`` it takes the prepared image, which NCNN converts itself (the
    graph is the float one: ``runners.ncnn.ncnn_input``)."""
    metadata = artifact_metadata(base, target=NcnnExport.target, precision=config.precision, imgsz=config.imgsz,
                                 max_batch=1, input_form=config.input_form)
    if config.input_form == FLOAT_INPUT or metadata.input is None:
        return metadata
    return replace(metadata, input=replace(metadata.input, preprocess=UINT8_PREPROCESS))


def scratch_paths(scratch: Path) -> dict[str, str]:
    """Where pnnx writes what a deployment does not need (its own IR, a Python script per runtime, an ONNX file)."""
    return {"pnnxparam": str(scratch / "model.pnnx.param"), "pnnxbin": str(scratch / "model.pnnx.bin"),
            "pnnxpy": str(scratch / "model_pnnx.py"), "pnnxonnx": str(scratch / "model.pnnx.onnx"),
            "ncnnpy": str(scratch / "model_ncnn.py")}


def layer_types(param: Path) -> dict[str, int]:
    """How many layers of each type the NCNN graph has, for the build's record and the runner's "runs in"."""
    counts: dict[str, int] = {}
    for layer in read_layers(param):
        counts[layer.kind] = counts.get(layer.kind, 0) + 1
    return dict(sorted(counts.items()))


def refuse_unconverted(param: Path, family: Family) -> None:
    """One line naming the operators pnnx left in the graph for want of an NCNN layer (their pnnx names, such as
    ``torch.topk``: NCNN's own layer types have no dot), instead of a graph NCNN refuses to load, with what ``family``
    can do about it (``unconverted_hint``)."""
    unconverted = sorted({layer.kind for layer in read_layers(param) if "." in layer.kind})
    if unconverted:
        raise RuntimeError(f"NCNN has no layer for {', '.join(unconverted)}: pnnx left them unconverted"
                           f"{unconverted_hint(family, unconverted)}")


def unconverted_hint(family: Family, unconverted: list[str]) -> str:
    """What builds ``family`` into a graph NCNN runs, where a top-k (which NCNN lacks) is what is left: YOLO26's and
    YOLOv10's NMS-free heads pick with one and have an NMS head to build instead (``--head``); RT-DETR's decoder
    ranks its queries with one and has no other head, so another target is the way. "" for other operators."""
    if "torch.topk" not in unconverted:
        return ""
    nms_heads = [head for head, made in family.heads.items() if made != family.name]
    if nms_heads:
        return f" ({family.name} picks its detections with a top-k: --head {nms_heads[0]} builds its NMS head, " \
            "which NCNN runs)"
    return f" ({family.name} ranks its detections with a top-k in its own head and has no head without one: " \
        "build it for another target, such as onnx or openvino)"


PNNX_CONVOLUTION = re.compile(r"^nn\.Conv2d\s+(\S+)\s.*\bout_channels=(\d+)\b", re.MULTILINE)


def convolution_modules(pnnx_param: Path, param: Path) -> dict[str, str]:
    """NCNN convolution layer (grouped ones included) -> the PyTorch module it came from. pnnx names NCNN layers
    ``conv_N`` and keeps the module paths in its own IR, where the convolutions come in the same order: paired in
    order, each pair checked by its output channels (an empty map where the two disagree: nothing is then known)."""
    ours = [layer for layer in read_layers(param) if layer.kind in CONVOLUTIONS]
    theirs = PNNX_CONVOLUTION.findall(pnnx_param.read_text())
    if len(ours) != len(theirs) or any(layer.param(0) != int(channels) for layer, (_, channels) in zip(ours, theirs)):
        return {}
    return {layer.name: module for layer, (module, _) in zip(ours, theirs)}
