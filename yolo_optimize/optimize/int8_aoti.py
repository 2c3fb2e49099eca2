"""INT8 AOTInductor packages: PyTorch's own post-training quantization (PT2E with the x86 Inductor quantizer of
torchao), compiled ahead of time like every ``aoti`` artifact, gated like every INT8 artifact.

The recipe is PyTorch's for x86 CPUs: the exported program is annotated by ``X86InductorQuantizer``
(u8 activations from histogram ranges, s8 symmetric per-channel weights), calibrated on every
``--calib-images`` image, converted, exported again and compiled with freezing, which lowers each
quantized convolution (with its SiLU) onto oneDNN's int8 kernels (VNNI where the CPU has it). The
family's float module (the Detect head) is left unannotated, so it stays in float32 as in every INT8
recipe here. The gate scores the compiled package through its runner, as it will be measured.

Without VNNI (AVX2, or AVX-512 before Cascade Lake) oneDNN multiplies u8 by s8 with instructions
whose 16-bit pair sums saturate: with oneDNN held to AVX2 or to AVX-512 without VNNI, yolov5n lost
5 points of mAP50-95 on coco_val128 (bench/archive/int8_recipes/int8_without_vnni.py). There the recipe takes torchao's
documented remedy, ``reduce_range``: activations on 7 bits (0..127), so no pair sum can saturate
(no measurable loss). The building CPU decides (``reduce_range`` is in the cache key, like ONNX
INT8's weight bits).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from yolo_optimize.building.loading import example_input, export_module
from yolo_optimize.building.stage import REFERENCE, SOURCE, Stage, StageContext, StageOutput
from yolo_optimize.export.aoti import bound_cpu, cannot_compile, compile_package, exported
from yolo_optimize.families import family_named
from yolo_optimize.host.cpu import cpu_facts
from yolo_optimize.metadata import FLOAT_INPUT
from yolo_optimize.optimize.calibration import Int8Config, gated_int8, int8_metadata

if TYPE_CHECKING:
    from yolo_optimize.building.request import BuildRequest

ROUTE = "PT2E, X86InductorQuantizer defaults (torchao)"
REDUCED_RANGE_ROUTE = "PT2E, X86InductorQuantizer with 7-bit activations (torchao's reduce_range: no VNNI)"


@dataclass(frozen=True)
class AotiInt8Config(Int8Config):
    input_form: str = FLOAT_INPUT
    precision: str = "int8"
    reduce_range: bool = False  # 7-bit activations: the building CPU has no VNNI (module docstring)


class AotiInt8(Stage):
    """Quantizes the family's export module (PT2E), compiles it and gates it against its FP32 package (SOURCE)."""

    name = "aoti-int8"
    inputs = (SOURCE, REFERENCE)
    tools = ("torch", "torchao")
    target = "aoti"
    config: AotiInt8Config

    @classmethod
    def planned(cls, request: BuildRequest, precision: str) -> AotiInt8:
        return cls(AotiInt8Config(request.imgsz, request.calib_images, request.int8_gate, request.input_form,
                                  reduce_range=not request.int8_vnni))

    def environment(self) -> dict[str, str]:
        return bound_cpu()

    def unavailable_reason(self, device: str) -> str | None:
        return cannot_compile(device)

    def run(self, ctx: StageContext) -> StageOutput:
        parent = ctx.manifest(SOURCE)
        family = family_named(ctx.source.family)
        module = export_module(ctx.source, self.config.input_form)
        kept = family.float_module(module)
        route = REDUCED_RANGE_ROUTE if self.config.reduce_range else ROUTE
        metadata = int8_metadata(parent, kept, route)

        def write(images: list[np.ndarray]) -> None:
            program = self._quantized(module, kept, images, warm_up=family.export_warm_up)
            compile_package(program, ctx.out_dir / str(parent.entry), metadata)

        record = gated_int8(ctx, self.name, self.config, family, metadata, route, write)
        return StageOutput(entry=parent.entry, metadata=metadata.to_dict(),
                           info={"gate": record.result(self.config.calib_images),
                                 "kept_in_float": metadata.kept_in_float, "built_on_cpu": cpu_facts()})

    def _quantized(self, module: Any, kept: str | None, images: list[np.ndarray], *, warm_up: bool) -> Any:
        """The quantized program: annotated (``kept`` left in float), calibrated on ``images``, converted, exported."""
        import torch
        import torchao.quantization.pt2e.quantizer.x86_inductor_quantizer as x86  # registers Inductor's int8 passes
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

        config = x86.get_default_x86_inductor_quantization_config(reduce_range=self.config.reduce_range)
        quantizer = x86.X86InductorQuantizer().set_global(config)
        if kept:
            quantizer.set_module_name_qconfig(kept, None)
        example = example_input(self.config.input_form, 2, self.config.imgsz)
        graph = _one_partition_per_layer(exported(module, example, warm_up=warm_up).module())
        prepared = prepare_pt2e(_accumulators_of_their_own(_constant_scalars_folded(graph)), quantizer)
        with torch.no_grad():
            for image in images:
                prepared(torch.from_numpy(image))
        return exported(convert_pt2e(prepared), example)


