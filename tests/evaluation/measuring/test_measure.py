"""Measurement helpers: statistics, per-batch failures, and a peak memory that is the worker's own."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

from yolo_optimize.artifact import Manifest
from yolo_optimize.evaluation.measuring.measure import MeasureJob, Timing, measure, peak_rss, time_batch
from yolo_optimize.evaluation.run_statistics import LatencyStats
from yolo_optimize.host.processes import in_own_process


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


PEAK_OF_AN_ALLOCATION = """
import numpy as np
from yolo_optimize.evaluation.measuring.measure import peak_rss
before = peak_rss()
ballast = np.ones(256 * 2**20, dtype=np.uint8)  # touched: resident
print(before, peak_rss(), int(ballast[-1]))
"""


def test_peak_rss_rises_by_what_the_process_allocates() -> None:
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", PEAK_OF_AN_ALLOCATION], capture_output=True, text=True, check=True)
    before, after, _ = map(int, result.stdout.split())
    assert 0.95 * 256 * 2**20 <= after - before <= 1.2 * 256 * 2**20, (before, after)


@pytest.mark.parametrize(("error", "said"), [
    (MemoryError(), "out of memory: MemoryError"),
    (RuntimeError("std::bad_alloc"), "out of memory: RuntimeError: std::bad_alloc"),
    (RuntimeError("the engine's kernel is broken"), "crashed: RuntimeError: the engine's kernel is broken"),
])
def test_failures_are_classified_by_what_went_wrong(error: Exception, said: str) -> None:
    from yolo_optimize.evaluation.measuring.measure import failure

    assert failure(error) == said


def test_a_shape_onnx_runtime_refuses_is_unsupported_and_nothing_else_is(small_artifacts: Path) -> None:
    """The real refusal of a fixed-size graph fed another size, as ONNX Runtime words it."""
    import onnxruntime as ort

    from yolo_optimize.evaluation.measuring.measure import failure

    session = ort.InferenceSession(str(small_artifacts / "yolov5n" / "onnx-fp32" / "yolov5n.onnx"),
                                   providers=["CPUExecutionProvider"])
    with pytest.raises(Exception) as refused:
        session.run(None, {"images": np.zeros((1, 3, 320, 320), np.float32)})
    assert failure(refused.value).startswith("unsupported: "), failure(refused.value)


def test_a_measurement_reports_its_own_process_peak_not_its_parents(small_artifacts: Path) -> None:
    """A parent holding 2 GiB spawns the worker: the worker's peak must not include them."""
    folder = small_artifacts / "yolov5n" / "onnx-fp32"
    ballast = np.ones(2**31, dtype=np.uint8)  # touched, so resident in this process
    assert peak_rss() > 2**31
    with tempfile.TemporaryDirectory() as work:
        pixels = Path(work) / "images.npy"
        np.save(pixels, np.zeros((1, 640, 640, 3), np.uint8))
        job = MeasureJob(folder, Manifest.read(folder), pixels, Timing((1,), 0.0, 1), predict=False)
        measurement, _ = in_own_process(measure, job)
    assert 100 < measurement.peak_rss_mb < 1500, measurement.peak_rss_mb  # ONNX Runtime with yolov5n: ~0.5 GB
    assert int(ballast[-1]) == 1


def test_on_cuda_every_timed_run_is_split_into_copies_and_compute_within_its_latency() -> None:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device is visible to torch: the copy/compute split by CUDA events needs one")
    from yolo_optimize.runtime.runners.cuda_phases import CudaPhases

    phases, conv = CudaPhases(), torch.nn.Conv2d(3, 64, 3, padding=1).cuda().eval()

    def infer(images: np.ndarray) -> np.ndarray:
        phases.start()
        batch = torch.from_numpy(images).cuda()
        phases.mark()
        with torch.inference_mode():
            output = conv(batch)
        phases.mark()
        found = output.cpu().numpy()
        phases.finish()
        return found

    timed = time_batch(infer, np.random.default_rng(0).random((8, 3, 320, 320), np.float32), 0.2, phases)
    assert timed.latency and timed.phases_ms and set(timed.phases_ms) == {"copy_in", "compute", "copy_out"}
    runs = len(timed.latency.samples_ms)
    assert all(len(stats.samples_ms) == runs for stats in timed.phases_ms.values()), "warm-up runs are not kept"
    assert all(stats.p50_ms > 0 for stats in timed.phases_ms.values())
    assert sum(stats.p50_ms for stats in timed.phases_ms.values()) <= timed.latency.p50_ms * 1.05
