"""The INT8 accuracy gate: candidates scored with the family's task metric on images that are neither the evaluation
set nor calibration images (``held_out.py``).

Detectors are gated on COCO mAP50-95 (labels needed). Classifiers are gated on top-1
agreement with their FP32 parent (no labels needed, meaningful for random weights too);
the share of images whose top-1 class changed bounds the change of top-1 accuracy on any
labels, so the same ``--max-map-drop`` points limit a classifier's top-1 drop. Every
drop comes with a 90% interval from a paired bootstrap over the gate images.
"""

from __future__ import annotations

import tempfile
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from yolo_optimize.artifact import Manifest
from yolo_optimize.building.held_out import ImageSet, relative_names
from yolo_optimize.building.request import GateConfig
from yolo_optimize.families.base import Family
from yolo_optimize.metadata import FLOAT32_NCHW, InputSpec
from yolo_optimize.runtime.dataset import Dataset, PreparedImages

if TYPE_CHECKING:
    from yolo_optimize.runtime.accuracy import PairedBootstrap

BOOTSTRAP_RESAMPLES = 100  # each costs one COCOeval accumulation of the gate set for detectors (about 0.01 s)
VACUOUS = "vacuous: the FP32 model scores 0 mAP on the gate set (random weights?), so no drop can show"
GATE_RULE = ("pass when the measured drop of the {metric} on the gate set is at most --max-map-drop points; the "
             "90% interval is a paired bootstrap over the gate images")


@dataclass(frozen=True)
class GateScore:
    """A model's predictions on the gate images, in order, and what its metric makes of them."""

    value: float  # in [0, 1]: mAP50-95, or top-1 agreement with the FP32 parent
    predictions: list[np.ndarray]
    evidence: Any = None  # what the metric's bootstrap resamples (detectors: COCO result entries)


class GateMetric(ABC):
    """A family's task metric on the gate set, scored relative to the FP32 parent where it has to be."""

    name: str
    needs_labels: bool

    def __init__(self, dataset: Dataset, prepared: PreparedImages) -> None:
        self.dataset, self.prepared = dataset, prepared
        self.reference: GateScore | None = None

    def set_reference(self, reference: GateScore) -> None:
        self.reference = reference

    @abstractmethod
    def score(self, predictions: list[np.ndarray]) -> GateScore: ...

    @abstractmethod
    def bootstrap_drops(self, candidate: GateScore) -> list[float]:
        """The drop (points, reference minus candidate) on each resample of the gate images."""

    def vacuous(self) -> str | None:
        """Why no drop can show on this gate set (None: a drop can show)."""
        return None


class MapMetric(GateMetric):
    """COCO mAP50-95 after the family's own decoding; the bootstrap is ``PairedBootstrap``."""

    name = "mAP50-95"
    needs_labels = True

    def score(self, predictions: list[np.ndarray]) -> GateScore:
        from yolo_optimize.runtime.accuracy import coco_results, mean_average_precision

        if not self.dataset.boxes:  # the build refuses such a gate set up front; never a pass on no evidence
            raise RuntimeError(f"the gate set's {len(self.dataset.images)} images hold no labelled box: no mAP")
        results = coco_results(predictions, self.dataset, self.prepared)
        return GateScore(float(mean_average_precision(results, self.dataset).map50_95 or 0.0), predictions, results)

    @cached_property
    def _bootstrap(self) -> PairedBootstrap:
        """The reference's scores on every draw, computed once and only where a drop is recorded (not for tuning)."""
        from yolo_optimize.runtime.accuracy import PairedBootstrap

        assert self.reference is not None
        return PairedBootstrap(self.reference.evidence, self.dataset, BOOTSTRAP_RESAMPLES)

    def bootstrap_drops(self, candidate: GateScore) -> list[float]:
        return self._bootstrap.drops(candidate.evidence)

    def vacuous(self) -> str | None:
        return VACUOUS if self.reference is not None and self.reference.value == 0 else None


class AgreementMetric(GateMetric):
    """Share of gate images whose top-1 class is the FP32 parent's (the parent scores 1 by definition)."""

    name = "top-1 agreement with FP32"
    needs_labels = False

    def score(self, predictions: list[np.ndarray]) -> GateScore:
        agrees = self._agrees(predictions)
        return GateScore(float(agrees.mean()) if len(agrees) else 1.0, predictions, agrees)

    def set_reference(self, reference: GateScore) -> None:
        super().set_reference(reference)
        rng = np.random.default_rng(0)
        count = len(reference.predictions)
        self.draws = [rng.integers(0, count, size=count) for _ in range(BOOTSTRAP_RESAMPLES)]

    def bootstrap_drops(self, candidate: GateScore) -> list[float]:
        return [float((1 - candidate.evidence[draw].mean()) * 100) for draw in self.draws]

    def _agrees(self, predictions: list[np.ndarray]) -> np.ndarray:
        if self.reference is None:
            return np.ones(len(predictions), bool)  # the parent itself, scored first
        return np.array([int(p[0]) == int(r[0]) for p, r in zip(predictions, self.reference.predictions)], bool)


def gate_metric_class(family: Family) -> type[GateMetric]:
    """The gate's metric for the family's task."""
    return AgreementMetric if family.task == "classify" else MapMetric


