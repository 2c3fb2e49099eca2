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


def test_the_export_form_decodes_channels_last_the_rows_yolov5s_own_head_gives() -> None:
    """The graph every artifact is exported from (revision 1): each of yolov5's rows, exactly, in (y, x, anchor)
    order, at a batch of 2 non-square letterboxed images; and the same detections after yolov5's own NMS."""
    import torch
    from yolov5.models.yolo import Detect
    from yolov5.utils.general import non_max_suppression

    from yolo_optimize.checkpoint import load_model, resolve_source

    model = load_model(resolve_source(str(WEIGHTS)))
    head = next(m for m in model.modules() if isinstance(m, Detect))
    images = [family_named("yolov5").preprocess(path, 640).pixels for path in list_images(VAL_DATA)[:2]]
    batch = torch.from_numpy(np.stack(images)[:, :, 64:-64].transpose(0, 3, 1, 2).copy()).float() / 255
    with torch.no_grad():
        ours = model(batch)
        del head.forward  # yolov5's own Detect.forward again
        theirs = model(batch)
    height, width = batch.shape[2:]
    levels, start = [], 0
    for stride in (8, 16, 32):
        ny, nx = height // stride, width // stride
        level = theirs[:, start:start + 3 * ny * nx].reshape(2, 3, ny, nx, -1)
        levels.append(level.permute(0, 2, 3, 1, 4).reshape(2, ny * nx * 3, -1))
        start += 3 * ny * nx
    assert torch.equal(ours, torch.cat(levels, 1))
    for kept, wanted in zip(non_max_suppression(ours), non_max_suppression(theirs)):
        assert len(wanted) > 0 and torch.equal(kept, wanted)
