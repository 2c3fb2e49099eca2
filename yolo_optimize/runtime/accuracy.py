"""The task metric, with one protocol for every artifact of a model.

Detectors: COCO mAP50-95/mAP50 by COCOeval, after their family's own NMS and settings.
Classifiers: top-1 agreement with the PyTorch FP32 baseline on the same images (meaningful for
random weights too) and, where the images are labelled by class folder, top-1 accuracy.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from yolo_optimize.families.base import Family
from yolo_optimize.runtime.dataset import Dataset, PreparedImages
from yolo_optimize.runtime.runners.base import Runner

RANGE = "range"  # dataclass field metadata: a figure's (low, high), checked where a report is read back
SHARE = {RANGE: (0.0, 1.0)}  # a metric in [0, 1] (mAP, top-1)


@dataclass
class Accuracy:
    map50_95: float | None = field(metadata=SHARE)
    map50: float | None = field(metadata=SHARE)
    images: int
    note: str = ""  # why a value is absent or not meaningful
    top1_agreement: float | None = field(default=None, metadata=SHARE)  # share of images whose top-1 class is the
    #                                                                    baseline's (classifiers)
    top1: float | None = field(default=None, metadata=SHARE)  # classifiers: share of labelled images whose top-1 class
    #                                                          is the label


RANDOM_WEIGHTS = "n/a (random weights)"


def wants_predictions(family: Family, pretrained: bool) -> bool:
    """Whether a row's predictions can mean anything: mAP needs real weights; agreement with FP32 does not."""
    return pretrained or family.task == "classify"


def task_accuracy(family: Family, found: list[np.ndarray], dataset: Dataset, prepared: PreparedImages, *,
                  names: list[str], pretrained: bool, baseline: list[np.ndarray] | None) -> Accuracy:
    """The family's task metric for one row's predictions (``baseline``: the PyTorch FP32 row's, when measured)."""
    if family.task == "classify":
        return classification_accuracy(found, baseline, dataset, names, pretrained=pretrained)
    return mean_average_precision(coco_results(found, dataset, prepared), dataset)


def classification_accuracy(found: list[np.ndarray], baseline: list[np.ndarray] | None, dataset: Dataset,
                            names: list[str], *, pretrained: bool) -> Accuracy:
    top1 = [int(p[0]) for p in found]
    agreement = (round(float(np.mean([a == int(b[0]) for a, b in zip(top1, baseline)])), 4)
                 if baseline is not None else None)
    note = "" if baseline is not None else "no agreement: the PyTorch baseline was not measured"
    labelled = None
    if dataset.image_classes is not None and pretrained:
        labelled = round(float(np.mean([names[p] == label for p, label in zip(top1, dataset.image_classes)])), 4)
    elif dataset.image_classes is not None:
        note = note or "top-1 n/a (random weights); agreement with FP32 still holds"
    return Accuracy(None, None, len(found), note, agreement, labelled)


def coco_results(found: list[np.ndarray], dataset: Dataset, prepared: PreparedImages) -> list[dict[str, Any]]:
    """Detections mapped back to original image pixels as COCO result entries."""
    results = []
    for index, boxes in enumerate(found):
        if not len(boxes):
            continue
        (pad_x, pad_y), ratio = prepared.pads[index], prepared.ratios[index]
        height, width = prepared.original_shapes[index]
        xyxy = (boxes[:, :4] - [pad_x, pad_y, pad_x, pad_y]) / ratio
        xyxy = xyxy.clip(0, [width, height, width, height])
        for (x1, y1, x2, y2), score, cls in zip(xyxy.tolist(), boxes[:, 4].tolist(), boxes[:, 5].astype(int)):
            results.append({"image_id": dataset.image_ids[index], "category_id": dataset.category_ids[cls],
                            "bbox": [x1, y1, x2 - x1, y2 - y1], "score": score})
    return results


