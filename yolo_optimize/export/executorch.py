"""ExecuTorch (PyTorch's on-device runtime): the family's export module through ``torch.export``, lowered to the
XNNPACK backend (``to_edge_transform_and_lower`` with its partitioner) and written as a ``.pte`` program, with the
metadata beside it in ``<model>.json`` (a program's constant methods take numbers only).

The program takes one image: lowered with a dynamic batch, XNNPACK's delegate kept the example's batch in its
output tensors and failed at any other ("Attempted to resize a static tensor", executorch 1.5.1), and memory
planning would size every buffer for the largest batch. So it is lowered at batch 1, as phones run it, and a batch
runs image by image (runtime/runners/executorch.py). What XNNPACK did not take runs on ExecuTorch's portable
kernels: the build records those operators (``info.fallback``), and the runner's "runs in" says how many."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yolo_optimize.building.loading import warmed_up
from yolo_optimize.building.stage import MODEL, REFERENCE, Stage, StageContext, StageOutput
from yolo_optimize.formats import format_named
from yolo_optimize.metadata import FLOAT_INPUT, ArtifactMetadata, artifact_metadata

if TYPE_CHECKING:
    from yolo_optimize.building.request import BuildRequest

DELEGATE_CALL = "executorch_call_delegate"


@dataclass(frozen=True)
class ExecuTorchConfig:
    imgsz: int
    precision: str
    input_form: str = FLOAT_INPUT


class ExecuTorchExport(Stage):
    name = "executorch"
    inputs = (MODEL, REFERENCE)
    tools = ("torch", "executorch")
    target = "executorch"
    config: ExecuTorchConfig

    @classmethod
    def planned(cls, request: BuildRequest, precision: str) -> ExecuTorchExport:
        return cls(ExecuTorchConfig(request.imgsz, precision, request.input_form))

    def unavailable_reason(self, device: str) -> str | None:
        import importlib.util

        if not importlib.util.find_spec("executorch"):
            return "the executorch target needs executorch: pip install 'yolo-optimize[edge]'"
        return None

    def run(self, ctx: StageContext) -> StageOutput:
        import torch

        module, example = warmed_up(ctx.source, self.config.input_form, self.config.imgsz)
        if self.config.precision == "fp16":
            module = half_program_module(module, ctx.source.family)
        with torch.no_grad():
            program = torch.export.export(module, (example,))
        metadata = artifact_metadata(ArtifactMetadata.of(ctx.manifest(MODEL)), target=self.target,
                                     precision=self.config.precision, imgsz=self.config.imgsz, max_batch=1,
                                     input_form=self.config.input_form)
        entry = format_named(self.target).entry_for(ctx.source.model_id)
        info = write_program(program, ctx.out_dir / entry, metadata)
        return StageOutput(entry=entry, metadata=metadata.to_dict(), info=info)


def half_program_module(module: Any, family: str) -> Any:
    """The module of a float16 program: float16 weights and arithmetic but for the family's float module (the Detect
    head's boxes), float32 images in and out, as the FP32 program takes them; SiLU as a product, which XNNPACK takes
    in float16 (``ProductSiLU``). XNNPACK runs it in float16 where the CPU computes float16 (ARM's fp16 arithmetic,
    AVX512-FP16); elsewhere its kernels keep float16 storage and accumulate in float32."""
    import torch

    from yolo_optimize.families import family_named
    from yolo_optimize.families.modules import HalfBody, with_product_silu

    return HalfBody(with_product_silu(module), torch.float16, family_named(family).float_module(module)).eval()


def write_program(program: Any, path: Path, metadata: ArtifactMetadata) -> dict[str, Any]:
    """``program`` (a torch.export program) lowered to XNNPACK and written at ``path``, ``metadata`` beside it; what
    XNNPACK took and left (``delegation``)."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    lowered = to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()])
    partitions, fallback = delegation(lowered.exported_program().graph_module)
    if left := quantized_fallback(lowered.exported_program().graph_module):
        raise RuntimeError(f"ExecuTorch INT8: XNNPACK did not take {len(left)} operators with int8 weights "
                           f"({', '.join(left)}), and ExecuTorch's portable kernels have no "
                           "quantize_per_channel/dequantize_per_channel to run them outside it")
    path.write_bytes(lowered.to_executorch().buffer)
    path.with_suffix(".json").write_text(json.dumps(metadata.to_dict(), indent=1))
    return {"xnnpack_partitions": partitions, "fallback": fallback}


def quantized_fallback(graph_module: Any) -> list[str]:
    """The modules whose operators XNNPACK left outside it with int8 weights: ExecuTorch's portable kernels have no
    (de)quantize operators (executorch 1.5.1), so ``to_executorch`` would fail on them with a bare "Missing out
    variants". Seen on YOLOv7-tiny, whose six convolutions before the head quantized their weights at run time
    until ``int8_executorch`` folded them (XNNPACK takes only constant int8 weights); kept as the check that names
    whatever else XNNPACK leaves so."""
    return sorted({_module_of(user) for node in graph_module.graph.nodes if node.op == "call_function"
                   and "quantize_per_channel" in str(node.target) for user in node.users
                   if "quantize" not in str(user.target)})


def _module_of(node: Any) -> str:
    """The module a graph node came from (its own name where the export did not record one)."""
    stack = node.meta.get("nn_module_stack") or {}
    return str(list(stack.values())[-1][0]) if stack else node.name


def delegation(graph_module: Any) -> tuple[int, dict[str, int]]:
    """The XNNPACK partitions of a lowered program and, by operator, the nodes left to the portable kernels
    (shape arithmetic and the partitions' output picking aside)."""
    calls = [node for node in graph_module.graph.nodes if node.op == "call_function"]
    partitions = sum(DELEGATE_CALL in str(node.target) for node in calls)
    fallback: dict[str, int] = {}
    for node in calls:
        name = getattr(node.target, "__name__", str(node.target))
        if DELEGATE_CALL not in name and "getitem" not in name and "sym_size" not in name:
            fallback[name] = fallback.get(name, 0) + 1
    return partitions, dict(sorted(fallback.items()))
