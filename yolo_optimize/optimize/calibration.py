"""Calibration inputs and the accuracy gate, with the preprocessing evaluation uses."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from yolo_optimize.artifact import Manifest
from yolo_optimize.families.detection import Detector

BOOTSTRAP_RESAMPLES = 100  # each costs one COCOeval of the gate set (about 0.3 s for 128 images)
VACUOUS = "vacuous: the FP32 model scores 0 mAP on the gate set (random weights?), so no drop can show"
GATE_RULE = ("pass when the measured mAP50-95 drop on the gate set is at most --max-map-drop points; the 90% "
             "interval is a paired bootstrap over the gate images")


def calibration_inputs(family: Detector, images: tuple[str, ...], imgsz: int) -> list[np.ndarray]:
    """One float32 [1, 3, imgsz, imgsz] input per calibration image, preprocessed like every evaluation."""
    from yolo_optimize.images import to_input

    return [to_input(family.preprocess(Path(p), imgsz).pixels[None]) for p in images]


@dataclass(frozen=True)
class GateConfig:
    """The labelled images (never the evaluation set) and the largest mAP50-95 drop allowed, in points."""

    data: str
    images: int | None
    max_map_drop: float


@dataclass(frozen=True)
class Int8Config:
    """What every INT8 stage is given: the input size, the calibration images and the gate."""

    imgsz: int
    calib_images: tuple[str, ...]
    gate: GateConfig


@dataclass(frozen=True)
class GateScore:
    """A model's mAP50-95 on the gate set and the detections it came from (for the bootstrap)."""

    map50_95: float
    results: list[dict[str, Any]]


class Gate:
    """mAP50-95 of candidate models on the gate set, each run through its own runner."""

    def __init__(self, config: GateConfig, family: Detector, imgsz: int, threads: int) -> None:
        from yolo_optimize.evaluate.dataset import load_dataset, prepare_images

        self.config, self.family, self.threads = config, family, threads
        self.dataset = load_dataset(Path(config.data), max_images=config.images)
        self._work = tempfile.TemporaryDirectory(prefix="yolo-optimize-gate-")
        self.prepared = prepare_images(self.dataset, family, imgsz, Path(self._work.name), threads)
        self.pixels = np.load(self.prepared.pixels)

    def inputs(self) -> list[np.ndarray]:
        from yolo_optimize.images import to_input

        return [to_input(image[None]) for image in self.pixels]

    def score_raw(self, outputs: list[np.ndarray]) -> GateScore:
        """Score raw model outputs of the gate images, in order."""
        return self.score_outputs([d for output in outputs for d in self.family.predictions(output)])

    def score_outputs(self, found: list[np.ndarray]) -> GateScore:
        from yolo_optimize.evaluate.accuracy import coco_results, mean_average_precision

        results = coco_results(found, self.dataset, self.prepared)
        return GateScore(float(mean_average_precision(results, self.dataset).map50_95 or 0.0), results)

    def score(self, folder: Path, manifest: Manifest, device: str = "cpu") -> GateScore:
        """Run the artifact in ``folder`` (described by ``manifest``) over the gate set."""
        from yolo_optimize.evaluate.measure import predict_all
        from yolo_optimize.evaluate.runners import open_runner

        with open_runner(folder, manifest, device=device, threads=self.threads) as runner:
            return self.score_outputs(predict_all(self.family, runner.infer, self.pixels, 8))

    def close(self) -> None:
        self._work.cleanup()


def candidate_manifest(parent: Manifest, *, node: str, precision: str, entry: str) -> Manifest:
    """An unwritten manifest that lets a runner load a candidate before it is published."""
    return replace(parent, node=node, precision=precision, entry=entry, files={}, parity=None)


@dataclass
class GateRecord:
    """Every route an INT8 stage tried on the gate set, in order, against the FP32 parent's mAP50-95.

    The decision rule: a route passes when its measured drop is at most the limit. The
    drop's noise is reported beside it: a 90% interval from a paired bootstrap over the
    gate images, and whether the limit lies inside it (then the verdict is within noise).
    """

    config: GateConfig
    reference: GateScore
    gate: Gate
    attempts: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        from yolo_optimize.evaluate.accuracy import PairedBootstrap

        self.bootstrap = PairedBootstrap(self.reference.results, self.gate.dataset, BOOTSTRAP_RESAMPLES)

    def add(self, route: str, candidate: GateScore) -> bool:
        """Record a candidate's score; True when it passes the gate."""
        drop = (self.reference.map50_95 - candidate.map50_95) * 100
        low, high = (float(v) for v in np.percentile(self.bootstrap.drops(candidate.results), [5, 95]))
        passed = drop <= self.config.max_map_drop
        self.attempts.append({"route": route, "map50_95": round(candidate.map50_95, 4), "drop_points": round(drop, 3),
                              "drop_90ci_points": [round(low, 3), round(high, 3)],
                              "verdict": self._verdict(low, high), "passed": passed})
        return passed

    def _verdict(self, low: float, high: float) -> str:
        if self.reference.map50_95 == 0:
            return VACUOUS
        return "within noise of the limit" if low <= self.config.max_map_drop <= high else "clear"

    def result(self, **extra: Any) -> dict[str, Any]:
        """The manifest's ``info.gate``: the kept (last) attempt, the limit, the rule and every attempt."""
        return {"gate_data": self.config.data, "gate_images": len(self.gate.dataset.images),
                "fp32_map50_95": round(self.reference.map50_95, 4), **self.attempts[-1],
                "max_drop_points": self.config.max_map_drop, "rule": GATE_RULE,
                "bootstrap_resamples": BOOTSTRAP_RESAMPLES, "attempts": self.attempts, **extra}

    def require_pass(self) -> None:
        """Fail the node with the measured drop of every route when none passed."""
        last = self.attempts[-1]
        if not last["passed"]:
            tried = "; ".join(f"{a['route']}: {a['drop_points']} (90% CI {a['drop_90ci_points'][0]} to "
                              f"{a['drop_90ci_points'][1]})" for a in self.attempts)
            raise RuntimeError(f"accuracy gate failed: mAP50-95 {last['map50_95']} vs FP32 "
                               f"{round(self.reference.map50_95, 4)} = {last['drop_points']} points > --max-map-drop "
                               f"{self.config.max_map_drop} (points lost per route: {tried})")
