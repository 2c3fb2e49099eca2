"""INT8 AOTInductor packages: PyTorch's own post-training quantization (PT2E with the x86 Inductor quantizer of
torchao), compiled ahead of time like every ``aoti`` artifact, gated like every INT8 artifact.

The recipe is PyTorch's for x86 CPUs: the exported program is annotated by ``X86InductorQuantizer``
(u8 activations from histogram ranges, s8 symmetric per-channel weights), calibrated on every
``--calib-images`` image, converted, exported again and compiled with freezing, which lowers each
quantized convolution (with its SiLU) onto oneDNN's int8 kernels (VNNI where the CPU has it). The
family's float module (the Detect head) is left unannotated, so it stays in float32 as in every INT8
recipe here. The gate scores the compiled package through its runner, as it will be measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from yolo_optimize.cpu import cpu_facts
from yolo_optimize.export.aoti import cannot_compile, compile_package, exported, machine_environment
from yolo_optimize.families import family_named
from yolo_optimize.loading import FLOAT_INPUT, example_input, export_module
from yolo_optimize.optimize.calibration import Int8Config, calibration_inputs, candidate_manifest
from yolo_optimize.optimize.gate import Gate, GateRecord
from yolo_optimize.stage import REFERENCE, SOURCE, Stage, StageContext, StageOutput

ROUTE = "PT2E, X86InductorQuantizer defaults (torchao)"


@dataclass(frozen=True)
class AotiInt8Config(Int8Config):
    input_form: str = FLOAT_INPUT
    precision: str = "int8"


class AotiInt8(Stage):
    """Quantizes the family's export module (PT2E), compiles it and gates it against its FP32 package (SOURCE)."""

    name = "aoti-int8"
    inputs = (SOURCE, REFERENCE)
    tools = ("torch", "torchao")
    target = "aoti"
    config: AotiInt8Config

    def environment(self) -> dict[str, str]:
        return machine_environment()

    def unavailable_reason(self, device: str) -> str | None:
        return cannot_compile(device)

    def run(self, ctx: StageContext) -> StageOutput:
        parent = ctx.manifest(SOURCE)
        family = family_named(ctx.source.family)
        module = export_module(ctx.source, self.config.input_form)
        kept = family.float_module(module)
        metadata = {**parent.metadata, "precision": "int8", "kept_in_float": [kept] if kept else [],
                    "quantization": ROUTE}
        gate = Gate(self.config.gate, family, self.config.imgsz, ctx.threads)
        try:
            record = GateRecord(self.config.gate, gate.score(ctx.inputs[SOURCE], parent), gate)
            program = self._quantized(module, kept, calibration_inputs(family, self.config.calib_images,
                                                                       self.config.imgsz, parent.metadata.get("input")))
            compile_package(program, ctx.out_dir / str(parent.entry), metadata)
            record.add(ROUTE, gate.score(ctx.out_dir, candidate_manifest(parent, node=self.name, metadata=metadata)))
        finally:
            gate.close()
        record.require_pass()
        return StageOutput(entry=parent.entry, metadata=metadata,
                           info={"gate": record.result(), "kept_in_float": metadata["kept_in_float"],
                                 "built_on_cpu": cpu_facts()})

    def _quantized(self, module: Any, kept: str | None, images: list[np.ndarray]) -> Any:
        """The quantized program: annotated (``kept`` left in float), calibrated on ``images``, converted, exported."""
        import torch
        import torchao.quantization.pt2e.quantizer.x86_inductor_quantizer as x86  # also registers Inductor's int8 passes
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

        quantizer = x86.X86InductorQuantizer().set_global(x86.get_default_x86_inductor_quantization_config())
        if kept:
            quantizer.set_module_name_qconfig(kept, None)
        example = example_input(self.config.input_form, 2, self.config.imgsz)
        prepared = prepare_pt2e(exported(module, example).module(), quantizer)
        with torch.no_grad():
            for image in images:
                prepared(torch.from_numpy(image))
        return exported(convert_pt2e(prepared), example)
