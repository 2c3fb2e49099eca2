"""The checks of a build's options that need neither a cluster nor the checkpoint: run first, so that what the user
got wrong is a ``UserError`` before anything is reached, read or written."""

from __future__ import annotations

from yolo_optimize.artifact import check_writable
from yolo_optimize.building.options import BuildOptions
from yolo_optimize.declaring import LOCAL
from yolo_optimize.errors import UserError
from yolo_optimize.families.suppression import NmsSettings
from yolo_optimize.formats import nms_targets, uint8_targets
from yolo_optimize.metadata import UINT8_INPUT


def check_options(options: BuildOptions) -> None:
    """What can be checked before a cluster is reached or the checkpoint is read (its family's imports take seconds):
    a model named, an input form its targets take, --out writable, the image folders present, INT8's calibration
    images given."""
    from yolo_optimize.images import list_images

    if not options.model:
        raise UserError("no model: name one (yolov5n, a .pt path...) on the command line or as 'model' in the config")
    check_input_form(options.input, options.targets)
    check_nms_targets(options.nms_settings(), options.targets)
    check_writable(options.out)
    if options.result is not None and options.result.is_dir():
        raise UserError(f"--result {options.result} is a folder: name the JSON file to write")
    for folder in (options.parity_data, options.gate_data):
        if folder is not None:
            list_images(folder)
    if "int8" in options.precisions:
        list_images(options.calibration_folder())
    check_arm_side(options)


def check_arm_side(options: BuildOptions) -> None:
    """``--check-on`` runs on this machine's ARM side (arm/side.py): refused where it is not ready, and with nodes
    built on a cluster's machines, which would each need their own."""
    from yolo_optimize.arm.side import ArmSide

    if not options.check_on:
        return
    if options.executor != LOCAL:
        raise UserError("--check-on checks on this machine's emulated ARM cores: build with --executor local")
    ArmSide.configured().require("--check-on")


def check_input_form(input_form: str, targets: tuple[str, ...]) -> None:
    """TensorRT engines take float input here (their uint8 input handling is unverified without a GPU)."""
    other = [t for t in targets if t not in uint8_targets()]
    if input_form == UINT8_INPUT and other:
        raise UserError(f"--input uint8 is built for {', '.join(uint8_targets())}, not {', '.join(other)}: build "
                        f"those with --input float")


def check_nms_targets(nms: NmsSettings | None, targets: tuple[str, ...]) -> None:
    """NMS inside the graph is built for the formats whose runtimes run it here (TensorRT's is unverified without a
    GPU)."""
    other = [t for t in targets if t not in nms_targets()]
    if nms is not None and other:
        raise UserError(f"--nms is built for {', '.join(nms_targets())}, not {', '.join(other)}: build those "
                        f"without it")
