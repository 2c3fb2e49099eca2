"""The build graph for one model, declared explicitly: ONNX is the parent of OpenVINO and TensorRT.

    load ─┬─ reference (PyTorch FP32 outputs for parity; a parent of every artifact)
          ├─ torchscript-fp32 / torchscript-fp16
          ├─ aoti-fp32 ── aoti-int8 (PT2E, gated) / aoti-bf16 (AOTInductor packages)
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

from yolo_optimize.checkpoint import ModelSource
from yolo_optimize.dag import Node
from yolo_optimize.export.aoti import AotiCompile, AotiConfig
from yolo_optimize.export.onnx import OnnxExport, OnnxExportConfig
from yolo_optimize.export.openvino import OpenVinoConfig, OpenVinoExport
from yolo_optimize.export.tensorrt import TensorRTBuild, TensorRTConfig
from yolo_optimize.export.torch_tensorrt import (
    TorchTensorRTCompile,
    TorchTensorRTConfig,
)
from yolo_optimize.export.torchscript import TorchScriptConfig, TorchScriptExport
from yolo_optimize.formats import FORMATS
from yolo_optimize.loading import LoadConfig, LoadStage
from yolo_optimize.metadata import FLOAT_INPUT
from yolo_optimize.optimize.fp16 import OnnxFp16, OnnxFp16Config
from yolo_optimize.optimize.gate import GateConfig
from yolo_optimize.optimize.int8_aoti import AotiInt8, AotiInt8Config
from yolo_optimize.optimize.int8_onnx import OnnxInt8, OnnxInt8Config
from yolo_optimize.optimize.int8_openvino import OpenVinoInt8, OpenVinoInt8Config
from yolo_optimize.optimize.int8_tensorrt import TensorRTInt8Config, TensorRTInt8Qdq
from yolo_optimize.optimize.simplify import OnnxSimplify, SimplifyConfig
from yolo_optimize.parity import ReferenceConfig, ReferenceStage
from yolo_optimize.stage import (
    MODEL,
    REFERENCE,
    SOURCE,
    Stage,
    StageContext,
    StageOutput,
)

ONNX_CONSUMERS = ("onnx", "openvino", "tensorrt")


@dataclass(frozen=True)
class BuildRequest:
    source: ModelSource
    targets: tuple[str, ...]
    precisions: tuple[str, ...]
    imgsz: int
    batch_sizes: tuple[int, ...]
    opset: int
    device: str
    parity_images: tuple[str, ...]
    calib_images: tuple[str, ...] = ()
    gate: GateConfig | None = None
    int8_vnni: bool = True  # the building CPU has VNNI; without it u8 x s8 products can saturate, so ONNX INT8 takes
    # 7-bit weights (optimize/int8_onnx.py) and AOTInductor INT8 7-bit activations (optimize/int8_aoti.py)
    int8_float_precision: str = "fp32"  # OpenVINO INT8's float parts: bf16 where the CPU has it (int8_openvino.py)
    input_form: str = FLOAT_INPUT  # what every exported artifact takes (loading.INPUT_FORMS)


def plan(request: BuildRequest) -> list[Node]:
    """All nodes the request can touch, parents before children (INT8 nodes need ``request.gate``)."""
    r = request
    wanted = {f"{t}-{p}" for t in r.targets for p in r.precisions}
    nodes = [
        Node("load", LoadStage(LoadConfig()), {}, ".cache/load"),
        Node("reference", ReferenceStage(ReferenceConfig(r.imgsz, r.parity_images, r.batch_sizes)),
             {MODEL: "load"}, ".cache/reference"),
    ]
    if "torchscript" in r.targets:
        nodes += [_artifact("torchscript", p, TorchScriptExport(TorchScriptConfig(r.imgsz, p, r.device, r.input_form)),
                            {MODEL: "load"}, wanted) for p in r.precisions if p in FORMATS["torchscript"].precisions]
    if "aoti" in r.targets:
        nodes += [_artifact("aoti", p, AotiCompile(AotiConfig(r.imgsz, p, r.input_form)), {MODEL: "load"}, wanted)
                  for p in ("fp32", "bf16") if p in r.precisions or p == "fp32"]
        if "int8" in r.precisions and r.gate:
            config = AotiInt8Config(r.imgsz, r.calib_images, r.gate, r.input_form, reduce_range=not r.int8_vnni)
            nodes.append(_artifact("aoti", "int8", AotiInt8(config), _from("aoti-fp32"), wanted))
    if "torch-tensorrt" in r.targets:
        nodes += [_artifact("torch-tensorrt", p, TorchTensorRTCompile(TorchTensorRTConfig(r.imgsz, p, r.batch_sizes)),
                            {MODEL: "load"}, wanted) for p in r.precisions if p in FORMATS["torch-tensorrt"].precisions]
    if any(t in r.targets for t in ONNX_CONSUMERS):
        nodes.append(Node("onnx-export", OnnxExport(OnnxExportConfig(r.imgsz, r.opset, r.input_form)), {MODEL: "load"},
                          ".cache/onnx-export"))
        nodes.append(_artifact("onnx", "fp32", OnnxSimplify(SimplifyConfig(r.imgsz)), _from("onnx-export"), wanted))
    if "fp16" in r.precisions and ("onnx" in r.targets or "tensorrt" in r.targets):
        nodes.append(_artifact("onnx", "fp16", OnnxFp16(OnnxFp16Config()), _from("onnx-fp32"), wanted))
    if "int8" in r.precisions and "onnx" in r.targets and r.gate:
        config = OnnxInt8Config(r.imgsz, r.calib_images, r.gate, 8 if r.int8_vnni else 7)
        nodes.append(_artifact("onnx", "int8", OnnxInt8(config), _from("onnx-fp32"), wanted))
    if "openvino" in r.targets:
        float_precisions = [p for p in ("fp32", "fp16", "bf16") if p in r.precisions or p == "fp32"]
        nodes += [_artifact("openvino", p, OpenVinoExport(OpenVinoConfig(p)), _from("onnx-fp32"), wanted)
                  for p in float_precisions]
    if "int8" in r.precisions and "openvino" in r.targets and r.gate:
        config = OpenVinoInt8Config(r.imgsz, r.calib_images, r.gate, r.int8_float_precision)
        nodes.append(_artifact("openvino", "int8", OpenVinoInt8(config), _from("openvino-fp32"), wanted))
    if "int8" in r.precisions and "tensorrt" in r.targets and r.gate:
        config = TensorRTInt8Config(r.imgsz, r.calib_images, r.gate)
        nodes.append(Node(TensorRTInt8Qdq.name, TensorRTInt8Qdq(config), {**_from("onnx-fp32"), REFERENCE: "reference"},
                          f".cache/{TensorRTInt8Qdq.name}"))
    if "tensorrt" in r.targets:
        engine_sources = {"fp32": "onnx-fp32", "fp16": "onnx-fp16", "int8": TensorRTInt8Qdq.name}
        nodes += [_artifact("tensorrt", p, TensorRTBuild(TensorRTConfig(r.imgsz, p, r.batch_sizes)),
                            _from(engine_sources[p]), wanted)
                  for p in r.precisions if p in FORMATS["tensorrt"].precisions and (p != "int8" or r.gate)]
    return nodes + _unsupported(request)


def _unsupported(request: BuildRequest) -> list[Node]:
    """Requested target x precision pairs that no stage produces: shown as skipped, with the reason."""
    def reason(target: str, precision: str) -> str:
        supported = ", ".join(FORMATS[target].precisions)
        return f"{precision.upper()} is not available for {target} (it supports {supported})"

    return [Node(f"{t}-{p}", Unsupported(UnsupportedConfig(reason(t, p))), {}, f"{t}-{p}", requested=True)
            for t in request.targets for p in request.precisions if p not in FORMATS[t].precisions]


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


def _from(source: str) -> dict[str, str]:
    """A transforming stage's inputs: the artifact it transforms."""
    return {SOURCE: source}


def _artifact(target: str, precision: str, stage: Stage, inputs: dict[str, str], wanted: set[str]) -> Node:
    """A deployable node: its inputs plus the parity reference every artifact is checked against."""
    name = f"{target}-{precision}"
    return Node(name, stage, {**inputs, REFERENCE: "reference"}, name, requested=name in wanted)
