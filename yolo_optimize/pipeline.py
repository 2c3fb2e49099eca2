"""The build graph for one model, declared explicitly: ONNX is the parent of OpenVINO and TensorRT.

    load ─┬─ reference (PyTorch FP32 outputs for parity; a parent of every artifact)
          ├─ torchscript-fp32 / torchscript-fp16
          └─ onnx-export ── onnx-fp32 (simplified) ─┬─ onnx-fp16 ── tensorrt-fp16
                                                    ├─ openvino-fp32 / openvino-fp16
                                                    └─ tensorrt-fp32
"""

from __future__ import annotations

from dataclasses import dataclass

from yolo_optimize.checkpoint import ModelSource
from yolo_optimize.dag import Node
from yolo_optimize.export.onnx import OnnxExport, OnnxExportConfig
from yolo_optimize.export.openvino import OpenVinoConfig, OpenVinoExport
from yolo_optimize.export.tensorrt import TensorRTBuild, TensorRTConfig
from yolo_optimize.export.torchscript import TorchScriptConfig, TorchScriptExport
from yolo_optimize.loading import LoadConfig, LoadStage
from yolo_optimize.optimize.fp16 import OnnxFp16, OnnxFp16Config
from yolo_optimize.optimize.simplify import OnnxSimplify, SimplifyConfig
from yolo_optimize.parity import ReferenceConfig, ReferenceStage
from yolo_optimize.stage import Stage

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


def plan(request: BuildRequest) -> list[Node]:
    """All nodes the request can touch, parents before children."""
    r = request
    wanted = {f"{t}-{p}" for t in r.targets for p in r.precisions}
    nodes = [
        Node("load", LoadStage(LoadConfig()), (), ".cache/load"),
        Node("reference", ReferenceStage(ReferenceConfig(r.imgsz, r.parity_images, r.batch_sizes)),
             ("load",), ".cache/reference"),
    ]
    if "torchscript" in r.targets:
        nodes += [_artifact("torchscript", p, TorchScriptExport(TorchScriptConfig(r.imgsz, p, r.device)),
                            ("load",), wanted) for p in r.precisions]
    if any(t in r.targets for t in ONNX_CONSUMERS):
        nodes.append(Node("onnx-export", OnnxExport(OnnxExportConfig(r.imgsz, r.opset)), ("load",), ".cache/onnx-export"))
        nodes.append(_artifact("onnx", "fp32", OnnxSimplify(SimplifyConfig(r.imgsz)), ("onnx-export",), wanted))
    if "fp16" in r.precisions and ("onnx" in r.targets or "tensorrt" in r.targets):
        nodes.append(_artifact("onnx", "fp16", OnnxFp16(OnnxFp16Config()), ("onnx-fp32",), wanted))
    if "openvino" in r.targets:
        nodes += [_artifact("openvino", p, OpenVinoExport(OpenVinoConfig(p)), ("onnx-fp32",), wanted)
                  for p in r.precisions]
    if "tensorrt" in r.targets:
        nodes += [_artifact("tensorrt", p, TensorRTBuild(TensorRTConfig(r.imgsz, p, r.batch_sizes)),
                            (f"onnx-{p}",), wanted) for p in r.precisions]
    return nodes


def _artifact(target: str, precision: str, stage: Stage, parents: tuple[str, ...], wanted: set[str]) -> Node:
    name = f"{target}-{precision}"
    return Node(name, stage, (*parents, "reference"), name, requested=name in wanted)
