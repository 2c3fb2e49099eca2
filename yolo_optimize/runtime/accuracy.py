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

    Each set of results is matched to the ground truth once (COCOeval's per-image evaluation);
    a draw only accumulates those per-image matches again, in the draw's order, the way
    faster_coco_eval merges the evaluations of distributed workers. That is the value COCOeval
    gives on the resampled set itself, to the bit, without evaluating each draw again (which
    cost a gate of 64 images most of a minute).
    """

    def __init__(self, reference: list[dict[str, Any]], dataset: Dataset, resamples: int, seed: int = 0) -> None:
        assert dataset.ground_truth is not None
        rng = np.random.default_rng(seed)
        position = {image_id: n for n, image_id in enumerate(sorted(dataset.image_ids))}  # COCOeval's image order
        self.dataset = dataset
        self.draws = [np.array([position[int(i)] for i in rng.choice(dataset.image_ids, size=len(dataset.image_ids),
                                                                     replace=True)])
                      for _ in range(resamples)]
        self.reference = self._scores(reference)

    def drops(self, candidate: list[dict[str, Any]]) -> list[float]:
        return [(ref - got) * 100 for ref, got in zip(self.reference, self._scores(candidate))]

    def _scores(self, results: list[dict[str, Any]]) -> list[float]:
        if not results:
            return [0.0] * len(self.draws)
        matches = _PerImageMatches(results, self.dataset)
        return [matches.map50_95(draw) for draw in self.draws]


class _PerImageMatches:
    """COCOeval's per-image, per-category matching of ``results`` (area "all", the last max-detections only: the
    only ones mAP50-95 reads), from which the mAP50-95 of any draw of the images is accumulated."""

    def __init__(self, results: list[dict[str, Any]], dataset: Dataset) -> None:
        from faster_coco_eval import COCO, COCOeval_faster

        with contextlib.redirect_stdout(io.StringIO()):
            ground_truth = COCO(dataset.ground_truth)
            self.evaluator = COCOeval_faster(ground_truth, ground_truth.loadRes(results), iouType="bbox",
                                             separate_eval=True)
            params = self.evaluator.params
            params.imgIds = dataset.image_ids
            params.areaRng, params.areaRngLbl = [params.areaRng[params.areaRngLbl.index("all")]], ["all"]
            params.maxDets = params.maxDets[-1:]
            self.evaluator.evaluate()
        self.table = np.array(self.evaluator._evalImgs_cpp, dtype=object).reshape(len(params.catIds), 1, -1)

    def map50_95(self, draw: np.ndarray) -> float:
        """mAP50-95 of the images at the positions ``draw`` (in COCOeval's image order), a repeated image counting
        twice: COCOeval's summary figure, the mean precision over categories with ground truth (-1 with none)."""
        self.evaluator._evalImgs_cpp = self.table[:, :, draw].ravel().tolist()
        self.evaluator._paramsEval.imgIds = list(range(len(draw)))
        with contextlib.redirect_stdout(io.StringIO()):
            self.evaluator.accumulate()
        precision = self.evaluator.eval["precision"][:, :, :, 0, 0]
        return float(np.mean(precision[precision > -1])) if (precision > -1).any() else -1.0


def predict_all(family: Family, runner: Runner, images: np.ndarray, batch: int) -> list[np.ndarray]:
    """Every prepared image's predictions as the family's task metric takes them, ``batch`` images at a time."""
    found: list[np.ndarray] = []
    for start in range(0, len(images), batch):
        found += family.predictions(runner.infer(runner.input_of(images[start:start + batch])))
    return found
