"""INT8 OpenVINO IR with NNCF (the recipe in optimize/nncf_int8.py); OpenVINO picks its own int8 kernels per CPU.

Its own part of the recipe: activation ranges from NNCF's histogram estimator (the range that
minimizes the quantization error, not the mean of each image's extremes) and NNCF's full bias
correction, so that the Detect head's output convolutions can run in int8 too, only the decode
after them staying in float. With them in float (revision 6) the IR was 2.6% slower than the
same model quantized with NNCF's defaults at batch 1 on the Zen 4 VM; quantized with the default
ranges they lost 0.5 points of mAP50-95; with these ranges and bias correction they lose none
(issue 31, bench/archive/int8_peers/README.md "openvino-int8 against NNCF's defaults").

What the quantized IR keeps in float (the decode, and whatever the accuracy-aware route reverts)
computes in bf16 where the building CPU's OpenVINO bf16 kernels measure faster than its fp32 ones
(``limits/choices.py``: the cached ``optimize info`` rates, recorded beside the choice), in fp32
elsewhere: OpenVINO runs it by its ``INFERENCE_PRECISION_HINT``, which the IR's metadata
(``compile_config``) carries and the gate and every runner use. On the Zen 4 VM (bf16 at twice fp32)
that made yolov5n's INT8 IR 5-11% faster at batch 1 at no measurable cost in mAP (issue 21,
bench/archive/fastest_artifact/README.md); on an Intel Xeon with AVX-512 BF16 and no AMX, bf16 measures at half fp32 and
cost 7% (issue 31); without native bf16 OpenVINO would emulate it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from yolo_optimize.export.openvino import embed_metadata
from yolo_optimize.host.cpu import cpu_facts
from yolo_optimize.limits.choices import evidence_here
from yolo_optimize.metadata import ArtifactMetadata
from yolo_optimize.optimize.calibration import Int8Config, float_tail
from yolo_optimize.optimize.nncf_int8 import NncfInt8

if TYPE_CHECKING:
    from yolo_optimize.building.request import BuildRequest

FLOAT_HINTS = {"bf16": "bf16", "fp32": "f32"}  # the float parts' precision -> OpenVINO's hint
DEFAULT_RANGES_ROUTE = "NNCF MIXED, default activation ranges, bias correction"


@dataclass(frozen=True)
class OpenVinoInt8Config(Int8Config):
    float_precision: str = "fp32"  # what its float parts compute in: bf16 where it measures faster (limits/choices)
    precision: str = "int8"


class OpenVinoInt8(NncfInt8):
    name = "openvino-int8"
    revision = 7  # 2: Detect output convs in float; 3: the gate's bootstrap interval; 4: the gate's metric per task;
    #               5: float parts in bf16 on CPUs with native bf16; 6: ... where bf16 measures faster, the evidence
    #               kept; 7: histogram ranges and full bias correction, the output convs in int8
    tools = ("openvino", "nncf")
    target = "openvino"
    config: OpenVinoInt8Config
    route = "NNCF MIXED, histogram activation ranges, bias correction"
    fast_bias_correction = False

    @classmethod
    def planned(cls, request: BuildRequest, precision: str) -> OpenVinoInt8:
        return cls(OpenVinoInt8Config(request.imgsz, request.calib_images, request.int8_gate,
                                      request.int8_float_precision))

    def recipes(self) -> list[tuple[str, Any]]:
        """Histogram ranges; NNCF's default ranges where a histogram cannot be made (an activation whose values are
        too large for 2048 finite bins, as in random-weights models)."""
        from nncf.quantization.advanced_parameters import AdvancedQuantizationParameters
        from nncf.quantization.range_estimator import RangeEstimatorParametersSet as Ranges

        histogram = AdvancedQuantizationParameters(activations_range_estimator_params=Ranges.HISTOGRAM)
        return [(self.route, histogram), (DEFAULT_RANGES_ROUTE, None)]

    def cpu_metadata(self) -> dict[str, Any]:
        return {"float_precision": self.config.float_precision, "float_precision_evidence": evidence_here("openvino"),
                "built_on_cpu": cpu_facts(),
                "compile_config": {"INFERENCE_PRECISION_HINT": FLOAT_HINTS[self.config.float_precision]}}

    def read(self, path: Path) -> Any:
        import openvino as ov

        return ov.Core().read_model(str(path))

    def float_ops(self, model: Any, float_part: list[str]) -> list[str]:
        return decode_ops(model, float_part)

    def save(self, model: Any, path: Path, metadata: ArtifactMetadata) -> None:
        import openvino as ov

        embed_metadata(model, metadata)
        path.parent.mkdir(parents=True, exist_ok=True)
        ov.save_model(model, str(path), compress_to_fp16=False)

    def outputs(self, model: Any, inputs: list[Any]) -> list[np.ndarray]:
        return [np.asarray(model(x)[0]) for x in inputs]


def decode_ops(model: Any, float_part: list[str]) -> list[str]:
    """The ops of an OpenVINO ``model`` this recipe keeps in float: as ONNX's (optimize/int8_onnx.py ``float_nodes``:
    the export's ``float_part``, what is computed from it and what only it reads, less what still feeds a convolution)
    but without the output convolutions, which its ranges and bias correction keep accurate in int8 (the module
    docstring)."""
    ops = [op for op in model.get_ordered_ops() if op.get_type_name() not in ("Constant", "Parameter", "Result")]
    readers = {op.get_friendly_name(): [t.get_node().get_friendly_name() for out in op.outputs()
                                        for t in out.get_target_inputs() if t.get_node().get_type_name() != "Result"]
               for op in ops}
    inputs = {op.get_friendly_name(): [value.get_node().get_friendly_name() for value in op.input_values()]
              for op in ops}
    convolutions = {op.get_friendly_name() for op in ops if op.get_type_name() == "Convolution"}
    kept = float_tail(float_part, [op.get_friendly_name() for op in ops], inputs, readers, convolutions)
    return [name for name in kept if name not in convolutions]
