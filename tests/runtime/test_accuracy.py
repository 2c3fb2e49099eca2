"""The full-set accuracy check (PyTorch FP32 yolov5n on all of coco_val128 against Ultralytics' val.py), the COCO
dataset reader and the gate's bootstrap."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import numpy as np
import torch
from faster_coco_eval import COCO, COCOeval_faster

from tests.conftest import CALIB_DATA, VAL_DATA, WEIGHTS
from yolo_optimize.checkpoint import load_model, resolve_source
from yolo_optimize.families import family_named
from yolo_optimize.images import to_input
from yolo_optimize.runtime.accuracy import PairedBootstrap, coco_results, mean_average_precision
from yolo_optimize.runtime.dataset import Dataset, load_dataset, prepare_images

ULTRALYTICS_MAP50_95, ULTRALYTICS_MAP50 = 0.343, 0.528


def test_pytorch_fp32_map_on_the_whole_set_agrees_with_ultralytics(tmp_path: Path) -> None:
    dataset = load_dataset(VAL_DATA)
    assert len(dataset.images) == 128 and len(dataset.ground_truth["annotations"]) == 898
    yolov5 = family_named("yolov5")
    prepared = prepare_images(dataset, yolov5, 640, tmp_path)
    model = load_model(resolve_source(str(WEIGHTS)))
    images = np.load(prepared.pixels)
    found: list[np.ndarray] = []
    with torch.inference_mode():
        for start in range(0, len(images), 8):
            found += yolov5.predictions(model(torch.from_numpy(to_input(images[start:start + 8]))).numpy())
    accuracy = mean_average_precision(coco_results(found, dataset, prepared), dataset)
    assert abs(accuracy.map50_95 - ULTRALYTICS_MAP50_95) <= 0.02, accuracy
    assert abs(accuracy.map50 - ULTRALYTICS_MAP50) <= 0.02, accuracy


def test_coco_json_dataset_maps_categories_by_sorted_id() -> None:
    dataset = load_dataset(CALIB_DATA / "annotations" / "instances_train2017.json", max_images=10)
    assert len(dataset.images) == 10 and all(p.is_file() for p in dataset.images)
    assert dataset.category_ids[:3] == [1, 2, 3] and dataset.category_ids[-1] == 90


def _resampled_map(dataset: Dataset, results: list[dict[str, Any]], draw: np.ndarray) -> float:
    """COCOeval's mAP50-95 on the resampled set itself: each drawn image under its draw position as id, with its
    labels and results (a repeated image counts twice)."""
    truth = dataset.ground_truth
    images = {image["id"]: image for image in truth["images"]}
    drawn = [(position, int(image_id)) for position, image_id in enumerate(draw, 1)]
    annotations = [{**a, "image_id": position} for position, i in drawn for a in truth["annotations"]
                   if a["image_id"] == i]
    resampled = {**truth, "images": [{**images[i], "id": position} for position, i in drawn],
                 "annotations": [{**a, "id": n} for n, a in enumerate(annotations, 1)]}
    found = [{**r, "image_id": position} for position, i in drawn for r in results if r["image_id"] == i]
    with contextlib.redirect_stdout(io.StringIO()):
        ground_truth = COCO(resampled)
        evaluator = COCOeval_faster(ground_truth, ground_truth.loadRes(found), iouType="bbox")
        evaluator.evaluate()
        evaluator.accumulate()
        evaluator.summarize()
    return float(evaluator.stats[0])


def test_each_bootstrap_draw_scores_what_cocoeval_scores_on_the_resampled_set() -> None:
    """The bootstrap re-accumulates per-image matches instead of evaluating each draw: on 16 labelled images, with
    detections made from their labels (shifted, rescored, some missed, some false), every draw's drop equals the drop
    COCOeval computes on that draw's own resampled set."""
    dataset = load_dataset(VAL_DATA, max_images=16)
    rng = np.random.default_rng(1)

    def detections(shift: float) -> list[dict[str, Any]]:
        found = [{"image_id": a["image_id"], "category_id": a["category_id"], "score": float(rng.uniform(0.3, 1)),
                  "bbox": [v + float(rng.normal(0, shift)) for v in a["bbox"]]}
                 for a in dataset.ground_truth["annotations"] if rng.uniform() > 0.2]
        return found + [{"image_id": int(i), "category_id": 0, "score": 0.4, "bbox": [10.0, 10.0, 50.0, 50.0]}
                        for i in rng.choice(dataset.image_ids, 6)]

    reference, candidate = detections(2.0), detections(6.0)
    bootstrap = PairedBootstrap(reference, dataset, resamples=12, seed=3)
    drops = bootstrap.drops(candidate)
    rng_draws = np.random.default_rng(3)
    draws = [rng_draws.choice(dataset.image_ids, size=len(dataset.image_ids), replace=True) for _ in range(12)]
    expected = [(_resampled_map(dataset, reference, d) - _resampled_map(dataset, candidate, d)) * 100 for d in draws]
    assert len({round(d, 6) for d in expected}) > 6, "the draws differ"
    np.testing.assert_allclose(drops, expected, rtol=0, atol=1e-9)
