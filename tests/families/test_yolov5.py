"""The YOLOv5 family: recognized from its checkpoint's pickle, preprocessed exactly as yolov5's val.py does."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from tests.conftest import VAL_DATA, WEIGHTS
from yolo_optimize.checkpoint import pickle_globals
from yolo_optimize.families import family_for_checkpoint, family_named
from yolo_optimize.images import list_images


def test_the_official_checkpoint_is_recognized_as_yolov5_from_its_pickle_alone() -> None:
    pickled = pickle_globals(WEIGHTS)
    assert "models.yolo.Model" in pickled and "models.common.C3" in pickled
    assert family_for_checkpoint(pickled, WEIGHTS).name == "yolov5"
    assert not family_named("ultralytics").recognizes(pickled)


@pytest.mark.parametrize("imgsz", [640, 320, 800])
def test_letterbox_matches_yolov5s_own_on_real_images(imgsz: int) -> None:
    from yolov5.utils.augmentations import letterbox as yolov5_letterbox

    for path in list_images(VAL_DATA)[:6]:
        ours = family_named("yolov5").preprocess(path, imgsz)
        bgr = cv2.imread(str(path))
        h0, w0 = bgr.shape[:2]
        ratio = imgsz / max(h0, w0)  # val.py's load_image, then letterbox without scaling up
        if ratio != 1:
            bgr = cv2.resize(bgr, (round(w0 * ratio), round(h0 * ratio)),
                             interpolation=cv2.INTER_LINEAR if ratio > 1 else cv2.INTER_AREA)
        theirs, _, pad = yolov5_letterbox(bgr, imgsz, auto=False, scaleup=False)
        assert np.array_equal(ours.pixels, theirs[..., ::-1]) and ours.pad == pad
        assert ours.original_shape == (h0, w0) and ours.ratio == ratio


def test_the_batched_nms_a_gpu_row_runs_keeps_exactly_what_the_families_nms_keeps() -> None:
    """``Detector.kept_on_device`` (every image in one NMS call, where the output is) against YOLOv5's own
    per-image NMS on the host, on real detections; device-agnostic torch, so checked here on the CPU."""
    import torch

    from yolo_optimize.checkpoint import load_model, resolve_source
    from yolo_optimize.images import to_input

    family = family_named("yolov5")
    model = load_model(resolve_source("yolov5n", weights_dir=WEIGHTS.parent)).eval()
    files = sorted((VAL_DATA / "images").rglob("*.jpg"))[:8]
    pixels = np.stack([family.preprocess(path, 320).pixels for path in files])
    with torch.inference_mode():
        raw = model(torch.from_numpy(to_input(pixels)))
    batched, own = family.kept_on_device(raw, 320), family.postprocess(raw.numpy())
    assert sum(len(kept) for kept in own) > 8, "too few detections to compare"
    assert [len(kept) for kept in batched] == [len(kept) for kept in own]
    assert all(np.array_equal(mine, theirs) for mine, theirs in zip(batched, own))
