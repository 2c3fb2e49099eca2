"""A candidate's row before it is measured: what its manifest and files say (its entry, its size, its CPU note, a
foreign file's record) and why it will not be measured.

Apart from the protocol (evaluator.py) because none of it measures: it is read from the files, once per candidate.
"""

from __future__ import annotations

from pathlib import Path

from yolo_optimize.evaluation.measuring.calibrated import calibration_overlap
from yolo_optimize.evaluation.measuring.discover import FoundArtifact
from yolo_optimize.evaluation.measuring.external import external_record
from yolo_optimize.evaluation.results import BASELINE_TARGET, EvalSettings, Row
from yolo_optimize.formats import formats
from yolo_optimize.host.cpu import has_vnni
from yolo_optimize.metadata import ArtifactMetadata


def unmeasured_row(candidate: FoundArtifact, settings: EvalSettings, images: list[Path]) -> Row:
    """``candidate``'s row before anything is measured: what its manifest and files say, the evaluation images it
    was calibrated on, and why it will not be measured (an error, or a skip on purpose)."""
    manifest = candidate.manifest
    metadata = candidate.metadata if manifest else None
    row = Row(candidate.name, candidate.model, candidate.target, candidate.precision, str(candidate.folder),
              _file_mb(candidate), bool(metadata and metadata.pretrained), error=candidate.error,
              task=(metadata.task or "") if metadata else "",
              input_form=metadata.takes.describe() if metadata else "")
    row.cpu_note = _cpu_note(metadata) if metadata else ""
    row.entry = _entry(candidate)
    row.external = external_record(manifest) if manifest else None
    row.calibration_overlap = calibration_overlap(manifest, images) if settings.accuracy else 0
    if manifest and settings.imgsz and candidate.metadata.side != settings.imgsz:
        row.error = f"artifact imgsz {candidate.metadata.side} differs from --imgsz {settings.imgsz}"
    row.skipped = _skip_reason(candidate, settings.device)
    return row


def _skip_reason(candidate: FoundArtifact, device: str) -> str:
    """Why a row is not measured in this evaluation on purpose: its runtime cannot run on this device here (a
    GPU-only format on a CPU evaluation is never measured against a CPU baseline)."""
    if candidate.manifest is None or candidate.target not in formats():
        return ""
    from yolo_optimize.runtime.runners import runner_class

    return runner_class(candidate.target).unavailable_reason(device) or ""


def _entry(candidate: FoundArtifact) -> str:
    """The file a deployment loads: the artifact's entry, or the baseline's checkpoint ("" for random weights)."""
    manifest = candidate.manifest
    if manifest is None:
        return ""
    if candidate.target == BASELINE_TARGET:
        return str(manifest.info.get("source", {}).get("checkpoint") or "")
    return str(candidate.folder / manifest.entry) if manifest.entry else ""


def _cpu_note(metadata: ArtifactMetadata) -> str:
    """The file's own CPU note; a warning instead when it needs VNNI and this CPU lacks it."""
    if metadata.requires_vnni and not has_vnni():
        return "built for VNNI CPUs: this CPU has none, so its INT8 sums may saturate"
    return metadata.cpu_note or ""


def _file_mb(candidate: FoundArtifact) -> float | None:
    if candidate.manifest is None or candidate.manifest.target == BASELINE_TARGET:
        return None
    return round(sum(f["bytes"] for f in candidate.manifest.files.values()) / 1e6, 2)
