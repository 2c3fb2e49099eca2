"""The families' own host-side NMS (YOLOv5's, YOLOv7's and Ultralytics' ``non_max_suppression``), step for step in
numpy, so that a process measuring an ONNX Runtime or OpenVINO file never imports torch, torchvision and the
family's package to decode it: 10-11 s per process on a 2-core host (torch 3.5 s, torchvision 2.5 s, yolov5's
utilities 4-5 s), paid by every measuring process that scores mAP or times the end-to-end path.

The same arithmetic in float32 as theirs (torchvision's CPU NMS kernel: areas, intersection and IoU in float32,
compared with the threshold in double; boxes offset by class in float32), the same stable order by score and the
same cut at ``max_det``: ``tests/families/test_host_nms.py`` checks the detections equal to the packages' own on real
outputs. There is no time limit to lift: theirs stop after a fixed number of seconds and drop the rest of the batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_CANDIDATES = 30000  # per image, by score, before NMS: the packages' max_nms


@dataclass(frozen=True)
class HostNms:
    """One family's ``non_max_suppression``, on rows [xywh, (objectness,) class scores] per anchor."""

    class_offset: float  # pixels between classes' boxes (the packages' max_wh), which sets the float32 rounding
    objectness: bool  # rows carry an objectness that class scores are multiplied by (YOLOv5, YOLOv7)
    lone_class_scores_objectness: bool = False  # YOLOv7: with one class, its score is the objectness alone

    def __call__(self, rows: np.ndarray, conf: float, iou: float, *, multi_label: bool,
                 max_det: int) -> list[np.ndarray]:
        """[B, anchors, 4 + (1) + nc] -> per image [N, 6] (x1, y1, x2, y2, score, class) by descending score."""
        rows = np.asarray(rows, dtype=np.float32)
        return [self._image(image, conf, iou, multi_label, max_det) for image in rows]

    def _image(self, rows: np.ndarray, conf: float, iou: float, multi_label: bool, max_det: int) -> np.ndarray:
        found = self._candidates(rows, conf, multi_label)
        found = found[np.argsort(-found[:, 4], kind="stable")[:MAX_CANDIDATES]]
        kept = _suppressed(found[:, :4] + found[:, 5:6] * np.float32(self.class_offset), iou, max_det)
        return found[kept]

    def _candidates(self, rows: np.ndarray, conf: float, multi_label: bool) -> np.ndarray:
        """Box, score and class of every candidate above ``conf``: every (box, class) pair above it, or each box's
        best class."""
        if self.objectness:
            rows = rows[rows[:, 4] > conf]
            lone = self.lone_class_scores_objectness and rows.shape[1] == 6
            scores = rows[:, 4:5] if lone else rows[:, 5:] * rows[:, 4:5]
        else:
            scores = rows[:, 4:]
        box = xywh_to_xyxy(rows[:, :4])
        if multi_label and scores.shape[1] > 1:
            anchor, label = np.nonzero(scores > conf)
            return _detections(box[anchor], scores[anchor, label], label)
        label = scores.argmax(1) if len(scores) else np.zeros(0, np.int64)
        best = scores[np.arange(len(scores)), label]
        above = best > conf
        return _detections(box[above], best[above], label[above])


def xywh_to_xyxy(boxes: np.ndarray) -> np.ndarray:
    """Centre, width and height -> corners, as the packages compute them (half the size off and on the centre)."""
    half = boxes[:, 2:4] / 2
    return np.concatenate([boxes[:, :2] - half, boxes[:, :2] + half], 1)


def _detections(box: np.ndarray, score: np.ndarray, label: np.ndarray) -> np.ndarray:
    return np.concatenate([box, score[:, None], label[:, None].astype(np.float32)], 1).astype(np.float32)


def _suppressed(boxes: np.ndarray, iou: float, max_det: int) -> np.ndarray:
    """Indices kept by greedy NMS of ``boxes`` already in descending score order, at most ``max_det``: each kept box
    drops the later ones overlapping it more than ``iou`` (as torchvision's kernel: a NaN overlap drops nothing).
    Stopping at ``max_det`` changes nothing kept: later boxes can only be kept after the first ``max_det``."""
    x1, y1, x2, y2 = boxes.T
    areas = (x2 - x1) * (y2 - y1)
    remaining, kept = np.arange(len(boxes)), list[int]()
    while len(remaining) and len(kept) < max_det:
        first, rest = remaining[0], remaining[1:]
        kept.append(first)
        width = np.maximum(np.minimum(x2[first], x2[rest]) - np.maximum(x1[first], x1[rest]), np.float32(0))
        height = np.maximum(np.minimum(y2[first], y2[rest]) - np.maximum(y1[first], y1[rest]), np.float32(0))
        inter = width * height
        with np.errstate(invalid="ignore", divide="ignore"):  # two boxes of no area: NaN, which drops nothing
            overlap = inter / (areas[first] + areas[rest] - inter)
        remaining = rest[~(overlap.astype(np.float64) > iou)]
    return np.array(kept, dtype=np.int64)
