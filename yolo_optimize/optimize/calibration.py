"""What every INT8 stage is given: calibration inputs preprocessed as evaluation does, and its gate."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from yolo_optimize.artifact import Manifest
from yolo_optimize.build.request import GateConfig
from yolo_optimize.families.base import Family
from yolo_optimize.metadata import FLOAT32_NCHW, ArtifactMetadata, InputSpec


def calibration_inputs(family: Family, images: tuple[str, ...], imgsz: int,
                       spec: InputSpec = FLOAT32_NCHW) -> list[np.ndarray]:
    """One single-image batch per calibration image, preprocessed like every evaluation, in the form the model takes
    (``spec``: what its metadata says)."""
    from yolo_optimize.images import model_input

    return [model_input(family.preprocess(Path(p), imgsz).pixels[None], spec.prepared) for p in images]


@dataclass(frozen=True)
class Int8Config:
    """What every INT8 stage is given: the input size, the calibration images and the gate."""

    imgsz: int
    calib_images: tuple[str, ...]
    gate: GateConfig


def candidate_manifest(parent: Manifest, *, node: str, metadata: ArtifactMetadata,
                       entry: str | None = None) -> Manifest:
    """An unwritten manifest that lets a runner load a candidate before it is published: its ``metadata`` (precision,
    input, how to compile it) say how it runs; its file is named like its parent's unless ``entry`` says otherwise."""
    return replace(parent, node=node, precision=metadata.precision, entry=entry or parent.entry,
                   metadata=metadata.to_dict(), files={}, parity=None)
