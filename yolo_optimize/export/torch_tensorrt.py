"""torch-tensorrt: the checkpoint's module through ``torch.export`` and ``torch_tensorrt.dynamo.compile``, saved as an
ExportedProgram (``.ep``) whose TensorRT engines run inside PyTorch (the optional ``torch-tensorrt`` extra).

Written against torch-tensorrt 2.14 (torch 2.14, TensorRT 11.1; its networks are strongly typed, so an FP16
module is compiled from the half-precision module and FP32 stays FP32 with TF32 disabled). The batch axis is
dynamic up to the largest requested batch; parts TensorRT cannot take stay in PyTorch (``min_block_size`` 1
keeps as much as possible in TensorRT). Like a plain engine, the file is valid only for the TensorRT version and
GPU that compiled it: they enter its key and manifest, and the runner refuses another. Not run on these machines
(no GPU, no TensorRT): the skip paths are tested.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from yolo_optimize.building.stage import MODEL, REFERENCE, Stage, StageContext, StageOutput
from yolo_optimize.errors import StageSkipped
from yolo_optimize.formats import format_named
from yolo_optimize.metadata import ArtifactMetadata, artifact_metadata
from yolo_optimize.runtime.tensorrt_api import (
    TORCH_TENSORRT_HINT,
    engine_environment,
    gpu_build_unavailable,
    torch_tensorrt_unavailable_reason,
)

if TYPE_CHECKING:
    from yolo_optimize.building.request import BuildRequest

METADATA_FILE = "config.txt"  # an extra file inside the saved ExportedProgram, as TorchScript's


@dataclass(frozen=True)
class TorchTensorRTConfig:
    imgsz: int
    precision: str
    batch_sizes: tuple[int, ...]


class TorchTensorRTCompile(Stage):
    name = "torch-tensorrt"
    inputs = (MODEL, REFERENCE)
    tools = ("torch", "torch-tensorrt")
    target = "torch-tensorrt"
    exclusive_gpu = True  # it times kernels like any TensorRT build

    @classmethod
    def planned(cls, request: BuildRequest, precision: str) -> TorchTensorRTCompile:
        return cls(TorchTensorRTConfig(request.imgsz, precision, request.batch_sizes))

    def environment(self) -> dict[str, str]:
        """Compiled engines are valid only for the TensorRT version and GPU that built them."""
        return engine_environment()

    def unavailable_reason(self, device: str) -> str | None:
        return gpu_build_unavailable("torch-tensorrt", "torch_tensorrt", TORCH_TENSORRT_HINT, device)

    def run(self, ctx: StageContext) -> StageOutput:
        reason = torch_tensorrt_unavailable_reason()
        if reason:
            raise StageSkipped(reason)
        import torch
        import torch_tensorrt

        from yolo_optimize.checkpoint import load_model

        dtype = torch.float16 if self.config.precision == "fp16" else torch.float32
        size, largest = self.config.imgsz, max(self.config.batch_sizes)
        top = max(largest, 2)  # the example's batch must lie in the profile
        model = load_model(ctx.source).to("cuda", dtype).eval()
        # Batch 2, not 1, as for ONNX (export/onnx.py): torch.export specializes dimensions of size 1.
        example = torch.zeros(2, 3, size, size, device="cuda", dtype=dtype)
        inputs = [torch_tensorrt.Input(min_shape=(1, 3, size, size), opt_shape=(largest, 3, size, size),
                                       max_shape=(top, 3, size, size), dtype=dtype)]
        with torch.no_grad():
            program = torch.export.export(model, (example,), strict=False,
                                          dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=top)},))
            compiled = torch_tensorrt.dynamo.compile(program, arg_inputs=inputs, disable_tf32=True, min_block_size=1)
        metadata = artifact_metadata(ArtifactMetadata.of(ctx.manifest(MODEL)), target=self.target,
                                     precision=self.config.precision, imgsz=size)
        metadata = metadata.with_input_dtype("float16" if dtype == torch.float16 else "float32")
        entry = format_named(self.target).entry_for(ctx.source.model_id)
        # The Input specs, not the example tensor: the saved program keeps the dynamic batch they describe.
        torch_tensorrt.save(compiled, str(ctx.out_dir / entry), output_format="exported_program",
                            arg_inputs=inputs, extra_files={METADATA_FILE: json.dumps(metadata.to_dict())})
        info = {"environment": engine_environment(), "max_batch": top, "disable_tf32": True,
                "torch_tensorrt": torch_tensorrt.__version__}
        return StageOutput(entry=entry, metadata=metadata.to_dict(), info=info)
