"""``optimize eval`` as a function: checked settings in, every candidate measured, the typed report out (and its
files, when a folder is given). The CLI and the Python API both run it."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from yolo_optimize.artifact import MANIFEST, check_writable, scratch_folder, written_whole
from yolo_optimize.errors import UserError
from yolo_optimize.evaluation.measuring.discover import (
    BASELINE_TARGET,
    FoundArtifact,
    discover,
    with_half_baselines,
    with_runtime_configurations,
)
from yolo_optimize.evaluation.measuring.evaluator import CountedProgress, evaluation_data, measured_rows
from yolo_optimize.evaluation.measuring.external import (
    checkpoint_baseline,
    external_artifacts,
    inspect_entries,
    model_files,
)
from yolo_optimize.evaluation.measuring.profiling import Profiling
from yolo_optimize.evaluation.options import EvalOptions
from yolo_optimize.evaluation.reporting.profile_page import write_profile
from yolo_optimize.evaluation.reporting.report import build_report, write_report
from yolo_optimize.evaluation.results import EvalSettings, Report
from yolo_optimize.formats import foreign_suffixes
from yolo_optimize.host.busy import host_before
from yolo_optimize.host.cpu import usable_cpus
from yolo_optimize.host.devices import resolve_device


@dataclass(frozen=True)
class EvalRequest:
    root: Path | None  # a folder of built artifacts; None when only --add files are measured
    settings: EvalSettings
    out: Path | None  # where the report's files go (None: not written)
    add: tuple[str, ...] = ()  # model files this tool did not build, [FAMILY=]PATH (evaluation/measuring/external.py)
    family: str | None = None
    checkpoint: Path | None = None  # the PyTorch baseline of --add files that join no model under root

    @classmethod
    def of(cls, options: EvalOptions) -> EvalRequest:
        """The request for checked ``options``, resolved on this machine (its device and CPUs); a model file as
        ``root`` is measured like an --add file. A UserError when something needs another option."""
        root, add = options.root, options.add
        if root is None:
            raise UserError("nothing to evaluate: give a folder of artifacts or a model file")
        if root.is_file() or root.suffix in foreign_suffixes() or _model_folder(root):
            root, add = None, (str(root), *add)
        if options.profile and options.out is None:
            raise UserError("profile needs a folder to write the profiles to: pass out=")
        settings = EvalSettings(data=options.data, batch_sizes=options.batch_sizes,
                                threads=options.threads or usable_cpus(), device=resolve_device(options.device),
                                min_time_s=options.min_time, repeats=options.repeats, max_images=options.max_images,
                                accuracy=options.accuracy, imgsz=options.imgsz,
                                profile_dir=options.out / "profiles" if options.profile and options.out else None,
                                mode=options.mode, end_to_end=options.end_to_end, row_timeout_s=options.row_timeout)
        return cls(root, settings, options.out, add, options.family, options.checkpoint)


def _model_folder(path: Path) -> bool:
    """A folder holding a model file (an OpenVINO IR's, an NCNN graph's...) rather than built artifacts."""
    return path.is_dir() and not any(path.rglob(MANIFEST)) and len(model_files(path)) == 1


FAILED_SUFFIX = "-failed"  # the folder beside --out a report that measured nothing is written to


def measured_anything(report: Report) -> bool:
    """Whether an artifact (not only a PyTorch baseline) was measured: a run whose every artifact failed measured
    nothing the user asked about, however well its baseline ran."""
    baselines = {(row.model, row.name) for row in report.rows if row.target == BASELINE_TARGET}
    return any(line.status == "ok" and (line.model, line.artifact) not in baselines for line in report.matrix)


def report_folder(out: Path, report: Report) -> Path:
    """Where ``report`` is written for ``--out out``: there when it measured an artifact, else ``<out>-failed`` beside
    it, so that a run in which every artifact failed never replaces the report a good run left in ``out``."""
    return out if measured_anything(report) else out.with_name(out.name + FAILED_SUFFIX)


def run_evaluation(request: EvalRequest, progress: Callable[[str, int, int], None]) -> Report:
    """Measure every candidate, build the report, write its files to ``report_folder(request.out)`` (when given):
    whole or not at all, results.json last (``artifact.written_whole``), the profiles too (measured into a scratch
    folder until the report says where it goes)."""
    if request.out is None:
        return _measured(request, request.settings, progress)
    check_writable(request.out)
    with scratch_folder("yolo-optimize-report-") as work:
        profiles = work / request.settings.profile_dir.name if request.settings.profile_dir else None
        report = _measured(request, replace(request.settings, profile_dir=profiles), progress)
        with written_whole(report_folder(request.out, report), last="results.json") as staging:
            for entry in work.iterdir():
                shutil.move(entry, staging / entry.name)
            write_report(report, staging)
    return report


def _measured(request: EvalRequest, settings: EvalSettings, progress: Callable[[str, int, int], None]) -> Report:
    """The report of every candidate measured with ``settings`` (profiles written where they say), which records
    the request's own settings. The candidates and the data are read and checked first: bad input is refused before
    anything is measured (the machine's limits included)."""
    found = found_artifacts(request)
    dataset = evaluation_data(settings, found)
    profiling = None
    if settings.profile_dir:
        from yolo_optimize.limits.peaks import machine_limits

        progress("this machine's limits (measured once per machine and tool versions, then cached)", 0, 0)
        profiling = Profiling(machine_limits(settings.threads), write_profile)
    progress("watching the host before measuring (other processes on its CPUs?)", 0, 0)
    before = host_before(settings.threads)
    rows = measured_rows(found, settings, dataset, profiling=profiling, progress=CountedProgress(progress))
    return build_report(rows, request.settings, profiling.limits if profiling else None, before)


def found_artifacts(request: EvalRequest) -> list[FoundArtifact]:
    """The built artifacts under root with their baselines, then the --add files, each in its model's group (a group
    of its own, with the --checkpoint baseline, when it joins none)."""
    inspected = inspect_entries(request.add, request.family, request.settings.imgsz)  # a bad file is refused first
    found = discover(request.root) if request.root is not None else []
    check_input_size(found, request.settings.imgsz, request.root)
    if request.settings.device == "cuda":
        found = with_half_baselines(found)
    models = {c.model: (c.metadata.family, list(c.metadata.imgsz or ()))
              for c in found if c.manifest and c.target != BASELINE_TARGET}
    added = external_artifacts(inspected, models)
    own_groups = {c.model: c for c in added if c.model not in models}
    if own_groups and request.checkpoint:
        found += [checkpoint_baseline(request.checkpoint, model, c.metadata.side)
                  for model, c in own_groups.items()]
    return with_runtime_configurations([*found, *added])


def check_input_size(found: list[FoundArtifact], imgsz: int | None, root: Path | None) -> None:
    """Refuse (UserError) an --imgsz no artifact under ``root`` was built at: every row would fail. Where some were,
    the others fail on their own rows, saying so."""
    sizes = sorted({c.metadata.side for c in found if c.manifest and c.target != BASELINE_TARGET})
    if imgsz and sizes and imgsz not in sizes:
        raise UserError(f"--imgsz {imgsz}: the artifacts under {root} were built at {', '.join(map(str, sizes))}: "
                        f"leave --imgsz out, or build them at {imgsz}")
