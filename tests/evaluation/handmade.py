"""Hand-made results whose answers are known: rows of yolov5n artifacts with chosen latencies and accuracy."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from yolo_optimize.evaluation.reporting.report import build_report
from yolo_optimize.evaluation.results import BatchResult, EvalSettings, Measurement, Report, Row
from yolo_optimize.evaluation.run_statistics import LatencyStats
from yolo_optimize.runtime.accuracy import Accuracy

SETTINGS = EvalSettings(data=Path("coco_val128"), batch_sizes=(1,), threads=2, device="cpu", min_time_s=1.0, repeats=3,
                        max_images=None, accuracy=True, imgsz=None)


def row(name: str, round_ms: list[float], map50_95: float, memory_mb: float = 300.0,
        end_to_end_ms: list[float] | None = None, execution: dict | None = None) -> Row:
    """A yolov5n row measured in one process per round, each round's runs around ``round_ms`` (and its end-to-end
    path's around ``end_to_end_ms``), run as ``execution`` says."""
    target, precision = name.split("-")
    rng = np.random.default_rng(len(name))
    measurements = []
    for round_, ms in enumerate(round_ms):
        latency = _stats(ms, rng)
        path = _stats(end_to_end_ms[round_], rng) if end_to_end_ms else None
        measurements.append(Measurement(0.1, 0.1, [BatchResult(1, latency, round(1e3 / latency.p50_ms, 3),
                                                               execution=execution, end_to_end=path,
                                                               end_to_end_ips=round(1e3 / path.p50_ms, 3)
                                                               if path else None)],
                                        memory_mb, None, precision, 2, None, round_))
    return Row(name, "yolov5n", target, precision, f"artifacts/yolov5n/{name}", 4.0, True,
               f"artifacts/yolov5n/{name}/{name}.file", "detect",
               measurements, Accuracy(map50_95, 0.5, 128))


def at_batch(row: Row, batch: int, error: str = "") -> Row:
    """``row`` measured at ``batch`` too, with its batch-1 runs; with ``error``, failing there instead."""
    for measurement in row.measurements:
        first = measurement.batches[0]
        measurement.batches.append(BatchResult(batch, error=error) if error else replace(first, batch=batch))
    return row


def _stats(ms: float, rng: np.random.Generator) -> LatencyStats:
    return LatencyStats.of(list(ms / 1e3 * (1 + 0.01 * rng.standard_normal(20))))


def report(*rows: Row) -> Report:
    return build_report([row("pytorch-fp32", [100, 101, 99], 0.343), *rows], SETTINGS)