def _one_partition_per_layer(graph_module: Any) -> Any:
    """The exported graph with each node of a torch.nn layer (convolution, activation...) its own source partition,
    as the quantizer expects.

    A layer whose forward was replaced on the instance (Ultralytics' fused ``Conv`` calls ``self.conv`` and
    ``self.act`` from ``forward_fuse``) is recorded by export under its attributes' names alone ('conv', 'act'), the
    same for every such layer, and the quantizer's partition finder then takes all of them for one layer with many
    outputs ("Input partition has more than one output node"). Each such node is named its own source here; the
    module path that keeps the float module out of the quantizer is left as it is."""
    import importlib

    for node in graph_module.graph.nodes:
        stack = node.meta.get("nn_module_stack")
        if node.op != "call_function" or "source_fn_stack" in node.meta or not stack:
            continue
        kind = list(stack.values())[-1][1]
        if isinstance(kind, str) and kind.startswith("torch.nn.modules."):
            module, _, name = kind.rpartition(".")
            kind = getattr(importlib.import_module(module), name)
        if isinstance(kind, type) and kind.__module__.startswith("torch.nn.modules."):
            node.meta["source_fn_stack"] = [(node.name, kind)]
    return graph_module


def _accumulators_of_their_own(graph_module: Any) -> Any:
    """The exported graph with a copy of every view a convolution's output is added to.

    Inductor fuses a quantized convolution with the addition after it by accumulating into the other operand in place,
    and refuses (an AssertionError, no fallback) when that operand is a view of another tensor ("QConv Binary
    Inplace Fusion requires accum is not an alias"): YOLO11's and YOLO26's attention adds a convolution's output
    to a split of its input. A copy of that operand (a few hundred KB) keeps the fusion."""
    import operator

    import torch

    aten = torch.ops.aten
    views = {operator.getitem, aten.view.default, aten.reshape.default, aten.slice.Tensor, aten.permute.default,
             aten.transpose.int, aten.unsqueeze.default, aten.squeeze.dim, aten.expand.default}
    graph = graph_module.graph
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target != aten.add.Tensor or len(node.args) != 2:
            continue
        operands = [a for a in node.args if isinstance(a, torch.fx.Node)]
        if len(operands) != 2 or not any(a.target == aten.conv2d.default for a in operands):
            continue
        for operand in operands:
            if operand.target in views:
                with graph.inserting_before(node):
                    copy = graph.call_function(aten.clone.default, (operand,))
                copy.meta = {key: value for key, value in operand.meta.items() if key in ("val", "tensor_meta")}
                node.replace_input_with(operand, copy)
    graph_module.recompile()
    return graph_module


def _constant_scalars_folded(graph_module: Any) -> Any:
    """The exported graph with every number read from an element of a constant tensor (``stride[i].item()``) written
    in as that number.

    Compiled with freezing, as INT8 packages are, such a tensor becomes a constant, and Inductor has no lowering that
    reads a constant's value back ("AssertionError: Constant" in ``_local_scalar_dense``): Ultralytics' Detect head
    fills its anchors' strides from its ``stride`` tensor this way."""
    import functools

    import torch

    aten = torch.ops.aten
    graph = graph_module.graph
    for node in list(graph.nodes):
        source = node.args[0] if node.target == aten.item.default else None
        if not (isinstance(source, torch.fx.Node) and source.target == aten.select.int
                and isinstance(source.args[0], torch.fx.Node) and source.args[0].op == "get_attr"):
            continue
        held: Any = source.args[0]  # the get_attr node checked above
        dim, index = source.args[1:]
        _written_in(node, functools.reduce(getattr, held.target.split("."), graph_module).select(dim, index).item())
        graph.erase_node(node)
    graph.eliminate_dead_code()
    graph_module.recompile()
    return graph_module


def _written_in(node: Any, value: float) -> None:
    """Every use of ``node`` replaced by ``value``."""
    import torch

    def swapped(arg: Any) -> Any:
        return value if arg is node else arg

    for user in list(node.users):
        user.args = torch.fx.node.map_arg(user.args, swapped)
        user.kwargs = torch.fx.node.map_arg(user.kwargs, swapped)
