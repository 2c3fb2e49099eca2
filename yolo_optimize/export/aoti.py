"""AOTInductor packages: the model as a ``torch.export`` program compiled ahead of time into a ``.pt2`` file.

What PyTorch users deploy now that TorchScript is deprecated: ``torch._inductor.aoti_load_package``
loads the package's compiled C++ (oneDNN convolutions, fused element-wise kernels) and its weights,
with no Python model code, in any process that has torch. The batch axis stays dynamic. FP32 computes
in fp32; BF16 computes the model in bfloat16 but for the family's float module (the Detect head:
box arithmetic at 640 pixels needs float32) and takes and returns float32. The C++ is compiled for
this CPU (``-march=native``: AVX-512, VNNI...): like a TensorRT engine the package is bound to the kind of
CPU that built it, so the CPU's instruction sets enter the cache key and a runner refuses a CPU
without them. Its metadata is embedded in the package (``get_metadata()``, JSON values).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yolo_optimize.building.loading import example_input, export_module
from yolo_optimize.building.stage import MODEL, REFERENCE, Stage, StageContext, StageOutput
from yolo_optimize.formats import format_named
from yolo_optimize.host.cpu import cpu_facts, has_native_bf16, reported_isa
from yolo_optimize.metadata import FLOAT_INPUT, ArtifactMetadata, artifact_metadata

if TYPE_CHECKING:
    from yolo_optimize.building.request import BuildRequest

MAX_BATCH = 1024  # the exporter needs a bound; the compiled code takes any batch up to it
# freezing: constant folding and oneDNN weight prepacking (PyTorch's advice for CPU inference); dynamic threads: the
# kernels take the thread count of the process that runs them, not of the build worker that compiled them.
INDUCTOR_CONFIGS = {"freezing": True, "cpp.dynamic_threads": True}


@dataclass(frozen=True)
class AotiConfig:
    imgsz: int
    precision: str  # fp32 | bf16
    input_form: str = FLOAT_INPUT


def cannot_compile(device: str) -> str | None:
    """Why an AOTInductor package cannot be built here for ``device``, or None: it is compiled for the CPU, with
    $CXX or g++."""
    if device == "cuda":  # H100, torch 2.11 + CUDA 13 (issue 33, bench/archive/gpu_lane/aoti_cuda_probe.py): export
        # and compile work
        return ("the aoti target is compiled for the CPU here (--device cpu): torch 2.11's AOTInductor loader "
                "segfaults on the CUDA packages it compiles (bench/archive/gpu_lane/README.md)")
    compiler = os.environ.get("CXX", "g++")
    if shutil.which(compiler):
        return None
    return f"AOTInductor compiles C++: no {compiler} on PATH (install g++ or set CXX)"


def bound_cpu() -> dict[str, str]:
    """What a package compiled here is bound to: the CPU's instruction sets (``-march=native``)."""
    return {"cpu_isa": " ".join(reported_isa())}


def exported(module: Any, example: Any, *, warm_up: bool = True) -> Any:
    """``module`` as a torch.export program with a dynamic batch axis; with ``warm_up``, after one forward pass that
    builds whatever the model caches on its first call (YOLOv5/v7 heads' anchor grids: constants in the package)
    (the family says: ``Family.export_warm_up``)."""
    import torch

    with torch.no_grad():
        if warm_up:
            module(example)
        batch = torch.export.Dim("batch", min=1, max=MAX_BATCH)
        return torch.export.export(module, (example,), dynamic_shapes=({0: batch},))


def compile_package(program: Any, path: Path, metadata: ArtifactMetadata) -> None:
    """Compile ``program`` into the package at ``path`` with ``metadata`` embedded (each value as JSON)."""
    import torch

    with torch.no_grad():  # freezing applies only without autograd
        configs = {**INDUCTOR_CONFIGS, "aot_inductor.metadata": metadata.as_strings()}
        torch._inductor.aoti_compile_and_package(program, package_path=str(path), inductor_configs=configs)


class AotiCompile(Stage):
    """The family's export module (FP32, or BF16 with its float module kept) compiled by AOTInductor."""

    name = "aoti"
    inputs = (MODEL, REFERENCE)
    tools = ("torch",)
    target = "aoti"
    config: AotiConfig

    @classmethod
    def planned(cls, request: BuildRequest, precision: str) -> AotiCompile:
        return cls(AotiConfig(request.imgsz, precision, request.input_form))

    def environment(self) -> dict[str, str]:
        return bound_cpu()

    def unavailable_reason(self, device: str) -> str | None:
        if self.config.precision == "bf16" and not has_native_bf16():
            return ("BF16 AOTInductor needs a CPU with native bf16 (AVX512-BF16 or AMX): PyTorch emulates it, "
                    "slower than FP32")
        return cannot_compile(device)

    def run(self, ctx: StageContext) -> StageOutput:
        import torch

        from yolo_optimize.families import family_named
        from yolo_optimize.families.modules import HalfBody

        family = family_named(ctx.source.family)
        module = export_module(ctx.source, self.config.input_form)
        if self.config.precision == "bf16":
            module = HalfBody(module, torch.bfloat16, family.float_module(module)).eval()
        metadata = artifact_metadata(ArtifactMetadata.of(ctx.manifest(MODEL)), target=self.target,
                                     precision=self.config.precision, imgsz=self.config.imgsz, max_batch=MAX_BATCH,
                                     input_form=self.config.input_form)
        entry = format_named(self.target).entry_for(ctx.source.model_id)
        compile_package(exported(module, example_input(self.config.input_form, 2, self.config.imgsz),
                                 warm_up=family.export_warm_up),
                        ctx.out_dir / entry, metadata)
        return StageOutput(entry=entry, metadata=metadata.to_dict(), info={"built_on_cpu": cpu_facts()})
