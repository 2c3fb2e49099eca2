"""Measurement helpers: statistics, per-batch failures, and a peak memory that is the worker's own."""

from __future__ import annotations

import numpy as np

from yolo_optimize.evaluate.measure import peak_rss, time_batch
from yolo_optimize.evaluate.results import LatencyStats


def test_latency_statistics_keep_samples_and_units() -> None:
    stats = LatencyStats.of([0.010, 0.020, 0.030, 0.040])
    assert stats.samples_ms == [10.0, 20.0, 30.0, 40.0] and stats.p50_ms == 25.0 and stats.mean_ms == 25.0
    assert stats.p50_ms <= stats.p90_ms <= stats.p99_ms


def test_a_batch_size_the_runtime_refuses_is_reported_not_dropped() -> None:
    def only_batch_one(images: np.ndarray) -> np.ndarray:
        if len(images) != 1:
            raise ValueError("Got invalid dimensions for input: images, index 0 Got 8 Expected 1")
        return images

    assert time_batch(only_batch_one, np.zeros((1, 3, 8, 8), np.float32), 0.0).throughput_ips
    refused = time_batch(only_batch_one, np.zeros((8, 3, 8, 8), np.float32), 0.0)
    assert refused.throughput_ips is None and refused.error.startswith("unsupported: Got invalid dimensions")


def test_peak_rss_is_positive_and_bounded_by_this_process() -> None:
    assert 10 * 2**20 < peak_rss() < 64 * 2**30
