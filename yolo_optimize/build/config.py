"""Build options: one typed record shared by the CLI, the Python API and TOML config files, checked in one place
(the parsers, config files and precedence: options.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from yolo_optimize.cluster.nodes import parse_selectors
from yolo_optimize.errors import UserError
from yolo_optimize.families.nms import NmsSettings
from yolo_optimize.families.ultralytics import ONE_TO_MANY, ONE_TO_ONE
from yolo_optimize.formats import (
    DEFAULT_TARGETS,
    parse_batch_sizes,
    parse_image_sizes,
    parse_precisions,
    parse_targets,
)
from yolo_optimize.host.devices import DEVICES
from yolo_optimize.metadata import FLOAT_INPUT, INPUT_FORMS
from yolo_optimize.options import (
    EXECUTORS,
    LOCAL,
    checked_values,
    choice,
    comma,
    flag,
    integer,
    layered,
    number,
    optional,
    path,
    text,
)


@dataclass(frozen=True)
class BuildOptions:
    """Everything ``optimize build`` takes (``optimize build --help`` says what each means)."""

    model: str = ""
    targets: tuple[str, ...] = DEFAULT_TARGETS
    precisions: tuple[str, ...] = ("fp32", "fp16")
    imgsz: tuple[int, ...] = ()  # () = the family's default
    batch_sizes: tuple[int, ...] = (1, 8)
    out: Path = Path("artifacts")
    jobs: int = 2
    force: bool = False
    verify: bool = False
    random_weights: bool = False
    weights_dir: Path | None = None
    device: str = "auto"
    opset: int = 18
    parity_data: Path | None = None
    parity_images: int = 4
    calib_data: Path | None = None
    calib_images: int = 128
    gate_data: Path | None = None
    gate_images: int | None = None
    max_map_drop: float = 1.0
    input: str = FLOAT_INPUT
    head: str = ""  # "": the model's default head (one-to-one for YOLO26 and YOLOv10)
    nms: bool = False
    nms_conf: float | None = None  # None: NmsSettings' defaults
    nms_iou: float | None = None
    max_det: int | None = None
    nms_multi_label: bool = False
    executor: str = LOCAL
    ray_address: str | None = None  # None: "auto", the cluster this machine is part of
    on: tuple[str, ...] = ()  # label=value selectors of the building nodes (Ray)
    result: Path | None = None  # where every node's result is written as JSON (BuildResult.to_json)

    def updated(self, values: Mapping[str, Any], origin: str) -> BuildOptions:
        """These options with ``values`` (keys as in Python or on the command line) checked and applied."""
        return replace(self, **checked_values(values, PARSERS, origin, DESCRIPTIONS))

    def calibration_folder(self) -> Path:
        """``--calib-data``, which INT8 needs: its absence is a UserError."""
        if self.calib_data is None:
            raise UserError("INT8 needs real calibration images: pass --calib-data DIR (e.g. ../shared/assets/coco128)")
        return self.calib_data

    def nms_settings(self) -> NmsSettings | None:
        """The in-graph NMS asked for (``--nms``), None without it; a setting without ``--nms`` is a UserError."""
        given = {"conf": self.nms_conf, "iou": self.nms_iou, "max_det": self.max_det,
                 "multi_label": self.nms_multi_label or None}
        set_: dict[str, Any] = {key: value for key, value in given.items() if value is not None}
        if not self.nms:
            if set_:
                raise UserError(f"{', '.join('--' + NMS_OPTIONS[key] for key in set_)} set without --nms: add --nms "
                                f"to put NMS inside the artifacts")
            return None
        return NmsSettings(**set_)


def build_options(config: Path | Mapping[str, Any] | None, given: Mapping[str, Any], given_from: str) -> BuildOptions:
    """The defaults, overridden by ``config`` (a TOML file or a mapping), overridden by ``given``: the CLI's and the
    API's one way to the options, each value checked and a bad one named with where it came from."""
    return layered(BuildOptions(), config, given, given_from)


def fraction(value: Any) -> float:
    """A number in (0, 1]: a score or an overlap."""
    parsed = number(0, above=True)(value)
    if parsed > 1:
        raise UserError(f"must be at most 1, got {value!r}")
    return parsed


PARSERS: dict[str, Callable[[Any], Any]] = {
    "model": lambda value: text(str(value)) if isinstance(value, Path) else text(value),
    "targets": lambda value: tuple(parse_targets(comma(value))),
    "precisions": lambda value: tuple(parse_precisions(comma(value))),
    "imgsz": lambda value: parse_image_sizes(comma(value)),
    "batch_sizes": lambda value: parse_batch_sizes(comma(value)),
    "out": path, "jobs": integer(1), "force": flag, "verify": flag, "random_weights": flag, "weights_dir": path,
    "device": choice(DEVICES), "opset": integer(18), "parity_data": path, "parity_images": integer(1),
    "calib_data": path, "calib_images": integer(1), "gate_data": path, "gate_images": optional(integer(1)),
    "max_map_drop": number(), "input": choice(INPUT_FORMS), "executor": choice(EXECUTORS),
    "head": choice(("", ONE_TO_ONE, ONE_TO_MANY)), "nms": flag, "nms_conf": optional(fraction),
    "nms_iou": optional(fraction), "max_det": optional(integer(1)), "nms_multi_label": flag,
    "ray_address": optional(text),
    "on": lambda value: parse_selectors(value if isinstance(value, list) else text(value)),
    "result": path,
}
NMS_OPTIONS = {"conf": "nms-conf", "iou": "nms-iou", "max_det": "max-det", "multi_label": "nms-multi-label"}
DESCRIPTIONS = {"targets": "a list of targets", "precisions": "a list of precisions", "imgsz": "a list of sizes",
                "batch_sizes": "a list of batch sizes"}
