"""What every INT8 stage is given: calibration inputs preprocessed as evaluation does, and its gate."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from yolo_optimize.artifact import Manifest
from yolo_optimize.building.gate import Gate, GateRecord
from yolo_optimize.building.request import GateConfig
from yolo_optimize.building.stage import SOURCE, StageContext
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


def int8_metadata(parent: Manifest, kept: str | None, route: str) -> ArtifactMetadata:
    """An INT8 file's metadata: its FP32 parent's, in int8, with the module kept in float and the quantization route."""
    return replace(ArtifactMetadata.of(parent), precision="int8",
                   kept_in_float=[kept] if kept else []).with_facts({"quantization": route})


def gated_int8(ctx: StageContext, node: str, config: Int8Config, family: Family, metadata: ArtifactMetadata,
               route: str, write: Callable[[list[np.ndarray]], None]) -> GateRecord:
    """One route of a single-recipe INT8 stage: the FP32 parent (the stage's SOURCE) scored on the gate, the INT8
    file written into the stage's folder by ``write(calibration inputs)``, scored through its runner as it will be
    measured, and the gate required to pass (else the stage fails with the measured drop)."""
    parent = ctx.manifest(SOURCE)
    gate = Gate(config.gate.images, family, config.imgsz, ctx.threads)
    try:
        record = GateRecord(config.gate, gate.score(ctx.inputs[SOURCE], parent), gate)
        write(calibration_inputs(family, config.calib_images, config.imgsz, metadata.takes))
        record.add(route, gate.score(ctx.out_dir, candidate_manifest(parent, node=node, metadata=metadata)))
    finally:
        gate.close()
    record.require_pass()
    return record


def float_tail(part: list[str], order: list[str], inputs: dict[str, list[str]], readers: dict[str, list[str]],
               convolutions: set[str]) -> list[str]:
    """Of a graph's ops (named in topological ``order``, with the ops each reads and is read by), those an INT8 pass
    keeps in float: ``part`` (what an export recorded of the family's float module) with every op computed from it
    and every op read only by it, less those from which a convolution can still be reached
    (optimize/int8_onnx.py ``float_nodes``, optimize/int8_openvino.py ``decode_ops``)."""
    closed = set(part)
    for name in order:
        if any(source in closed for source in inputs[name]):
            closed.add(name)
    for name in reversed(order):
        if readers[name] and all(reader in closed for reader in readers[name]):
            closed.add(name)
    feeds_conv: dict[str, bool] = {}
    for name in reversed(order):
        feeds_conv[name] = any(reader in convolutions or feeds_conv[reader] for reader in readers[name])
    return [name for name in order if name in closed and not feeds_conv[name]]
