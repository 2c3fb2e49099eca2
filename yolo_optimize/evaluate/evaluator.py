"""The evaluation protocol: every artifact in its own processes, in interleaved rounds with the baseline.

A process on these hosts runs in a fast mode or a 1.4-1.65x slower one and keeps it for
its life, so one process per artifact decides nothing. Each round measures the PyTorch
baseline and then every artifact once, each in a fresh process, the artifacts' order
rotated from round to round (so none is always measured right after the baseline); the
report takes each speedup as the median over rounds of the ratio to the baseline of the
same round (``report.py``). Every raw sample is kept.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

from yolo_optimize.cpu import has_vnni
from yolo_optimize.errors import UserError
from yolo_optimize.evaluate.accuracy import RANDOM_WEIGHTS, Accuracy, task_accuracy, wants_predictions
from yolo_optimize.evaluate.dataset import Dataset, PreparedImages, load_dataset, prepare_images
from yolo_optimize.evaluate.discover import BASELINE_TARGET, Candidate, discover
from yolo_optimize.evaluate.measure import MeasureJob, measure
from yolo_optimize.evaluate.results import Measurement, Row
from yolo_optimize.families import family_named
from yolo_optimize.families.base import Family


@dataclass(frozen=True)
class EvalSettings:
    data: Path | None
    batch_sizes: tuple[int, ...]
    threads: int
    device: str
    min_time_s: float
    repeats: int
    max_images: int | None
    accuracy: bool
    imgsz: int | None


Progress = Callable[[str], None]


def evaluate(root: Path, settings: EvalSettings, progress: Progress) -> list[Row]:
    """Measure every artifact under ``root``; rows that fail carry their reason, the rest still run."""
    candidates = discover(root)
    dataset = _dataset(settings, candidates)
    rows = [_row(c, settings) for c in candidates]
    with tempfile.TemporaryDirectory(prefix="yolo-optimize-eval-") as work:
        prepared: dict[int, PreparedImages] = {}
        for model in dict.fromkeys(r.model for r in rows):
            group = [(r, c) for r, c in zip(rows, candidates) if r.model == model and not r.error]
            for imgsz in {_imgsz(c) for _, c in group}:
                progress(f"preprocessing {len(dataset.images)} images for {model} at {imgsz}")
                prepared[imgsz] = prepare_images(dataset, _family(group[0][1]), imgsz, Path(work), settings.threads)
            _measure_group(group, prepared, dataset, settings, progress)
    return rows


def _dataset(settings: EvalSettings, candidates: list[Candidate]) -> Dataset:
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
    return dataset


def _row(candidate: Candidate, settings: EvalSettings) -> Row:
    manifest = candidate.manifest
    row = Row(candidate.name, candidate.model, candidate.target, candidate.precision, str(candidate.folder),
              _file_mb(candidate), bool(manifest and manifest.metadata.get("pretrained")), error=candidate.error,
              task=manifest.metadata["task"] if manifest else "")
    row.cpu_note = _cpu_note(manifest.metadata) if manifest else ""
    if manifest and settings.imgsz and _imgsz(candidate) != settings.imgsz:
        row.error = f"artifact imgsz {_imgsz(candidate)} differs from --imgsz {settings.imgsz}"
    return row


def _cpu_note(metadata: dict[str, Any]) -> str:
    """The file's own CPU note; a warning instead when it needs VNNI and this CPU lacks it."""
    if metadata.get("requires_vnni") and not has_vnni():
        return "built for VNNI CPUs: this CPU has none, so its INT8 sums may saturate"
    return str(metadata.get("cpu_note", ""))


def _file_mb(candidate: Candidate) -> float | None:
    if candidate.manifest is None or candidate.manifest.target == BASELINE_TARGET:
        return None
    return round(sum(f["bytes"] for f in candidate.manifest.files.values()) / 1e6, 2)


def _family(candidate: Candidate) -> Family:
    assert candidate.manifest
    return family_named(candidate.manifest.metadata["family"])


def _imgsz(candidate: Candidate) -> int:
    assert candidate.manifest
    return int(candidate.manifest.metadata["imgsz"][0])


def _measure_group(group: list[Pair], prepared: dict[int, PreparedImages], dataset: Dataset,
                   settings: EvalSettings, progress: Progress) -> None:
    """``repeats`` rounds of (baseline, every artifact in rotated order); accuracy from each row's first measurement.

    The baseline goes first, so its predictions are there for the metrics that compare with it
    (a classifier's top-1 agreement).
    """
    schedule = measurement_schedule(group, settings.repeats)
    baseline: list[np.ndarray] | None = None
    for step, (round_, (row, candidate)) in enumerate(schedule, 1):
        if row.error:
            continue
        progress(f"[{step}/{len(schedule)}] {row.model} {row.name} (measurement {len(row.measurements) + 1})")
        family = _family(candidate)
        wants_accuracy = settings.accuracy and row.accuracy is None and wants_predictions(family, row.pretrained)
        images = prepared[_imgsz(candidate)]
        job = MeasureJob(candidate.folder, candidate.manifest, images.pixels, settings.batch_sizes,  # type: ignore[arg-type]
                         settings.min_time_s, settings.threads, settings.device, wants_accuracy)
        try:
            measurement, found = _in_own_process(job)
        except Exception as err:  # noqa: BLE001 - the row fails, the others go on
            row.error = f"runtime failed: {_one_line(err)}"
            continue
        measurement.round = round_
        row.measurements.append(measurement)
        if found is not None:
            baseline = found if row.target == BASELINE_TARGET else baseline
            row.accuracy = task_accuracy(family, found, dataset, images, names=candidate.manifest.metadata["names"],  # type: ignore[union-attr]
                                         pretrained=row.pretrained, baseline=baseline)
    if settings.accuracy:
        for row, _ in group:
            if row.accuracy is None and not row.pretrained:
                row.accuracy = Accuracy(None, None, len(dataset.images), RANDOM_WEIGHTS)


Pair = tuple[Row, Candidate]


def measurement_schedule(group: list[Pair], repeats: int) -> list[tuple[int, Pair]]:
    """(round, pair): the baseline first in every round, then the artifacts, starting one further along each round."""
    baseline = [pair for pair in group if pair[0].target == BASELINE_TARGET]
    others = [pair for pair in group if pair[0].target != BASELINE_TARGET]
    schedule: list[tuple[int, Pair]] = []
    for round_ in range(repeats):
        shift = round_ % len(others) if others else 0
        schedule += [(round_, pair) for pair in [*baseline, *others[shift:], *others[:shift]]]
    return schedule


def _in_own_process(job: MeasureJob) -> tuple[Measurement, list[np.ndarray] | None]:
    """A fresh process per measurement: clean memory, its own timing mode, crashes contained."""
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        try:
            return pool.submit(measure, job).result()
        except BrokenProcessPool:
            raise RuntimeError("the runtime crashed its process") from None


def _one_line(err: Exception) -> str:
    text = str(err).strip()
    return text.splitlines()[0][:200] if text else type(err).__name__
