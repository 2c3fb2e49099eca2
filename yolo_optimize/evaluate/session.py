"""``optimize eval`` as a function: checked settings in, every candidate measured, the typed report out (and its
files, when a folder is given). The CLI and the Python API both run it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from yolo_optimize.artifact import MANIFEST, check_writable, written_whole
from yolo_optimize.cpu import usable_cpus
from yolo_optimize.devices import resolve_device
from yolo_optimize.errors import UserError
from yolo_optimize.evaluate.discover import BASELINE_TARGET, Candidate, discover
from yolo_optimize.evaluate.evaluator import EvalSettings, Progress, evaluate
from yolo_optimize.evaluate.external import (
    SUFFIXES,
    checkpoint_baseline,
    external_candidates,
    inspect_entries,
    ir_files,
)
from yolo_optimize.evaluate.interleave import ANSWER_TIMEOUT_S
from yolo_optimize.evaluate.report import build_report, write_report
from yolo_optimize.evaluate.results import Report
from yolo_optimize.formats import parse_batch_sizes
from yolo_optimize.runtime.runners.base import MODES


@dataclass(frozen=True)
class EvalRequest:
    root: Path | None  # a folder of built artifacts; None when only --add files are measured
    settings: EvalSettings
    out: Path | None  # where the report's files go (None: not written)
    add: tuple[str, ...] = ()  # model files this tool did not build, [FAMILY=]PATH (evaluate/external.py)
    family: str | None = None
    checkpoint: Path | None = None  # the PyTorch baseline of --add files that join no model under root

    @classmethod
    def checked(cls, root: Path, *, data: Path | None, out: Path | None, batch_sizes: tuple[int, ...], device: str,
                threads: int | None, min_time: float, repeats: int, max_images: int | None, accuracy: bool,
                imgsz: int | None, mode: str, end_to_end: bool, profile: bool, add: tuple[str, ...] = (),
                family: str | None = None, checkpoint: Path | None = None,
                row_timeout: float = ANSWER_TIMEOUT_S) -> EvalRequest:
        """The request, every value checked (a UserError names the bad one); a model file as ``root`` is measured
        like an --add file."""
        if mode not in MODES:
            raise UserError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if threads is not None and threads < 1 or repeats < 1 or min_time < 0:
            raise UserError("threads and repeats must be at least 1 and min_time not negative")
        if root.is_file() or root.suffix in SUFFIXES or _model_folder(root):
            root, add = None, (str(root), *add)  # type: ignore[assignment]
        settings = EvalSettings(data=data, batch_sizes=parse_batch_sizes(",".join(map(str, batch_sizes))),
                                threads=threads or usable_cpus(), device=resolve_device(device), min_time_s=min_time,
                                repeats=repeats, max_images=max_images, accuracy=accuracy, imgsz=imgsz,
                                profile_dir=out / "profiles" if profile and out else None, mode=mode,
                                end_to_end=end_to_end, row_timeout_s=row_timeout)
        if profile and out is None:
            raise UserError("profile needs a folder to write the profiles to: pass out=")
        return cls(root, settings, out, add, family, checkpoint)


def _model_folder(path: Path) -> bool:
    """A folder holding a model file (an OpenVINO IR's) rather than built artifacts."""
    return path.is_dir() and not any(path.rglob(MANIFEST)) and len(ir_files(path)) == 1


def run_evaluation(request: EvalRequest, progress: Callable[[str, int, int], None]) -> Report:
    """Measure every candidate, build the report, write its files to ``request.out`` (when given): whole or not at
    all, results.json last (``artifact.written_whole``), the profiles too."""
    if request.out is None:
        return _measured(request, request.settings, progress)
    check_writable(request.out)
    with written_whole(request.out, last="results.json") as staging:
        profiles = staging / request.settings.profile_dir.name if request.settings.profile_dir else None
        report = _measured(request, replace(request.settings, profile_dir=profiles), progress)
        write_report(report, staging)
    return report


def _measured(request: EvalRequest, settings: EvalSettings, progress: Callable[[str, int, int], None]) -> Report:
    """The report of every candidate measured with ``settings`` (profiles written where they say), which records
    the request's own settings."""
    limits = None
    if settings.profile_dir:
        from yolo_optimize.machine.peaks import machine_limits

        progress("this machine's limits (measured once per machine and tool versions, then cached)", 0, 0)
        limits = machine_limits(settings.threads)
    rows = evaluate(candidates(request), settings, limits=limits, progress=Progress(progress))
    recorded = request.settings
    return build_report(rows, {**asdict(recorded), "data": str(recorded.data) if recorded.data else None,
                               "batch_sizes": list(recorded.batch_sizes),
                               "profile_dir": str(recorded.profile_dir) if recorded.profile_dir else None}, limits)


def candidates(request: EvalRequest) -> list[Candidate]:
    """The built artifacts under root with their baselines, then the --add files, each in its model's group (a group
    of its own, with the --checkpoint baseline, when it joins none)."""
    inspected = inspect_entries(request.add, request.family, request.settings.imgsz)  # a bad file is refused first
    found = discover(request.root) if request.root is not None else []
    models = {c.model: (c.manifest.metadata["family"], list(c.manifest.metadata["imgsz"]))
              for c in found if c.manifest and c.target != BASELINE_TARGET}
    added = external_candidates(inspected, models)
    own_groups = {c.model: c for c in added if c.model not in models}
    if own_groups and request.checkpoint:
        found += [checkpoint_baseline(request.checkpoint, model, int(c.manifest.metadata["imgsz"][0]))  # type: ignore[union-attr]
                  for model, c in own_groups.items()]
    return [*found, *added]
