"""Typed results that keep raw samples, statistics and units (optimum-benchmark style)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from yolo_optimize.evaluate.accuracy import Accuracy
from yolo_optimize.evaluate.facts import ModelFacts

SCHEMA_VERSION = 3  # 2: interleaved rounds, per-round speedups; 3: model facts, machine limits, utilization


@dataclass
class LatencyStats:
    """Per-batch latency of timed runs, in milliseconds; ``samples`` are the raw runs."""

    samples_ms: list[float]
    mean_ms: float
    std_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float

    @classmethod
    def of(cls, seconds: list[float]) -> LatencyStats:
        ms = np.asarray(seconds) * 1e3
        p50, p90, p99 = np.percentile(ms, [50, 90, 99])
        return cls([round(float(s), 4) for s in ms], round(float(ms.mean()), 4), round(float(ms.std()), 4),
                   round(float(p50), 4), round(float(p90), 4), round(float(p99), 4))


@dataclass
class BatchResult:
    batch: int
    latency: LatencyStats | None = None
    throughput_ips: float | None = None  # images per second, from the median latency
    error: str = ""  # e.g. the artifact cannot take this batch size


@dataclass
class Measurement:
    """One process's measurement of one artifact."""

    load_s: float
    first_inference_s: float
    batches: list[BatchResult]
    peak_rss_mb: float
    cuda_peak_mb: float | None
    executed_precision: str
    threads: int
    round: int = 0  # the interleaved round it was taken in

    def throughput(self, batch: int) -> float | None:
        return next((b.throughput_ips for b in self.batches if b.batch == batch), None)


@dataclass
class Row:
    """One artifact (or the PyTorch baseline) across its repeated measurements."""

    name: str  # target-precision
    model: str
    target: str
    precision: str
    folder: str
    file_mb: float | None
    pretrained: bool
    task: str = ""  # the family's task ("detect", "classify"): which accuracy columns apply
    measurements: list[Measurement] = field(default_factory=list)
    accuracy: Accuracy | None = None
    cpu_note: str = ""  # what the artifact's arithmetic assumes of the CPU, and whether this one has it
    facts: ModelFacts | None = None  # the model's at the row's input size (None: could not be counted)
    profile: dict[str, Any] | None = None  # eval --profile: profiling.ArtifactProfile less its layers (profile.json)
    error: str = ""  # set when the row could not be measured at all


@dataclass
class Report:
    schema_version: int
    environment: dict[str, Any]
    settings: dict[str, Any]
    rows: list[Row]
    matrix: list[dict[str, Any]]
    machine_limits: dict[str, Any] | None = None  # machine/peaks.py's MachineLimits (eval --profile)
