"""The build's checks on emulated ARM cores (``--check-on``), after the same checks on this machine passed:
parity of every artifact whose runtime has an aarch64 wheel (its own kernels on the core, fed the very tensors x86
was fed, held to the tolerance of the precision it ran in there), and the INT8 gate (the held-out images read,
letterboxed and run on the core, the deployed path from image file to raw output, scored here against the FP32
parent). A failure on a core fails the node, so the file is not published; its reason names the core."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from yolo_optimize.arm.cores import ArmCore, core_named
from yolo_optimize.arm.runs import run_on_arm
from yolo_optimize.artifact import Manifest
from yolo_optimize.building.gate import Gate, GateRecord
from yolo_optimize.building.parity import FP16_ARITHMETIC, REFERENCE_FILE, Tolerance, parity_verdict, tolerance_for
from yolo_optimize.building.request import GateConfig
from yolo_optimize.building.stage import REFERENCE, SOURCE, StageContext
from yolo_optimize.families.base import ParityStats
from yolo_optimize.formats import format_named
from yolo_optimize.metadata import ArtifactMetadata


def check_on_cores(folder: Path, manifest: Manifest, ctx: StageContext, cores: list[str],
                   gate: GateConfig | None) -> None:
    """Parity on each core into ``manifest.parity["on_arm"]``, and for a gated INT8 file the gate into
    ``manifest.info["gate"]["on_arm"]``; a RuntimeError naming the core at the first that fails."""
    assert manifest.parity is not None, "ARM checks follow this machine's parity"
    runtime = format_named(manifest.target or "").runtime
    if not runtime.on_arm:
        why = f"not checked: {runtime.package} has no aarch64 wheel the ARM side runs"
        manifest.parity["on_arm"] = {name: {"checked": False, "why": why} for name in cores}
        return
    manifest.parity["on_arm"] = {name: parity_on_arm(folder, manifest, ctx, core_named(name)) for name in cores}
    if gate is not None and "gate" in manifest.info:
        manifest.info["gate"]["on_arm"] = {name: gate_on_arm(folder, manifest, ctx, gate, core_named(name))
                                           for name in cores}


def parity_on_arm(folder: Path, manifest: Manifest, ctx: StageContext, core: ArmCore) -> dict[str, Any]:
    """The artifact on ``core``, one image at a time, against the PyTorch reference on the same tensors; the parity
    images are also letterboxed there, and how far ARM's OpenCV is from this machine's is recorded."""
    saved = np.load(ctx.inputs[REFERENCE] / REFERENCE_FILE)
    images, expected = saved["images"], saved["outputs"]
    files = tuple(Path(p) for p in ctx.manifest(REFERENCE).params["images"])
    metadata = ArtifactMetadata.of(manifest)
    family = metadata.model_family()
    run = run_on_arm(core, folder, manifest, metadata.side, images=files, pixels=images)
    stats, violations = ParityStats(), 0
    for index in range(len(images)):
        got = run.outputs[index:index + 1]
        stats = stats.merged(family.compare(got, expected[index:index + 1]))
        violations += family.violations(got, metadata.to_dict())
    facts = {**run.record(), "batch_sizes": [1], "letterbox": _letterbox_difference(run.pixels, images)}
    ran_in = (run.facts["executed_precision"], run.facts["compute_precision"])
    return parity_verdict(manifest, stats, violations, ran_in, arm_tolerance(manifest, ran_in[1], core), len(images),
                          facts, run.where)


def arm_tolerance(manifest: Manifest, compute: str, core: ArmCore) -> Tolerance:
    """The tolerance of what ran on ``core``: FP16_ARITHMETIC where an FP16 file computed in FP16 there (a core with
    half-precision arithmetic), else the precision's own, as on this machine."""
    if compute == "fp16" and core.fp16_arithmetic:
        return FP16_ARITHMETIC
    return tolerance_for(manifest.precision or "fp32", compute, ArtifactMetadata.of(manifest).side)


def _letterbox_difference(arm: np.ndarray | None, here: np.ndarray) -> dict[str, Any]:
    """How ARM's letterboxed images differ from this machine's, in uint8 levels (OpenCV's resize has per-CPU
    kernels): what the deployed path adds to the model's own difference."""
    if arm is None:
        return {}
    difference = np.abs(arm.astype(np.int16) - here.astype(np.int16))
    return {"max_abs_diff_levels": int(difference.max()), "differing_share": round(float((difference > 0).mean()), 6)}


def gate_on_arm(folder: Path, manifest: Manifest, ctx: StageContext, config: GateConfig,
                core: ArmCore) -> dict[str, Any]:
    """The INT8 file's gate score from ``core``, each held-out image read and letterboxed there, against the FP32
    parent's score here (FP32 agrees across the two to a thousandth of a pixel); fails past --max-map-drop."""
    metadata = ArtifactMetadata.of(manifest)
    gate = Gate(config.images, metadata.model_family(), metadata.side, ctx.threads)
    try:
        record = GateRecord(config, gate.score(ctx.inputs[SOURCE], ctx.manifest(SOURCE)), gate)
        run = run_on_arm(core, folder, manifest, metadata.side, images=tuple(gate.dataset.images))
        outputs = [run.outputs[index:index + 1] for index in range(len(run.outputs))]
        passed = record.add(f"on {core.name}", gate.score_raw(outputs))
    finally:
        gate.close()
    attempt = record.attempts[-1]
    result = {**attempt, "fp32_score": round(record.reference.value, 4), **run.record()}
    if not passed:
        here = manifest.info["gate"]
        raise RuntimeError(f"accuracy gate failed{run.where}: {gate.metric.name} {attempt['score']} vs FP32 "
                           f"{result['fp32_score']} = {attempt['drop_points']} points > --max-map-drop "
                           f"{config.max_map_drop} (on this machine {here['drop_points']} points)")
    return result
