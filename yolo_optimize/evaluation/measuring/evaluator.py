"""The evaluation protocol: every artifact in its own processes, in interleaved rounds with the baseline.

A process on these hosts runs in a fast mode or a 1.4-1.7x slower one, which on some hosts
changes every few seconds even within one process (bench/archive/measurement_noise/host_speed.py), so one process per
artifact decides nothing. Each round starts a fresh process per row, the PyTorch baseline first
and the artifacts' order rotated from round to round, keeps them all alive, and has them take
turns in short blocks at each batch size (``interleave.py``), so every row's runs are spread over
the same stretch of time. The slow state slows each runtime by its own factor, so the report
compares rows in the host's fast state: the runs, over all of a row's processes, of the blocks
within a span of the row's reference block (``run_statistics.fast_state``). Every raw sample is kept.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from yolo_optimize.artifact import scratch_folder
from yolo_optimize.errors import UserError
from yolo_optimize.evaluation.facts import ModelFacts, recorded_model_facts
from yolo_optimize.evaluation.measuring.discover import FoundArtifact
from yolo_optimize.evaluation.measuring.interleave import LiveRow, take_turns, turns_for
from yolo_optimize.evaluation.measuring.measure import MeasureJob, Timing
from yolo_optimize.evaluation.measuring.profiling import PROFILE_IMAGES, ProfileRequest, Profiling, profile_artifact
from yolo_optimize.evaluation.measuring.rows import unmeasured_row
from yolo_optimize.evaluation.results import (
    BASELINE_TARGET,
    END_TO_END,
    INFERENCE,
    EvalSettings,
    Row,
    VariantChoice,
    is_baseline,
)
from yolo_optimize.families.base import Family
from yolo_optimize.host.processes import one_line
from yolo_optimize.images import check_input_fits
from yolo_optimize.runtime.accuracy import (
    RANDOM_WEIGHTS,
    Accuracy,
    task_accuracy,
    wants_predictions,
)
from yolo_optimize.runtime.dataset import (
    Dataset,
    PreparedImages,
    load_dataset,
    prepare_images,
)

END_TO_END_IMAGES = 16  # image files the end-to-end path reads in turn (from the evaluation data)


@dataclass
class CountedProgress:
    """Counted progress for a bar with an ETA: ``show(text, done, total)`` on every step, where a step is one
    measurement process or one profile."""

    show: Callable[[str, int, int], None]
    total: int = 0
    done: int = 0

    def note(self, text: str) -> None:
        self.show(text, self.done, self.total)

    def step(self, text: str) -> None:
        """``text`` starts a step: shown with the steps done so far, counted once it is announced."""
        self.note(text)
        self.done += 1


def measured_rows(candidates: list[FoundArtifact], settings: EvalSettings, dataset: Dataset, progress: CountedProgress,
                  profiling: Profiling | None = None) -> list[Row]:
    """Measure every candidate (``discover``'s artifacts and baselines, model files added beside them) on ``dataset``
    (``evaluation_data``); rows that fail carry their reason, the rest still run. ``profiling`` (--profile: given
    with ``settings.profile_dir``) profiles each measured row after its model's group."""
    for imgsz in {_imgsz(c) for c in candidates if c.manifest}:
        check_input_fits(imgsz, max(settings.batch_sizes), "--batch-sizes")
    rows = [unmeasured_row(c, settings, dataset.images) for c in candidates]
    progress.total = sum(len(measurement_schedule(_group(rows, candidates, model), settings.repeats))
                         + (len(_group(rows, candidates, model)) if settings.profile_dir else 0)
                         for model in dict.fromkeys(r.model for r in rows))
    with scratch_folder("yolo-optimize-eval-") as work:
        prepared: dict[int, PreparedImages] = {}
        for model in dict.fromkeys(r.model for r in rows):
            group = _group(rows, candidates, model)
            for imgsz in {_imgsz(c) for _, c in group}:
                progress.note(f"preprocessing {len(dataset.images)} images for {model} at {imgsz}")
                prepared[imgsz] = prepare_images(dataset, _family(group[0][1]), imgsz, work, settings.threads)
                progress.note(f"counting {model}'s operations at {imgsz}")
                facts = _model_facts(group, imgsz)
                for row, candidate in group:
                    row.facts = facts if _imgsz(candidate) == imgsz else row.facts
            _measure_group(group, prepared, dataset, settings, progress)
            if settings.profile_dir:
                assert profiling, "--profile needs its peaks and its writer"
                _profile_group(group, dataset, settings, progress, profiling)
    progress.done = progress.total
    progress.note("measured")
    return rows


def _agreement(family: Family, predictions: list[np.ndarray], baseline: list[np.ndarray]) -> dict[str, Any]:
    """A model file this tool did not build against the PyTorch baseline on the evaluation images: the share of its
    predictions that agree with the baseline's (``Family.agreement_of``)."""
    matched, total = family.agreement(predictions, baseline)
    what = "top-1 classes" if family.task == "classify" else "detections scored 0.25 or more, same class, IoU 0.5"
    return {"against": "pytorch-fp32", "images": len(baseline),
            "agreement": round(matched / total, 4) if total else 1.0,
            "agreement_of": f"the evaluation's predictions: {what}"}


def _group(rows: list[Row], candidates: list[FoundArtifact], model: str) -> list[Pair]:
    """``model``'s measurable rows with their artifacts."""
    return [(r, c) for r, c in zip(rows, candidates) if r.model == model and not r.error and not r.skipped]


def _profile_group(group: list[Pair], dataset: Dataset, settings: EvalSettings, progress: CountedProgress,
                   profiling: Profiling) -> None:
    """Each measured row profiled at batch 1 (breakdown also at the largest batch size), its files written as soon as
    it is taken; a failure is the row's note."""
    assert settings.profile_dir
    for row, candidate in group:
        if row.error or not row.measurements:
            progress.done += 1
            continue
        progress.step(f"profiling {row.model} {row.name}")
        out = settings.profile_dir / row.model / row.name
        request = ProfileRequest(candidate.folder, candidate.measurable, tuple(dataset.images[:PROFILE_IMAGES]),
                                 batch_size=1, largest_batch=max(settings.batch_sizes), threads=settings.threads,
                                 out=out, min_time_s=settings.min_time_s, limits=profiling.limits,
                                 variant=row.variant_choice.chosen if row.variant_choice else "")
        try:
            profile = profile_artifact(request)
        except Exception as err:  # noqa: BLE001 - the row keeps its measurements
            row.profile = {"error": one_line(err)}
            continue
        profiling.write(profile, out)
        row.profile = {**{k: v for k, v in asdict(profile).items() if k != "layers"},
                       "folder": str(out.relative_to(settings.profile_dir.parent))}


def evaluation_data(settings: EvalSettings, candidates: list[FoundArtifact]) -> Dataset:
    """The images (and labels) the candidates are measured on, read and checked before anything is measured: --data,
    else the first artifact's family's sample images; a UserError for bad data, or for none where accuracy needs it."""
    if settings.data is None:
        family = next((_family(c) for c in candidates if c.manifest), None)
        if family is None:
            raise UserError("no artifact could be read; pass --data to say which images to measure with")
        return load_dataset(family.sample_images(), max_images=settings.max_images)
    dataset = load_dataset(settings.data, max_images=settings.max_images)
    detectors = any(c.manifest and _family(c).task == "detect" for c in candidates)
    if settings.accuracy and detectors and dataset.ground_truth is None:
        raise UserError(f"no labels found for {settings.data} (expected labels/<split>/*.txt beside "
                        f"images/<split>); pass --no-accuracy to measure speed only")
    if settings.accuracy and detectors and not dataset.boxes:
        raise UserError(f"{settings.data} has labels but not a single labelled box in its {len(dataset.images)} "
                        f"images: no mAP can be scored on it; pass a labelled set, or --no-accuracy")
    return dataset


def _family(candidate: FoundArtifact) -> Family:
    return candidate.metadata.model_family()


def _imgsz(candidate: FoundArtifact) -> int:
    return candidate.metadata.side


def _model_facts(group: list[Pair], imgsz: int) -> ModelFacts | None:
    """Counted on the baseline's model (what every artifact was exported from), or read from the cache; None without
    a build record."""
    baseline = next((c for r, c in group if r.target == BASELINE_TARGET), None)
    if baseline is None or baseline.manifest is None:
        return None
    try:
        return recorded_model_facts(baseline.manifest, imgsz)
    except RuntimeError:
        return None  # the checkpoint is gone or changed: the baseline's row says so


def _measure_group(group: list[Pair], prepared: dict[int, PreparedImages], dataset: Dataset,
                   settings: EvalSettings, progress: CountedProgress) -> None:
    """``repeats`` rounds; in each, every row's process alive at once, the rows taking turns in blocks at each batch
    size (interleave.py); accuracy from each row's first measurement.

    The baseline goes first, so its predictions are there for the metrics that compare with it
    (a classifier's top-1 agreement).
    """
    schedule = measurement_schedule(group, settings.repeats)
    baseline: list[np.ndarray] | None = None
    _choose_variants(group, prepared, settings, progress)
    for round_ in range(settings.repeats):
        live = _start_round([pair for r, pair in schedule if r == round_], prepared, settings, progress, round_,
                            end_to_end_files(dataset, settings))
        if round_ == 0:
            _choose_baseline_threads(live, settings, progress)
        _take_turns(live, settings, progress, round_)
        for row, candidate, worker in live:
            progress.note(f"{row.model} {row.name}: finishing round {round_ + 1}"
                          + (" (predicting every image for accuracy)" if round_ == 0 and settings.accuracy else ""))
            found = worker.finish()
            if found is None:
                row.error = worker.error
                continue
            measurement, predictions = found
            measurement.round, measurement.host = round_, worker.host
            row.measurements.append(measurement)
            if predictions is not None:
                baseline = predictions if is_baseline(row.target, row.precision) else baseline
                row.accuracy = task_accuracy(_family(candidate), predictions, dataset, prepared[_imgsz(candidate)],
                                             names=candidate.metadata.names or [],
                                             pretrained=row.pretrained, baseline=baseline)
                if row.external is not None and baseline is not None:
                    row.external["parity"] = _agreement(_family(candidate), predictions, baseline)
    if settings.accuracy:
        for row, _ in group:
            if row.accuracy is None and not row.pretrained:
                row.accuracy = Accuracy(None, None, len(dataset.images), RANDOM_WEIGHTS)


Live = tuple[Row, FoundArtifact, LiveRow]


def _choose_baseline_threads(live: list[Live], settings: EvalSettings, progress: CountedProgress) -> None:
    """The CPU baseline's threads, chosen by measurement in its first process (``LiveRow.choose_threads``, at the
    smallest batch size) and kept for its later processes; recorded on its row (``Row.threads_choice``)."""
    if settings.device != "cpu" or settings.threads < 2:
        return
    for row, _, worker in live:
        if is_baseline(row.target, row.precision):
            progress.note(f"{row.model} {row.name}: choosing its threads ({settings.threads} or 1) by measurement")
            row.threads_choice = worker.choose_threads(min(settings.batch_sizes))


def _choose_variants(group: list[Pair], prepared: dict[int, PreparedImages], settings: EvalSettings,
                     progress: CountedProgress) -> None:
    """How each row's runtime runs where its runner offers variants at the smallest batch size (``Runner.variants``),
    chosen by measurement in a process of its own before the first round and kept for every round; recorded on its
    row (``Row.variant_choice``). Not in a measured process: switching remakes the runtime's session, which raised
    that process's peak memory by 50-80 MB (ONNX Runtime on yolov5n)."""
    from yolo_optimize.runtime.runners import open_runner

    batch = min(settings.batch_sizes)
    for row, candidate in group:
        if row.error:
            continue
        job = _job(row, candidate, prepared, replace(settings, batch_sizes=(batch,)), wants_accuracy=False, files=())
        run = job.timing
        variants = open_runner(job.folder, job.manifest, device=run.device, threads=run.threads,
                               mode=run.mode).variants(batch)
        if not variants:
            continue
        progress.note(f"{row.model} {row.name}: choosing how its runtime runs by measurement")
        worker = LiveRow(job, settings.row_timeout_s)
        choice = worker.choose_variant(batch)
        worker.finish()
        row.variant_choice = choice or VariantChoice(batch, {}, variants[0], failed=worker.error or "no answer")
        progress.note(f"{row.model} {row.name}: {row.variant_choice.describe()}")


def _job(row: Row, candidate: FoundArtifact, prepared: dict[int, PreparedImages], settings: EvalSettings, *,
         wants_accuracy: bool, files: tuple[Path, ...]) -> MeasureJob:
    """What a process of ``row`` measures, on the threads and as the variant chosen for it."""
    threads = row.threads_choice.chosen if row.threads_choice else settings.threads
    variant = row.variant_choice.chosen if row.variant_choice else ""
    return MeasureJob(candidate.folder, candidate.measurable, prepared[_imgsz(candidate)].pixels,
                      Timing.of(settings, threads, variant), wants_accuracy, files)


def _start_round(pairs: list[Pair], prepared: dict[int, PreparedImages], settings: EvalSettings,
                 progress: CountedProgress, round_: int, files: tuple[Path, ...]) -> list[Live]:
    """One loaded process per row still measurable, in the round's order; a row whose process fails is marked."""
    live: list[Live] = []
    for row, candidate in pairs:
        if row.error:
            progress.done += 1  # a step that need not run
            continue
        progress.step(f"{row.model} {row.name}: loading (round {round_ + 1} of {settings.repeats})")
        family = _family(candidate)
        wants_accuracy = settings.accuracy and row.accuracy is None and wants_predictions(family, row.pretrained)
        worker = LiveRow(_job(row, candidate, prepared, settings, wants_accuracy=wants_accuracy, files=files),
                         settings.row_timeout_s)
        if worker.error:
            row.error = worker.error
            worker.finish()
            continue
        live.append((row, candidate, worker))
    return live


def end_to_end_files(dataset: Dataset, settings: EvalSettings) -> tuple[Path, ...]:
    """The image files the end-to-end path reads in turn (none when it is not measured)."""
    return tuple(dataset.images[:END_TO_END_IMAGES]) if settings.end_to_end else ()


def _take_turns(live: list[Live], settings: EvalSettings, progress: CountedProgress, round_: int) -> None:
    """At each batch size, turn after turn, one block per row in the round's order: the runtime's calls at every batch
    size, then the end-to-end path."""
    turns = turns_for(settings.min_time_s)
    workers = [worker for _, _, worker in live]
    parts = (INFERENCE, END_TO_END) if settings.end_to_end else (INFERENCE,)
    for part in parts:
        for batch in settings.batch_sizes:
            def noted(turn: int, batch: int = batch, part: str = part) -> None:
                progress.note(f"round {round_ + 1} of {settings.repeats}: {len(live)} rows at batch {batch}, "
                              f"{part.replace('_', '-')} turn {turn + 1}")

            take_turns(workers, batch, turns, noted, part)


Pair = tuple[Row, FoundArtifact]


def measurement_schedule(group: list[Pair], repeats: int) -> list[tuple[int, Pair]]:
    """(round, pair): the baseline first in every round, then the artifacts, starting one further along each round."""
    baseline = [pair for pair in group if pair[0].target == BASELINE_TARGET]
    others = [pair for pair in group if pair[0].target != BASELINE_TARGET]
    schedule: list[tuple[int, Pair]] = []
    for round_ in range(repeats):
        shift = round_ % len(others) if others else 0
        schedule += [(round_, pair) for pair in [*baseline, *others[shift:], *others[:shift]]]
    return schedule

