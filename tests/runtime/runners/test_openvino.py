"""The OpenVINO runner: one static-shape model per batch size, the same detections at every batch size."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.conftest import VAL_DATA
from yolo_optimize.artifact import Manifest
from yolo_optimize.families import family_named
from yolo_optimize.images import list_images, to_input
from yolo_optimize.runtime.runners.openvino import OpenVinoRunner


def test_a_batch_equals_its_images_one_by_one(built: Path) -> None:
    folder = built / "openvino-fp32"
    images = to_input(np.stack([family_named("yolov5").preprocess(p, 640).pixels for p in list_images(VAL_DATA)[:8]]))
    with OpenVinoRunner(folder, Manifest.read(folder), threads=2) as runner:
        batched = runner.infer(images)
        one_by_one = np.concatenate([runner.infer(image[None]).copy() for image in images])
        assert runner.executed_precision == "fp32"
    assert batched.shape == (8, 25200, 85)
    np.testing.assert_allclose(batched, one_by_one, rtol=1e-4, atol=1e-3)