class Gate:
    """Candidate models scored on a set of labelled images (the gate's, or the tuning set of the accuracy-aware
    route), each run through its own runner, against the FP32 parent."""

    def __init__(self, images: ImageSet, family: Family, imgsz: int, threads: int) -> None:
        from yolo_optimize.runtime.dataset import load_dataset, prepare_images

        self.family, self.threads = family, threads
        self.dataset = load_dataset(Path(images.root)).subset(images.images)
        self._work = tempfile.TemporaryDirectory(prefix="yolo-optimize-gate-")
        self.prepared = prepare_images(self.dataset, family, imgsz, Path(self._work.name), threads)
        self.pixels = np.load(self.prepared.pixels)
        self.metric = gate_metric_class(family)(self.dataset, self.prepared)

    def inputs(self, spec: InputSpec = FLOAT32_NCHW) -> list[np.ndarray]:
        """Each gate image as a single-image batch in the form the model takes (``spec``: what its metadata says)."""
        from yolo_optimize.images import model_input

        return [model_input(image[None], spec.prepared) for image in self.pixels]

    def score_raw(self, outputs: list[np.ndarray]) -> GateScore:
        """Score raw model outputs of the gate images, in order."""
        return self.metric.score([d for output in outputs for d in self.family.predictions(output)])

    def score(self, folder: Path, manifest: Manifest, device: str = "cpu") -> GateScore:
        """Run the artifact in ``folder`` (described by ``manifest``) over the gate set."""
        from yolo_optimize.runtime.accuracy import predict_all
        from yolo_optimize.runtime.runners import open_runner

        with open_runner(folder, manifest, device=device, threads=self.threads) as runner:
            return self.metric.score(predict_all(self.family, runner, self.pixels, 8))

    def close(self) -> None:
        self._work.cleanup()


@dataclass
class GateRecord:
    """Every route an INT8 stage tried on the gate set, in order, against the FP32 parent's score.

    The decision rule: a route passes when its measured drop is at most the limit. The
    drop's noise is reported beside it: a 90% interval from a paired bootstrap over the
    gate images, and whether the limit lies inside it (then the verdict is within noise).
    """

    config: GateConfig
    reference: GateScore
    gate: Gate
    attempts: list[dict[str, Any]] = field(default_factory=list)
    not_tried: dict[str, str] = field(default_factory=dict)  # route -> why it was not tried
    tuned: ImageSet | None = None  # the images a route tuned on (the accuracy-aware route's), where one did

    def __post_init__(self) -> None:
        self.gate.metric.set_reference(self.reference)

    def add(self, route: str, candidate: GateScore) -> bool:
        """Record a candidate's score; True when it passes the gate."""
        drop = (self.reference.value - candidate.value) * 100
        low, high = (float(v) for v in np.percentile(self.gate.metric.bootstrap_drops(candidate), [5, 95]))
        passed = drop <= self.config.max_map_drop
        self.attempts.append({"route": route, "score": round(candidate.value, 4), "drop_points": round(drop, 3),
                              "drop_90ci_points": [round(low, 3), round(high, 3)],
                              "verdict": self._verdict(low, high), "passed": passed})
        return passed

    def _verdict(self, low: float, high: float) -> str:
        if vacuous := self.gate.metric.vacuous():
            return vacuous
        return "within noise of the limit" if low <= self.config.max_map_drop <= high else "clear"

    def skip(self, route: str, why: str) -> None:
        """A route that would have come next and was not tried, with why (in the record and any failure)."""
        self.not_tried[route] = why

    def result(self, calibrated: tuple[str, ...]) -> dict[str, Any]:
        """The manifest's ``info.gate``: the kept (last) attempt, the limit, the rule, every attempt, and which images
        calibrated (``calibrated``), tuned and gated."""
        metric = self.gate.metric.name
        return {"gate_data": self.config.images.root, "gate_images": len(self.gate.dataset.images),
                "held_out": self.config.held_out, "metric": metric, "fp32_score": round(self.reference.value, 4),
                **self.attempts[-1], "max_drop_points": self.config.max_map_drop,
                "rule": GATE_RULE.format(metric=metric), "bootstrap_resamples": BOOTSTRAP_RESAMPLES,
                "attempts": self.attempts, "not_tried": self.not_tried,
                "images": {"calibrated": relative_names(calibrated), "gated": self.config.images.names(),
                           "tuned": self.tuned.names() if self.tuned else []}}

    def require_pass(self) -> None:
        """Fail the node with the measured drop of every route when none passed."""
        last = self.attempts[-1]
        if not last["passed"]:
            tried = "; ".join(f"{a['route']}: {a['drop_points']} (90% CI {a['drop_90ci_points'][0]} to "
                              f"{a['drop_90ci_points'][1]})" for a in self.attempts)
            skipped = "".join(f"; {route} not tried: {why}" for route, why in self.not_tried.items())
            raise RuntimeError(f"accuracy gate failed: {self.gate.metric.name} {last['score']} vs FP32 "
                               f"{round(self.reference.value, 4)} = {last['drop_points']} points > --max-map-drop "
                               f"{self.config.max_map_drop} (points lost per route: {tried}{skipped})")
