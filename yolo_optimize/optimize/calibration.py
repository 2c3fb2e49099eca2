"""Calibration inputs and the accuracy gate, with the preprocessing evaluation uses."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from yolo_optimize.artifact import Manifest

VNNI_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")


def calibration_inputs(images: tuple[str, ...], imgsz: int) -> list[np.ndarray]:
    """One float32 [1, 3, imgsz, imgsz] input per calibration image, letterboxed like every evaluation."""
    from yolo_optimize.images import letterbox, to_input

    return [to_input(letterbox(Path(p), imgsz)[0][None]) for p in images]


def cpu_has_vnni() -> bool:
    """Without VNNI, ONNX Runtime's u8 x s8 kernels can saturate (see optimize/int8_onnx.py)."""
    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return False
    return any(flag in flags for flag in VNNI_FLAGS)


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


class Gate:
    """mAP50-95 of candidate models on the gate set, each run through its own runner."""

    def __init__(self, config: GateConfig, imgsz: int, threads: int) -> None:
        from yolo_optimize.evaluate.dataset import load_dataset, prepare_images

        self.config, self.threads = config, threads
        self.dataset = load_dataset(Path(config.data), max_images=config.images)
        self._work = tempfile.TemporaryDirectory(prefix="yolo-optimize-gate-")
        self.prepared = prepare_images(self.dataset, imgsz, Path(self._work.name), threads)
        self.pixels = np.load(self.prepared.pixels)

    def inputs(self) -> list[np.ndarray]:
        from yolo_optimize.images import to_input

        return [to_input(image[None]) for image in self.pixels]

    def map_of_outputs(self, found: list[np.ndarray]) -> float:
        from yolo_optimize.evaluate.accuracy import coco_results, mean_average_precision

        accuracy = mean_average_precision(coco_results(found, self.dataset, self.prepared), self.dataset)
        return float(accuracy.map50_95 or 0.0)

    def map_of(self, folder: Path, manifest: Manifest, device: str = "cpu") -> float:
        """Run the artifact in ``folder`` (described by ``manifest``) over the gate set."""
        from yolo_optimize.evaluate.measure import detect_all
        from yolo_optimize.evaluate.runners import open_runner

        with open_runner(folder, manifest, device=device, threads=self.threads) as runner:
            return self.map_of_outputs(detect_all(runner.infer, self.pixels, 8))

    def close(self) -> None:
        self._work.cleanup()


def candidate_manifest(parent: Manifest, *, node: str, precision: str, entry: str) -> Manifest:
    """An unwritten manifest that lets a runner load a candidate before it is published."""
    return replace(parent, node=node, precision=precision, entry=entry, files={}, parity=None)


@dataclass
class GateRecord:
    """Every route an INT8 stage tried on the gate set, in order, against the FP32 parent's mAP50-95."""

    config: GateConfig
    reference: float
    attempts: list[dict[str, Any]] = field(default_factory=list)

    def add(self, route: str, candidate: float) -> bool:
        """Record a candidate's score; True when it passes the gate."""
        drop = (self.reference - candidate) * 100
        self.attempts.append({"route": route, "map50_95": round(candidate, 4), "drop_points": round(drop, 3),
                              "passed": drop <= self.config.max_map_drop})
        return drop <= self.config.max_map_drop

    def result(self, **extra: Any) -> dict[str, Any]:
        """The manifest's ``info.gate``: the kept (last) attempt, the limit and every attempt."""
        return {"gate_data": self.config.data, "gate_images": self.config.images,
                "fp32_map50_95": round(self.reference, 4), **self.attempts[-1],
                "max_drop_points": self.config.max_map_drop, "attempts": self.attempts, **extra}

    def require_pass(self) -> None:
        """Fail the node with the measured drop of every route when none passed."""
        last = self.attempts[-1]
        if not last["passed"]:
            tried = "; ".join(f"{a['route']}: {a['drop_points']}" for a in self.attempts)
            raise RuntimeError(f"accuracy gate failed: mAP50-95 {last['map50_95']} vs FP32 {round(self.reference, 4)}"
                               f" = {last['drop_points']} points > --max-map-drop {self.config.max_map_drop}"
                               f" (points lost per route: {tried})")
