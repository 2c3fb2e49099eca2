"""Build options: one typed record, each field the option's one declaration, from which the command line, the Python
API and TOML config files take it (declaring.py: the declaration, config files and precedence; cli/click_options.py:
the click options)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from yolo_optimize.arm.cores import CORES_HELP, parse_cores
from yolo_optimize.building.executor import JOBS, SMALL_HOST_CPUS, SMALL_HOST_JOBS
from yolo_optimize.cluster.nodes import parse_selectors
from yolo_optimize.declaring import (
    EXECUTORS,
    LOCAL,
    FilePath,
    Flag,
    Listed,
    OneOf,
    Real,
    Text,
    Whole,
    checked_values,
    layered,
    option,
    parse_batch_sizes,
    parse_image_sizes,
)
from yolo_optimize.errors import UserError
from yolo_optimize.families.suppression import NmsSettings
from yolo_optimize.families.ultralytics import ONE_TO_MANY, ONE_TO_ONE
from yolo_optimize.formats import (
    DEFAULT_TARGETS,
    parse_precisions,
    parse_targets,
    targets_help,
)
from yolo_optimize.host.devices import DEVICES
from yolo_optimize.metadata import FLOAT_INPUT, INPUT_FORMS


@dataclass(frozen=True)
class BuildOptions:
    """Everything ``optimize build`` takes: each field is the option's one declaration (``declaring.option``)."""

    model: str = option("", Text(), on_command_line=False)  # the command's MODEL argument
    targets: tuple[str, ...] = option(DEFAULT_TARGETS, Listed(lambda text: tuple(parse_targets(text)),
                                                              "a list of targets"), targets_help)
    precisions: tuple[str, ...] = option(("fp32", "fp16"), Listed(lambda text: tuple(parse_precisions(text)),
                                                                  "a list of precisions"),
                                         "Comma list: fp32, fp16, bf16, int8.")
    imgsz: tuple[int, ...] = option((), Listed(parse_image_sizes, "a list of sizes"),
                                    "Square input size(s), multiples of 32, comma-separated; with several, each goes "
                                    "to <out>/<model>-<size>.",
                                    shown_default="the family's: 640 for detectors, 224 for classifiers")
    batch_sizes: tuple[int, ...] = option((1, 8), Listed(parse_batch_sizes, "a list of batch sizes"),
                                          "Batch sizes every artifact must accept.")
    out: Path = option(Path("artifacts"), FilePath())
    jobs: int | None = option(None, Whole(1), "Nodes built in parallel, each in its own process.",
                              shown_default=f"{SMALL_HOST_JOBS} on a host with {SMALL_HOST_CPUS} CPUs or fewer, else "
                                            f"{JOBS}")
    threads: int | None = option(None, Whole(1), "CPUs the build may use in all, shared by its --jobs nodes (at "
                                                 "least one thread each): the rest stay free on a machine shared with "
                                                 "other work.", shown_default="the CPUs this process may use")
    force: bool = option(False, Flag(), "Rebuild every node, cached or not.")
    verify: bool = option(False, Flag(), "Hash every file of every cached node again (by default a file whose size, "
                                         "inode and modification time are the ones recorded when it was built is "
                                         "trusted).")
    random_weights: bool = option(False, Flag(), "Architecture from the family's config, seeded random weights.")
    weights_dir: Path | None = option(None, FilePath(), "First place to look for <model>.pt.")
    device: str = option("auto", OneOf(DEVICES), shown_default="auto: cuda where a GPU is visible")
    opset: int = option(18, Whole(18), "ONNX opset.")
    parity_data: Path | None = option(None, FilePath(), "Images for the parity check.",
                                      shown_default="the images bundled with the model's package")
    parity_images: int = option(4, Whole(1))
    calib_data: Path | None = option(None, FilePath(), "Real images for INT8 calibration (e.g. coco128).")
    calib_images: int = option(128, Whole(1), "Calibration images used, at most (all of the calibration part, if it "
                                              "has fewer).")
    gate_data: Path | None = option(None, FilePath(), "Images for the INT8 accuracy gate (labelled for detectors), "
                                                      "sharing none with the calibration images; never the evaluation "
                                                      "set.",
                                    shown_default="half of --calib-data, held out of calibration")
    gate_images: int | None = option(None, Whole(1), "Gate on N of the gate's images.", shown_default="all")
    check_on: tuple[str, ...] = option((), Listed(parse_cores, "a list of ARM cores"),
                                       "Also run parity and the INT8 gate on these ARM cores' own kernels, emulated "
                                       f"({CORES_HELP}; `sudo optimize arm-setup` prepares them once): a file that "
                                       "fails there is not published.")
    max_map_drop: float = option(1.0, Real(), "Largest drop (points) of the gate metric an INT8 artifact may show: "
                                              "mAP50-95 for detectors, top-1 agreement with FP32 for classifiers.")
    input: str = option(FLOAT_INPUT, OneOf(INPUT_FORMS),
                        "What every exported artifact takes: float32 NCHW in [0, 1], or the prepared uint8 NHWC image "
                        "with the layout change and scaling inside the graph (INT8 ONNX then reads it on its first "
                        "grid); uint8 builds go to <out>/<model>-uint8.")
    head: str | None = option(None, OneOf((ONE_TO_ONE, ONE_TO_MANY)),
                              "YOLO26 and YOLOv10: the NMS-free one-to-one head (top-k in the graph, [B, 300, 6]) or "
                              "the one-to-many head that needs NMS (into <out>/<model>-one-to-many).",
                              shown_default=ONE_TO_ONE)
    nms: bool = option(False, Flag(), "NMS inside every artifact (detectors whose head needs it): images in, "
                                      "[B, max-det, 6] final detections out, for every image of a batch; into "
                                      "<out>/<model>-nms.")
    nms_conf: float | None = option(None, Real(0, 1, above=True), "With --nms: the score a detection needs to be kept.",
                                    shown_default="0.25, what the host-side decode keeps at deployment; 0.001 scores "
                                                  "mAP as validation does")
    nms_iou: float | None = option(None, Real(0, 1, above=True), "With --nms: the overlap above which the weaker box "
                                                                 "is suppressed.", shown_default="the family's")
    max_det: int | None = option(None, Whole(1), "With --nms: detections kept per image.", shown_default="300")
    nms_multi_label: bool = option(False, Flag(), "With --nms: keep a box once for every class scored above "
                                                  "--nms-conf, as mAP validation does.",
                                   shown_default="its best class only")
    executor: str = option(LOCAL, OneOf(EXECUTORS), "Where nodes build: this machine's processes, or a Ray cluster's "
                                                    "nodes (pip install -e \".[ray]\"; --out and the inputs at the "
                                                    "same path on every node).")
    ray_address: str | None = option(None, Text(), "The Ray cluster to connect to.",
                                     shown_default="auto, the one this machine is part of")
    on: tuple[str, ...] = option((), Listed(parse_selectors, "label=value selectors"),
                                 "With --executor ray: build only on nodes with these labels (label=value, comma "
                                 "list).")
    result: Path | None = option(None, FilePath(), "Also write every node's result to this JSON file (what the API's "
                                                   "build returns), whole, once the build ends; not when it is "
                                                   "refused or interrupted.")

    def updated(self, values: Mapping[str, Any], origin: str) -> BuildOptions:
        """These options with ``values`` (keys as in Python or on the command line) checked and applied."""
        return replace(self, **checked_values(values, BuildOptions, origin))

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


NMS_OPTIONS = {"conf": "nms-conf", "iou": "nms-iou", "max_det": "max-det", "multi_label": "nms-multi-label"}
