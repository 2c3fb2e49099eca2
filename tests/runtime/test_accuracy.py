"""The full-set accuracy check: PyTorch FP32 yolov5n on all of coco_val128 against Ultralytics' val.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from tests.conftest import CALIB_DATA, VAL_DATA, WEIGHTS
from yolo_optimize.checkpoint import load_model, resolve_source
from yolo_optimize.families import family_named
from yolo_optimize.images import to_input
from yolo_optimize.runtime.accuracy import coco_results, mean_average_precision
from yolo_optimize.runtime.dataset import load_dataset, prepare_images

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
