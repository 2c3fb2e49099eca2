"""The pipelined deployed path: the same kept predictions as one step after the other, timed per batch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.conftest import VAL_DATA
from yolo_optimize.artifact import Manifest
from yolo_optimize.evaluation.measuring.end_to_end import EndToEnd, sequential
from yolo_optimize.evaluation.run_statistics import BLOCK_S
from yolo_optimize.families import family_named
from yolo_optimize.images import list_images
from yolo_optimize.runtime.runners import open_runner


@pytest.mark.alone  # the reader keeps ahead of the runtime only where it gets its core
def test_the_pipeline_keeps_the_same_detections_as_the_sequential_path(small_artifacts: Path) -> None:
    """Six image files at batch 2 through the pipeline (reading batch N+1 while N infers) and one step after the
    other: the same detections, image by image, in the same order; then a block of intervals of at least BLOCK_S."""
    folder = small_artifacts / "yolov5n" / "onnx-fp32"
    family, files = family_named("yolov5"), tuple(list_images(VAL_DATA)[:6])
    with open_runner(folder, Manifest.read(folder), threads=2) as runner:
        expected = sequential(family, runner, files, 640, 2)
        path = EndToEnd(family, runner, files, 640, 2)
        try:
            found = [kept for _ in range(3) for kept in path.step()]
            intervals = path.block(BLOCK_S)
        finally:
            path.close()
    assert len(found) == len(expected) == 6 and sum(len(k) for k in expected) > 10
    for got, want in zip(found, expected):
        assert got.shape == want.shape and np.allclose(got, want, atol=1e-4)
    assert sum(intervals) >= BLOCK_S and all(0 < t < 5 for t in intervals)
    settings = path.settings()  # one reader prepares an image in ~5 ms, the runtime infers it in ~30 on two cores
    assert len(path.waits) == len(path.runs) == 3 + len(intervals)  # the block's warm-up batch left out
    assert settings["bound_by"] == "the runtime (inference, NMS)", settings
    assert settings["waited_for_images_ms"] < 0.1 * settings["inference_and_postprocess_ms"]
