"""What one model's build asks for, as the planner and every stage read it: the build request and the INT8 accuracy
gate's settings. Apart from the planner (pipeline.py) so that stages configure themselves from it
(``Stage.planned``) without importing the planner."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from yolo_optimize.building.held_out import ImageSet
from yolo_optimize.checkpoint import ModelSource
from yolo_optimize.metadata import FLOAT_INPUT


@dataclass(frozen=True)
class GateConfig:
    """The images to gate on (never the evaluation set, never a calibration image), the labelled images the
    accuracy-aware route may tune on (never a gate image; None: none labelled), how the gate's images were chosen,
    and the largest drop allowed, in points."""

    images: ImageSet
    tuning: ImageSet | None
    held_out: str
    max_map_drop: float


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
    check_on: tuple[str, ...] = ()  # ARM cores every artifact is also checked on (arm/), with the ARM side's pins:
    arm_pins: tuple[str, ...] = ()
    input_form: str = FLOAT_INPUT  # what every exported artifact takes (loading.INPUT_FORMS)
    # the content of every data file the request names (images with their labels, annotation files), by path: what
    # the nodes' cache keys take of them (contents.py)
    contents: Mapping[str, str] = field(default_factory=dict)

    @property
    def int8_gate(self) -> GateConfig:
        """The gate an INT8 stage is planned with: the planner plans INT8 only for a request that has one."""
        if self.gate is None:
            raise RuntimeError("an INT8 stage was planned for a request without a gate")
        return self.gate
