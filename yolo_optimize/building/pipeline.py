"""The build graph for one model, planned from the format table's steps (formats.py): ONNX is the parent of
OpenVINO and TensorRT.

    load ─┬─ reference (PyTorch FP32 outputs for parity; a parent of every artifact)
          ├─ torchscript-fp32 / torchscript-fp16
          ├─ aoti-fp32 ── aoti-int8 (PT2E, gated);  aoti-bf16 (AOTInductor packages)
          ├─ torch-tensorrt-fp32 / torch-tensorrt-fp16 (torch.export + torch_tensorrt.dynamo.compile)
          └─ onnx-export ── onnx-fp32 (simplified) ─┬─ onnx-fp16 ── tensorrt-fp16
                                                    ├─ onnx-int8 (NNCF QDQ, gated)
                                                    ├─ .cache/onnx-int8-tensorrt (symmetric QDQ, gated) ── tensorrt-int8
                                                    ├─ openvino-fp32 ── openvino-int8 (NNCF, gated)
                                                    ├─ openvino-fp16 / openvino-bf16
                                                    └─ tensorrt-fp32
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from yolo_optimize.building.dag import Node
from yolo_optimize.building.loading import LoadConfig, LoadStage
from yolo_optimize.building.parity import ReferenceConfig, ReferenceStage
from yolo_optimize.building.request import BuildRequest
from yolo_optimize.building.stage import (
    MODEL,
    REFERENCE,
    SOURCE,
    Stage,
    StageContext,
    StageOutput,
)
from yolo_optimize.formats import LOAD, Step, format_named, formats, imported


class PlannedStage(Protocol):
    """What a format row's step names: a Stage class that configures itself from the build request."""

    @classmethod
    def planned(cls, request: BuildRequest, precision: str) -> Stage: ...


def plan(request: BuildRequest) -> list[Node]:
    """The nodes the request needs, parents before children: the model, its parity reference, every requested
    target x precision a format row's steps make (INT8 only with ``request.gate``) and the nodes they are made from;
    a requested pair no step makes is a node that shows why it is skipped."""
    steps = _usable_steps(request)
    wanted = {f"{t}-{p}" for t in request.targets for p in request.precisions} & steps.keys()
    needed = _with_parents(wanted, steps)
    nodes = [
        Node(LOAD, LoadStage(LoadConfig()), {}, f".cache/{LOAD}"),
        Node("reference", ReferenceStage(ReferenceConfig(request.imgsz, request.parity_images, request.batch_sizes,
                                                        request.device, request.check_on, request.arm_pins)),
             {MODEL: LOAD}, ".cache/reference"),
    ]
    nodes += [_node(name, step, request, name in wanted) for name, step in steps.items() if name in needed]
    return nodes + _unsupported(request)


def _usable_steps(request: BuildRequest) -> dict[str, Step]:
    """Every step of the table by the node it makes, in table order (parents first); gated ones need a gate."""
    return {step.node_of(row.target): step for row in formats().values() for step in row.steps
            if request.gate or not step.gated}


def _with_parents(names: set[str], steps: dict[str, Step]) -> set[str]:
    needed: set[str] = set()
    while names:
        needed |= names
        names = {steps[name].parent for name in names if steps[name].parent != LOAD} - needed
    return needed


def _node(name: str, step: Step, request: BuildRequest, requested: bool) -> Node:
    """The step's stage as the request configures it, wired to its parent (and, if it reads it, the reference)."""
    stage_class: PlannedStage = imported(step.stage)
    stage = stage_class.planned(request, step.precision)
    inputs = {MODEL if step.parent == LOAD else SOURCE: step.parent}
    if REFERENCE in stage.inputs:
        inputs[REFERENCE] = "reference"
    return Node(name, stage, inputs, f".cache/{name}" if step.intermediate else name, requested=requested)


def _unsupported(request: BuildRequest) -> list[Node]:
    """Requested target x precision pairs that no stage produces: shown as skipped, with the reason."""
    def reason(target: str, precision: str) -> str:
        supported = ", ".join(format_named(target).precisions)
        return f"{precision.upper()} is not available for {target} (it supports {supported})"

    return [Node(f"{t}-{p}", Unsupported(UnsupportedConfig(reason(t, p))), {}, f"{t}-{p}", requested=True)
            for t in request.targets for p in request.precisions if p not in format_named(t).precisions]


@dataclass(frozen=True)
class UnsupportedConfig:
    reason: str


class Unsupported(Stage):
    name = "unsupported"
    inputs = ()
    tools = ()

    def unavailable_reason(self, device: str) -> str | None:
        return self.config.reason

    def run(self, ctx: StageContext) -> StageOutput:
        raise AssertionError(self.config.reason)
