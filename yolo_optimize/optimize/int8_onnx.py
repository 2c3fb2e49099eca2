"""INT8 ONNX: NNCF's ONNX backend writes a QDQ graph, completed so ONNX Runtime runs it in int8, the Detect
head's decode in float (its output convolutions on integer GEMMs with float outputs: optimize/integer_head.py).

NNCF quantizes the inputs of operations; ONNX Runtime computes a convolution in int8 only when its
output is quantized too, so the graph is completed for it (optimize/onnxruntime_fusion.py): without
that, ONNX Runtime dequantizes every convolution and the file runs slower than FP32.

Weights are signed 8-bit, symmetric per channel; activations unsigned 8-bit. How many weight
bits depends on the CPU that will run it: ONNX Runtime's u8 x s8 kernels are exact on CPUs
with VNNI, but on CPUs without it (AVX2 only) they add pairs of u8 x s8 products in
16 bits, which saturates for full 8-bit weights. There the weights are kept to 7 bits
(NNCF's overflow fix on every layer), which cannot saturate; on VNNI CPUs they use all
8 bits, and the file says in its metadata that it needs VNNI to compute exactly.
Measured on this project's AVX2-only host (bench/archive/int8_recipes/onnx_int8_routes.py): this recipe lost
less mAP than ONNX Runtime's own quantize_static with every calibration and
sensitivity option the project tried, and the completed graph no more than NNCF's own (README).
Activation ranges come from NNCF's histogram estimator, as openvino-int8's do, where at least HISTOGRAM_FROM_IMAGES
images calibrate them; from fewer, NNCF's default (min-max) ranges. Measured there
(bench/archive/int8_recipes/onnx_int8_ranges.py, the build's own recipe at 16-64 calibration images, scored on the 64
held-out gate images and on coco_val128): from 24 images on the histogram lost 0.2-1.2 points less on the gate, and at
the default 64 also 0.95 less on coco_val128 (none lost); from 16 it lost 1.6 points more on the gate, min-max ranges of
few images being tighter.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from yolo_optimize.host.cpu import cpu_facts
from yolo_optimize.metadata import ArtifactMetadata
from yolo_optimize.optimize.calibration import Int8Config, float_tail
from yolo_optimize.optimize.nncf_int8 import NncfInt8
from yolo_optimize.optimize.onnx_io import save_onnx
from yolo_optimize.optimize.onnxruntime_fusion import fuse_for_onnxruntime

if TYPE_CHECKING:
    from yolo_optimize.building.request import BuildRequest

VNNI_NOTE = "8-bit weights: exact on CPUs with VNNI (AVX512-VNNI, AVX-VNNI, AMX); may saturate on AVX2-only CPUs"
NO_VNNI_NOTE = "7-bit weights (NNCF overflow fix): exact on every x86 CPU"
HISTOGRAM_FROM_IMAGES = 32  # calibration images from which activation ranges are histograms (module docstring)
HISTOGRAM_ROUTE = "NNCF MIXED, histogram activation ranges, fast bias correction"


@dataclass(frozen=True)
class OnnxInt8Config(Int8Config):
    weight_bits: int  # 8 where the building CPU has VNNI, 7 where it has not (see the module docstring)
    precision: str = "int8"
    stem_space_to_depth: bool = True  # the strided stem rewritten for integer kernels (optimize/space_to_depth.py)
    integer_head: bool = True  # the anchor head's output convolutions as integer GEMMs, float out (integer_head.py)


class OnnxInt8(NncfInt8):
    name = "onnx-int8"
    revision = 10  # 3: NNCF's ONNX backend instead of ONNX Runtime's quantize_static; 4: the gate's metric per task;
    #                5: completed for ONNX Runtime's int8 kernels (optimize/onnxruntime_fusion.py); 6: the stem as
    #                space-to-depth, a uint8 input read on its own grid; 7: the anchor head's convolutions on integer
    #                GEMMs (optimize/integer_head.py); 8: activations per tensor (recipes); 9: convolutions without
    #                a bias completed too, and those reading a Split (YOLOv8's C2f); 10: histogram activation ranges
    #                from HISTOGRAM_FROM_IMAGES calibration images
    tools = ("onnx", "onnxruntime", "nncf")
    target = "onnx"
    config: OnnxInt8Config

    @classmethod
    def planned(cls, request: BuildRequest, precision: str) -> OnnxInt8:
        return cls(OnnxInt8Config(request.imgsz, request.calib_images, request.int8_gate,
                                  8 if request.int8_vnni else 7))

    def recipes(self) -> list[tuple[str, Any]]:
        """NNCF's defaults but three: histogram activation ranges from HISTOGRAM_FROM_IMAGES calibration images (the
        module docstring), the overflow fix where weights take 7 bits, and activations on one grid per tensor (NNCF
        quantizes a depthwise convolution's input per channel, which ONNX Runtime's QLinearConv refuses at run
        time: RT-DETR's HGNet backbone). NNCF's default ranges where a histogram cannot be made (an activation too
        large for 2048 finite bins, as in random-weights models)."""
        from nncf.quantization.advanced_parameters import (
            AdvancedQuantizationParameters,
            OverflowFix,
            QuantizationParameters,
        )
        from nncf.quantization.range_estimator import RangeEstimatorParametersSet as Ranges

        fix = OverflowFix.ENABLE if self.config.weight_bits == 7 else OverflowFix.DISABLE
        default_ranges = AdvancedQuantizationParameters(
            overflow_fix=fix, activations_quantization_params=QuantizationParameters(per_channel=False))
        if len(self.config.calib_images) < HISTOGRAM_FROM_IMAGES:
            return [(self.route, default_ranges)]
        histogram = replace(default_ranges, activations_range_estimator_params=Ranges.HISTOGRAM)
        return [(HISTOGRAM_ROUTE, histogram), (self.route, default_ranges)]

    def rewritten(self, model: Any) -> tuple[Any, dict[str, Any]]:
        facts: dict[str, Any] = {"integer_head": self.config.integer_head}
        if not self.config.stem_space_to_depth:
            return model, facts
        from yolo_optimize.optimize.space_to_depth import rewrite_strided_stems

        return model, {"space_to_depth": rewrite_strided_stems(model), **facts}

    def for_runtime(self, quantized: Any, feeds: list[Any], threads: int) -> Any:
        fuse_for_onnxruntime(quantized, feeds, threads)
        if self.config.integer_head:
            from yolo_optimize.optimize.integer_head import integer_head

            integer_head(quantized, feeds, threads, self.config.weight_bits)
        return quantized

    def cpu_metadata(self) -> dict[str, Any]:
        needs_vnni = self.config.weight_bits == 8
        return {"weight_bits": self.config.weight_bits, "requires_vnni": needs_vnni,
                "cpu_note": VNNI_NOTE if needs_vnni else NO_VNNI_NOTE, "built_on_cpu": cpu_facts()}

    def model_input(self, images: np.ndarray) -> Any:
        return {"images": images}

    def read(self, path: Path) -> Any:
        import onnx

        return onnx.load(str(path))

    def float_ops(self, model: Any, float_part: list[str]) -> list[str]:
        return float_nodes(model, float_part)

    def save(self, model: Any, path: Path, metadata: ArtifactMetadata) -> None:
        save_onnx(model, path, metadata)

    def outputs(self, model: Any, inputs: list[Any]) -> list[np.ndarray]:
        import onnxruntime as ort

        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return [session.run(None, item)[0] for item in inputs]


def float_nodes(model: Any, float_part: list[str]) -> list[str]:
    """The nodes of an ONNX ``model`` that INT8 passes keep out of their quantizers: those of the export's
    ``float_part`` (the family's float module) with every node computed from them (what reads the decoded boxes, such
    as NMS, is no place for 8 bits either) and every node only they read (the shape arithmetic of their reshapes),
    less those that still feed a convolution. So a detector keeps its head's output convolutions and the decode after
    them (quantizing the decode squashes the sigmoid confidences and the box arithmetic; quantizing the output
    convolutions rounds the raw box and class logits: 1.5 points of yolov5n's mAP50-95 on the coco128 gate with them
    in float, 2.6 without), while a head that begins with convolutions of its own (Ultralytics' ``Detect``) has those
    quantized. Where an INT8 file runs the kept convolutions as integer GEMMs that write float:
    optimize/integer_head.py."""
    nodes = list(model.graph.node)  # topologically sorted: a producer before its readers
    producer = {output: node.name for node in nodes for output in node.output}
    readers: dict[str, list[str]] = {node.name: [] for node in nodes}
    for node in nodes:
        for name in node.input:
            if name in producer:
                readers[producer[name]].append(node.name)
    inputs = {node.name: [producer[name] for name in node.input if name in producer] for node in nodes}
    return float_tail(float_part, [node.name for node in nodes], inputs, readers,
                      {node.name for node in nodes if node.op_type == "Conv"})
