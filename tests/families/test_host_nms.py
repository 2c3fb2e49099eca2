"""The families' host-side NMS on numpy: the detections their packages' own NMS functions keep, on a real model's
outputs, at every setting the project decodes with; and no torch imported to get them."""

from __future__ import annotations

import subprocess
import sys
import types

import numpy as np
import pytest
import torch

from tests.conftest import VAL_DATA, WEIGHTS
from yolo_optimize.checkpoint import load_model, resolve_source
from yolo_optimize.families import family_named
from yolo_optimize.images import list_images, to_input

SETTINGS = [(0.001, 0.6, True), (0.001, 0.65, False), (0.25, 0.45, False)]  # mAP; mAP best class; parity, deploy
STILL_CLOCK = types.SimpleNamespace(time=lambda: 0.0)  # their NMS stops after a few seconds on a slow host


@pytest.fixture(scope="module")
def yolov5_rows() -> np.ndarray:
    """yolov5n's [16, 25200, 85] output on 16 coco_val128 images at 640: thousands of candidates an image at 0.001."""
    yolov5 = family_named("yolov5")
    images = np.stack([yolov5.preprocess(path, 640).pixels for path in list_images(VAL_DATA)[:16]])
    with torch.inference_mode():
        return load_model(resolve_source(str(WEIGHTS)))(torch.from_numpy(to_input(images))).numpy()


def assert_same(found: list[np.ndarray], expected: list[torch.Tensor]) -> None:
    assert sum(len(image) for image in found) > 50
    for image, (mine, theirs) in enumerate(zip(found, expected, strict=True)):
        np.testing.assert_array_equal(mine, theirs.numpy(), err_msg=f"image {image}")


@pytest.mark.parametrize(("conf", "iou", "multi_label"), SETTINGS)
def test_yolov5s_decode_keeps_what_yolov5s_nms_keeps(yolov5_rows: np.ndarray, conf: float, iou: float,
                                                     multi_label: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    import yolov5.utils.general as general

    monkeypatch.setattr(general, "time", STILL_CLOCK)
    expected = general.non_max_suppression(torch.from_numpy(yolov5_rows), conf, iou, multi_label=multi_label)
    assert_same(family_named("yolov5").decode(yolov5_rows, conf, iou, multi_label=multi_label, max_det=300), expected)


@pytest.mark.parametrize(("conf", "iou", "multi_label"), SETTINGS)
def test_yolov7s_decode_keeps_what_yolov7s_nms_keeps(yolov5_rows: np.ndarray, conf: float, iou: float,
                                                     multi_label: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """YOLOv7 offsets classes by 4096 pixels, not 7680, and scores a lone class by its objectness alone."""
    import yolov7_package.utils.general as general

    monkeypatch.setattr(general, "time", STILL_CLOCK)
    yolov7 = family_named("yolov7")
    for rows in (yolov5_rows, yolov5_rows[..., :6]):
        expected = general.non_max_suppression(torch.from_numpy(np.ascontiguousarray(rows)), conf, iou,
                                               multi_label=multi_label)
        assert_same(yolov7.decode(rows, conf, iou, multi_label=multi_label, max_det=300), expected)


@pytest.mark.parametrize(("conf", "iou", "multi_label"), SETTINGS)
def test_ultralytics_decode_keeps_what_ultralytics_nms_keeps(yolov5_rows: np.ndarray, conf: float, iou: float,
                                                             multi_label: bool) -> None:
    """Ultralytics' [B, 4 + nc, anchors] layout, no objectness: the class scores are YOLOv5's products."""
    from ultralytics.utils.nms import non_max_suppression

    rows = np.concatenate([yolov5_rows[..., :4], yolov5_rows[..., 5:] * yolov5_rows[..., 4:5]], -1)
    raw = np.ascontiguousarray(rows.transpose(0, 2, 1))
    expected = non_max_suppression(torch.from_numpy(raw), conf, iou, multi_label=multi_label, max_time_img=1e9)
    assert_same(family_named("ultralytics").decode(raw, conf, iou, multi_label=multi_label, max_det=300), expected)


def test_decoding_imports_no_torch() -> None:
    """What a process measuring an ONNX Runtime or OpenVINO file decodes with costs it no torch import (seconds)."""
    script = """if True:
        import sys
        import numpy as np
        from yolo_optimize.families import family_named
        rows = np.random.default_rng(0).uniform(1, 99, (2, 500, 85)).astype(np.float32) / 100
        for name, raw in (("yolov5", rows), ("yolov7", rows), ("ultralytics", rows[..., 1:].transpose(0, 2, 1))):
            assert all(len(image) for image in family_named(name).predictions(raw)), name
        print(sorted(m for m in ("torch", "torchvision", "yolov5", "ultralytics") if m in sys.modules))"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr[-2000:]