def mean_average_precision(results: list[dict[str, Any]], dataset: Dataset) -> Accuracy:
    """mAP50-95 and mAP50 by COCOeval over the dataset's ground truth."""
    from faster_coco_eval import COCO, COCOeval_faster

    if dataset.ground_truth is None:
        return Accuracy(None, None, len(dataset.images), "n/a (dataset has no labels)")
    if not results:
        return Accuracy(0.0, 0.0, len(dataset.images), "no detections")
    with contextlib.redirect_stdout(io.StringIO()):
        ground_truth = COCO(dataset.ground_truth)
        evaluator = COCOeval_faster(ground_truth, ground_truth.loadRes(results), iouType="bbox")
        evaluator.params.imgIds = dataset.image_ids
        evaluator.evaluate()
        evaluator.accumulate()
        evaluator.summarize()
    return Accuracy(round(float(evaluator.stats[0]), 4), round(float(evaluator.stats[1]), 4), len(dataset.images))


class PairedBootstrap:
    """mAP50-95 drops (points, reference minus candidate) over draws of the images with replacement.

    Every candidate is scored on the same draws as the reference, so what varies is which
    images the set happens to hold: the noise a gate of this size has. The reference's
    scores on the draws are computed once.
    """

    def __init__(self, reference: list[dict[str, Any]], dataset: Dataset, resamples: int, seed: int = 0) -> None:
        assert dataset.ground_truth is not None
        rng = np.random.default_rng(seed)
        self.draws = [rng.choice(dataset.image_ids, size=len(dataset.image_ids), replace=True)
                      for _ in range(resamples)]
        annotations = _by_image(dataset.ground_truth["annotations"])
        self.truths = [_resampled_truth(dataset.ground_truth, draw, annotations) for draw in self.draws]
        self.reference = self._scores(reference)

    def drops(self, candidate: list[dict[str, Any]]) -> list[float]:
        return [(ref - got) * 100 for ref, got in zip(self.reference, self._scores(candidate))]

    def _scores(self, results: list[dict[str, Any]]) -> list[float]:
        by_image = _by_image(results)
        return [_map_of(truth, _relabelled(draw, by_image)) for truth, draw in zip(self.truths, self.draws)]


def _by_image(entries: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    grouped: dict[int, list[dict[str, Any]]] = {}
    for entry in entries:
        grouped.setdefault(entry["image_id"], []).append(entry)
    return grouped


def _relabelled(draw: np.ndarray, by_image: dict[int, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The entries of each drawn image under the draw's position as image id (a repeated image counts twice)."""
    return [{**entry, "image_id": position} for position, image_id in enumerate(draw, 1)
            for entry in by_image.get(int(image_id), [])]


def _resampled_truth(truth: dict[str, Any], draw: np.ndarray,
                     annotations: dict[int, list[dict[str, Any]]]) -> dict[str, Any]:
    images = {image["id"]: image for image in truth["images"]}
    relabelled = _relabelled(draw, annotations)
    return {**truth, "images": [{**images[int(i)], "id": position} for position, i in enumerate(draw, 1)],
            "annotations": [{**a, "id": n + 1} for n, a in enumerate(relabelled)]}


def _map_of(truth: dict[str, Any], results: list[dict[str, Any]]) -> float:
    from faster_coco_eval import COCO, COCOeval_faster

    if not results:
        return 0.0
    with contextlib.redirect_stdout(io.StringIO()):
        ground_truth = COCO(truth)
        evaluator = COCOeval_faster(ground_truth, ground_truth.loadRes(results), iouType="bbox")
        evaluator.evaluate()
        evaluator.accumulate()
        evaluator.summarize()
    return float(evaluator.stats[0])


def predict_all(family: Family, runner: Runner, images: np.ndarray, batch: int) -> list[np.ndarray]:
    """Every prepared image's predictions as the family's task metric takes them, ``batch`` images at a time."""
    found: list[np.ndarray] = []
    for start in range(0, len(images), batch):
        found += family.predictions(runner.infer(runner.input_of(images[start:start + batch])))
    return found
