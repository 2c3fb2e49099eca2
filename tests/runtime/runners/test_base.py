"""The configurations a runner runs in: throughput computes what latency computes, and says how it ran."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.conftest import VAL_DATA
from yolo_optimize.artifact import Manifest
from yolo_optimize.families import family_named
from yolo_optimize.images import list_images
from yolo_optimize.runtime.runners import open_runner
from yolo_optimize.runtime.runners.base import AUTO, LATENCY, THROUGHPUT, wanted_mode


def test_auto_is_latency_for_one_image_and_throughput_for_more() -> None:
    assert [wanted_mode(AUTO, b) for b in (1, 2, 8)] == [LATENCY, THROUGHPUT, THROUGHPUT]
    assert wanted_mode(LATENCY, 8) == LATENCY and wanted_mode(THROUGHPUT, 1) == THROUGHPUT


@pytest.mark.parametrize("name", ["onnx-fp32", "openvino-fp32"])
def test_throughput_spreads_a_batch_over_one_thread_requests_and_computes_the_same_outputs(small_artifacts: Path,
                                                                                           name: str) -> None:
    """Three real images (an odd batch, more than the streams) through both configurations of one runtime: the same
    numbers, and each configuration described as it ran (OpenVINO's streams and requests read back from it)."""
    folder = small_artifacts / "yolov5n" / name
    pixels = np.stack([family_named("yolov5").preprocess(p, 640).pixels for p in list_images(VAL_DATA)[:3]])
    outputs, executions = {}, {}
    for mode in (LATENCY, THROUGHPUT):
        with open_runner(folder, Manifest.read(folder), threads=2, mode=mode) as runner:
            outputs[mode] = runner.infer(runner.input_of(pixels)).copy()
            executions[mode] = runner.execution(3)
    assert np.array_equal(outputs[LATENCY], outputs[THROUGHPUT])
    latency, throughput = executions[LATENCY], executions[THROUGHPUT]
    assert (latency.mode, latency.streams, latency.threads_per_stream, latency.request_batch) == (LATENCY, 1, 2, 3)
    assert throughput.mode == THROUGHPUT and throughput.request_batch == 1 and throughput.threads_per_stream == 1
    assert throughput.streams == 2 and throughput.requests >= throughput.streams
    assert throughput.label == "throughput 2x1" and latency.label == "latency 1x2"
    hint, expected = (("PERFORMANCE_HINT", ("THROUGHPUT", "LATENCY")) if name.startswith("openvino")
                      else ("intra_op_num_threads", (1, 2)))
    assert (throughput.settings[hint], latency.settings[hint]) == expected


def test_a_runtime_without_a_throughput_configuration_says_it_ran_as_it_is(small_artifacts: Path) -> None:
    folder = small_artifacts / "yolov5n" / ".cache" / "load"
    from yolo_optimize.evaluation.measuring.discover import discover

    baseline = next(c for c in discover(small_artifacts) if c.target == "pytorch")
    assert baseline.folder == folder and baseline.manifest
    with open_runner(folder, baseline.manifest, threads=2, mode=AUTO) as runner:
        execution = runner.execution(8)
    assert execution.mode == LATENCY and execution.label == "latency 1x2"
    assert execution.note == "pytorch has no throughput configuration: run as it is"
