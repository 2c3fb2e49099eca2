"""Hand-made results whose answers are known: rows of yolov5n artifacts with chosen latencies and accuracy."""

from __future__ import annotations

import numpy as np

from yolo_optimize.evaluate.accuracy import Accuracy
from yolo_optimize.evaluate.report import build_report
from yolo_optimize.evaluate.results import (
    BatchResult,
    LatencyStats,
    Measurement,
    Report,
    Row,
)

SETTINGS = {"data": "coco_val128", "batch_sizes": [1], "threads": 2, "device": "cpu", "min_time_s": 1.0,
            "repeats": 3, "max_images": None, "accuracy": True, "imgsz": None, "profile_dir": None}


def row(name: str, round_ms: list[float], map50_95: float, memory_mb: float = 300.0) -> Row:
    """A yolov5n row measured in one process per round, each round's runs around ``round_ms``."""
    target, precision = name.split("-")
    rng = np.random.default_rng(len(name))
    measurements = []
    for round_, ms in enumerate(round_ms):
        samples = list(ms / 1e3 * (1 + 0.01 * rng.standard_normal(20)))
        latency = LatencyStats.of(samples)
        measurements.append(Measurement(0.1, 0.1, [BatchResult(1, latency, round(1e3 / latency.p50_ms, 3))],
                                        memory_mb, None, precision, 2, None, round_))
    return Row(name, "yolov5n", target, precision, f"artifacts/yolov5n/{name}", 4.0, True,
               f"artifacts/yolov5n/{name}/{name}.file", "detect",
               measurements, Accuracy(map50_95, 0.5, 128))


def report(*rows: Row) -> Report:
    return build_report([row("pytorch-fp32", [100, 101, 99], 0.343), *rows], SETTINGS)
