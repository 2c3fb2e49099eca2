"""What every INT8 stage is given: calibration inputs preprocessed as evaluation does, and its gate."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from yolo_optimize.artifact import Manifest
from yolo_optimize.families.base import Family
from yolo_optimize.optimize.gate import GateConfig


def calibration_inputs(family: Family, images: tuple[str, ...], imgsz: int) -> list[np.ndarray]:
    """One float32 [1, 3, imgsz, imgsz] input per calibration image, preprocessed like every evaluation."""
    from yolo_optimize.images import to_input

    return [to_input(family.preprocess(Path(p), imgsz).pixels[None]) for p in images]


@dataclass(frozen=True)
class Int8Config:
    """What every INT8 stage is given: the input size, the calibration images and the gate."""

    imgsz: int
    calib_images: tuple[str, ...]
    gate: GateConfig


def candidate_manifest(parent: Manifest, *, node: str, precision: str, entry: str) -> Manifest:
    """An unwritten manifest that lets a runner load a candidate before it is published."""
    return replace(parent, node=node, precision=precision, entry=entry, files={}, parity=None)
