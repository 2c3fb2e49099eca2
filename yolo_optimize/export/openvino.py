"""OpenVINO IR converted from the deployable ONNX; metadata in the IR's ``rt_info``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from yolo_optimize.formats import FORMATS
from yolo_optimize.stage import REFERENCE, SOURCE, Stage, StageContext, StageOutput

RT_INFO_SECTION = "model_info"
# What each artifact means on CPU, whatever the CPU: fp32 computes in f32 (set explicitly, since OpenVINO
# would use bf16 on CPUs that have it); fp16 is the FP16-compressed IR computed in f32 (half the file, FP32
# arithmetic: pinned, so that it is never silently the same thing as bf16); bf16 computes in bf16 where
# the CPU has it natively (f32 elsewhere, and the runner says so); int8's float parts, the Detect head
# among them, compute in f32. OpenVINO's CPU plugin does not read this hint from the IR (its rt_info
# "runtime_options" carry only KV-cache and dynamic-quantization keys), so the metadata tells a deployer
# to pass it to compile_model, as the runner does.
EXECUTION_HINTS = {"fp32": "f32", "fp16": "f32", "int8": "f32", "bf16": "bf16"}


def compile_config(metadata: dict[str, Any]) -> dict[str, Any]:
    """What to pass to ``compile_model`` for the artifact to compute as it was built and checked: its metadata's
    ``compile_config`` (INT8 IRs built on a CPU with native bf16 run their float parts in bf16), else its
    precision's hint."""
    return dict(metadata.get("compile_config") or
                {"INFERENCE_PRECISION_HINT": EXECUTION_HINTS[str(metadata.get("precision", "fp32"))]})


@dataclass(frozen=True)
class OpenVinoConfig:
    precision: str  # fp16: weights compressed to FP16 in the IR


class OpenVinoExport(Stage):
    name = "openvino"
    inputs = (SOURCE, REFERENCE)
    revision = 2  # 2: the execution hint is in the metadata
    tools = ("openvino",)
    target = "openvino"

    def run(self, ctx: StageContext) -> StageOutput:
        import openvino as ov

        model = ov.convert_model(str(ctx.entry(SOURCE)))
        metadata = {**ctx.manifest(SOURCE).metadata, "format": self.target,
                    "precision": self.config.precision,
                    "compile_config": {"INFERENCE_PRECISION_HINT": EXECUTION_HINTS[self.config.precision]}}
        embed_metadata(model, metadata)
        entry = FORMATS[self.target].entry_for(ctx.source.model_id)
        (ctx.out_dir / entry).parent.mkdir()
        ov.save_model(model, str(ctx.out_dir / entry), compress_to_fp16=self.config.precision == "fp16")
        return StageOutput(entry=entry, metadata=metadata)


def embed_metadata(model: Any, metadata: dict[str, Any]) -> None:
    """Metadata into the IR's rt_info (JSON values), so plain OpenVINO can read it back."""
    for key, value in metadata.items():
        model.set_rt_info(value if isinstance(value, str) else json.dumps(value), [RT_INFO_SECTION, key])
