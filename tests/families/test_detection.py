"""What the detectors share: the decode the evaluator and the INT8 gate score never stops at an NMS time limit."""

from __future__ import annotations

import importlib
import itertools
import types

import numpy as np
import pytest

from yolo_optimize.families import family_named


def raw_anchor_output(images: int = 8, anchors: int = 200, classes: int = 80) -> np.ndarray:
    """YOLOv5/YOLOv7 rows (xywh in 640 pixels, objectness, class probabilities): dozens of candidates an image."""
    rng = np.random.default_rng(0)
    rows = np.concatenate([rng.uniform(20, 620, (images, anchors, 2)), rng.uniform(10, 200, (images, anchors, 2)),
                           rng.uniform(0, 1, (images, anchors, 1 + classes))], axis=-1)
    return rows.astype(np.float32)


@pytest.mark.parametrize(("family", "module"), [("yolov5", "yolov5.utils.general"),
                                                ("yolov7", "yolov7_package.utils.general")])
def test_every_image_of_a_batch_is_decoded_however_slow_the_host(family: str, module: str,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """YOLOv5's NMS gives up after 0.5 + 0.05 s per image of the batch, YOLOv7's after 10 s, dropping the rest of
    the batch; here every reading of their clock is 100 s after the last, as on a host far slower than either limit."""
    detector, general = family_named(family), importlib.import_module(module)
    raw = raw_anchor_output()
    expected = detector.decode(raw, 0.25, 0.6, multi_label=False, max_det=300)
    slow = types.SimpleNamespace(time=itertools.count(0, 100).__next__)
    monkeypatch.setattr(general, "time", slow)
    found = detector.decode(raw, 0.25, 0.6, multi_label=False, max_det=300)
    assert all(len(image) for image in expected) and general.time is slow, "the module's own clock is put back"
    for mine, theirs in zip(found, expected, strict=True):
        np.testing.assert_array_equal(mine, theirs)


def test_ultralytics_nms_is_given_no_time_limit() -> None:
    from yolo_optimize.families.ultralytics import NMS_TIME_LIMIT_S

    assert NMS_TIME_LIMIT_S == float("inf")
