"""NMS's arithmetic, as a graph computes it (``optimize build --nms``, families/nms.py) and as a GPU deployment does
on the host (``Detector.kept_on_device``): the candidates a head offers, the settings, every image of a batch
suppressed in one ``torchvision.ops.nms`` call, the kept detections ranked per image.

Each exporter turns the call into the runtime's own op (ONNX ``NonMaxSuppression``, which OpenVINO reads as its NMS
op; the torchvision op in TorchScript and AOTInductor). Every (image, class) pair is shifted to a region of its own
(classes along x, images along y), computed in float32 whatever the model runs in, and the kept detections are
ranked per image by tensor arithmetic: no loop over the batch, so no exporter can unroll one at the traced batch
size (the bug behind Ultralytics' ``nms=True`` exports answering for the first image only, ultralytics#21188).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

if TYPE_CHECKING:
    import torch

DEPLOY_CONF = 0.25  # the confidence YOLOv5 detect.py and Ultralytics predict keep by default
GRAPH_REVISION = 5  # 2: the best class taken for the candidates above the threshold only (no TopK over all);
#                    3: with an objectness, only the anchors whose objectness is above the threshold looked at;
#                    4: and only their rows sliced into box and scores (nothing sliced over every anchor);
#                    5: the per-class regions computed in float32 at every precision



class Candidates(NamedTuple):
    """What a head's NMS works on (``Detector.nms_candidates``): [B, anchors, 4] x1y1x2y2 boxes in input pixels,
    [B, anchors, nc] class scores, and for heads with one (YOLOv5, YOLOv7) the [B, anchors] objectness each class
    score is multiplied by (kept apart: the product over every class is only needed for the best candidates) and
    the raw [B, anchors, 5 + nc] rows (xywh, objectness, class probabilities) all three are sliced from, so that the
    graph can take the few rows above the threshold before slicing anything (``_above``)."""

    boxes: torch.Tensor
    classes: torch.Tensor
    objectness: torch.Tensor | None = None
    rows: torch.Tensor | None = None


@dataclass(frozen=True)
class NmsSettings:
    """What the graph's NMS keeps: the defaults are the host-side decode's at deployment (Detector.postprocess), so
    an artifact with NMS inside returns what the same model's host NMS returns."""

    conf: float = DEPLOY_CONF  # only candidates scored above this enter NMS (and can be kept)
    iou: float | None = None  # None: the family's own (its validation's IoU, as its host-side decode uses)
    max_det: int = 300
    multi_label: bool = False  # one box may be kept once per class scored above conf (what mAP validation does)

    @property
    def iou_threshold(self) -> float:
        """The IoU NMS suppresses above: set once ``resolved`` has taken the family's own."""
        if self.iou is None:
            raise RuntimeError("NMS settings used before resolved() set their IoU")
        return self.iou

    def resolved(self, family_iou: float) -> NmsSettings:
        """These settings, the IoU the family's host-side decode uses (its ``map_iou``) where none was given."""
        return self if self.iou is not None else NmsSettings(self.conf, family_iou, self.max_det, self.multi_label)

    def key(self) -> dict[str, Any]:
        """What enters the cache key of an artifact with this NMS inside: the settings and the graph's revision."""
        return {**asdict(self), "graph": GRAPH_REVISION}

    def describe(self) -> str:
        labels = "every class above conf" if self.multi_label else "the best class"
        return f"conf {self.conf}, IoU {self.iou}, max_det {self.max_det}, {labels}"


def in_graph_nms(candidates: Candidates, settings: NmsSettings, max_candidates: int, side: int) -> torch.Tensor:
    """A head's ``Candidates`` -> [B, max_det, 6] detections, every image of the batch in one NMS call (see the
    module's docstring). ``side``: the input's side in pixels; boxes are suppressed within [-side, 2 side], wider
    than any box a trained head draws, so that each region holds its boxes."""
    import torch

    batch = candidates.classes.shape[0]
    top, label, image, box = _above(candidates, settings, max_candidates)
    top, label, image, box = _with_placeholders(top, label, image, box, batch)
    kept = _suppressed(box, top, label, image, settings.iou_threshold, side)
    kept = kept[top[kept].argsort(descending=True)]  # not every runtime's NMS returns them by score
    owner = image[kept]
    mine = (owner[:, None] == torch.arange(batch + 1, device=box.device)[None]).to(torch.int64)
    rank = (mine.cumsum(0) * mine).sum(1) - 1  # place among its image's kept detections, by score
    spare = (batch + 1) * settings.max_det  # where placeholders and detections past max_det go
    slot = torch.where((rank < settings.max_det) & (owner < batch), owner * settings.max_det + rank, spare)
    found = torch.cat([box[kept], top[kept, None], label[kept, None].to(box.dtype)], 1)
    out = box.new_zeros(spare + 1, 6).index_put((slot,), found)
    return out[:batch * settings.max_det].view(batch, settings.max_det, 6)


def _above(candidates: Candidates, settings: NmsSettings,
           max_candidates: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Score, class, image and box of every candidate scored above the threshold. With an objectness (YOLOv5,
    YOLOv7; the best class) and at most ``max_candidates`` anchors, only the anchors whose objectness is above the
    threshold are looked at, as YOLOv5's own NMS does first (a class probability is at most 1, so no product exceeds
    its objectness): their raw rows are gathered, and the box and the products are taken of those few rows alone.
    Slicing every anchor's boxes and class scores out of the [B, 25200, 85] output first cost OpenVINO 0.45 ms at
    batch 1 (Slice, VariadicSplit), 2-3x the NMS ops themselves (bench/archive/detectors/README.md); the exporter drops
    the unused slices. Else the scores of every anchor (``_candidates``), the class of those above the threshold."""
    import torch

    boxes, classes, objectness, rows = candidates
    if objectness is not None and rows is not None and not settings.multi_label \
            and classes.shape[1] <= max_candidates:  # rows: an objectness head's
        image, index = (objectness > settings.conf).nonzero(as_tuple=True)
        chosen = rows[image, index]
        best, best_label = (chosen[:, 5:] * chosen[:, 4:5]).max(dim=1)
        above = best > settings.conf
        return best[above], best_label[above], image[above], to_corners(chosen[above, :4])
    top, index, label = _candidates(candidates, settings.multi_label, max_candidates)
    image = torch.arange(classes.shape[0], device=classes.device)[:, None].expand_as(index).flatten()
    top, index = top.flatten(), index.flatten()
    above = top > settings.conf
    image, index = image[above], index[above]
    if label is None:  # the best class of the candidates alone, by the same products the family's NMS compares
        chosen = classes[image, index]
        label = (chosen if objectness is None else chosen * objectness[image, index, None]).argmax(dim=1)
    else:
        label = label.flatten()[above]
    return top[above], label, image, boxes[image, index]


def kept_per_image(candidates: Candidates, settings: NmsSettings, max_candidates: int,
                   side: int) -> list[np.ndarray]:
    """The detections ``in_graph_nms`` keeps, per image on the host, as a GPU deployment computes them where the output
    is: the candidates above the threshold gathered (a host synchronisation a graph cannot have, which a GPU row
    can), their best class taken by the family's products, every image suppressed in one NMS call, one copy back.
    On an H100 a yolov5n FP16 row spent 1.2 ms after its forward at batch 1 with ``in_graph_nms`` (fixed-shape
    ranking and scatter), 0.8-0.95 ms with this: 24-33% more images/s at batch 1 and 8
    (bench/archive/detectors/README.md). Best class only; an image with more than ``max_candidates`` above the threshold
    (never at deployment settings) goes through ``in_graph_nms``, which ranks them first."""
    import torch

    assert not settings.multi_label, "the deployed NMS keeps each box's best class"
    boxes, classes, objectness, _ = candidates
    batch = classes.shape[0]
    best = classes.amax(dim=2)
    image, index = ((best if objectness is None else best * objectness) > settings.conf).nonzero(as_tuple=True)
    if len(image) and int(torch.bincount(image).max()) > max_candidates:
        final = in_graph_nms(candidates, settings, max_candidates, side).cpu().numpy()
        return [np.ascontiguousarray(rows[rows[:, 4] > settings.conf]) for rows in final]
    rows = classes[image, index]
    score, label = (rows if objectness is None else rows * objectness[image, index, None]).max(dim=1)
    box = boxes[image, index]
    kept = _suppressed(box, score, label, image, settings.iou_threshold, side)  # by descending score
    found = torch.cat([box[kept], score[kept, None], label[kept, None].to(box.dtype), image[kept, None].to(box.dtype)],
                      1).cpu().numpy()
    owner = found[:, 6].astype(np.int64)
    order = np.argsort(owner, kind="stable")  # by image, each image's by score
    per_image = np.split(found[order, :6], np.cumsum(np.bincount(owner, minlength=batch))[:-1])
    return [np.ascontiguousarray(rows[:settings.max_det]) for rows in per_image]


def unsuppressed(detections: np.ndarray, iou: float) -> int:
    """Pairs of ``detections`` ([N, 6] x1 y1 x2 y2 score class) of one class overlapping above ``iou``."""
    import torch
    from torchvision.ops import box_iou

    boxes = torch.from_numpy(np.ascontiguousarray(detections[:, :4], dtype=np.float32))
    same = torch.from_numpy(detections[:, 5:6] == detections[:, 5][None])
    return int(((box_iou(boxes, boxes) > iou) & same).triu(diagonal=1).sum())


def _suppressed(box: torch.Tensor, score: torch.Tensor, label: torch.Tensor, image: torch.Tensor, iou: float,
                side: int) -> torch.Tensor:
    """Indices NMS keeps of boxes that only suppress boxes of the same image and class: each (image, class) pair in a
    region of its own (``side``: the input's side; boxes clamped to [-side, 2 side]). The regions reach 80 classes x
    (3 side + 1), past FP16's largest number and far past bf16's 8 bits of precision, so they are computed in float32
    whatever the model runs in (optimize/fp16.py keeps them there in an FP16 ONNX file)."""
    import torch
    import torchvision

    region = torch.stack([label, image, label, image], 1).to(torch.float32) * (3.0 * side + 1.0)
    return torchvision.ops.nms(box.float().clamp(-side, 2 * side) + region, score.float(), iou)


def _with_placeholders(top: torch.Tensor, label: torch.Tensor, image: torch.Tensor, box: torch.Tensor,
                       batch: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The candidates and two placeholders of an image past the batch, in regions of their own: NMS keeps both, so
    no count the graph depends on is ever 0 or 1, which AOTInductor's compiled code assumes of sizes it cannot know
    ("Expected u1 >= 2" on an image with one detection). They are dropped with the detections past max_det."""
    import torch

    two = torch.arange(2, device=top.device)
    return (torch.cat([top, top.new_zeros(2)]), torch.cat([label, two]),
            torch.cat([image, torch.full_like(two, batch)]), torch.cat([box, box.new_zeros(2, 4)]))


def _candidates(candidates: Candidates, multi_label: bool,
                max_candidates: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Per image (score, anchor, class) of every anchor and class, or (score, anchor) of every anchor (its best
    class's score; the class is then taken for the anchors above the threshold only: ``in_graph_nms``); only where
    there are more than ``max_candidates``, the best of them, so that no sort runs where none is needed (sorting
    25,200 anchors cost more than the NMS at deployment settings). No argmax over every anchor: exported, it is a
    TopK, which took OpenVINO 4.6 ms on yolov5n's [1, 25200, 80] scores (13% of the forward; the max: 0.14 ms);
    and with an objectness, the best score is the objectness times the best class probability (rounding a product
    by a factor >= 0 keeps the order, so it is exactly the best product) instead of a product over every class."""
    import torch

    _, probabilities, objectness, _ = candidates
    classes = probabilities.shape[2]
    if multi_label:
        scores = probabilities if objectness is None else probabilities * objectness[..., None]
        flat = scores.flatten(1)
        if flat.shape[1] > max_candidates:
            top, index = flat.topk(max_candidates, dim=1)
        else:
            top, index = flat, torch.arange(flat.shape[1], device=flat.device).expand_as(flat)
        return top, index // classes, index % classes
    top = probabilities.amax(dim=2)
    top = top if objectness is None else top * objectness
    if top.shape[1] > max_candidates:
        top, index = top.topk(max_candidates, dim=1)
        return top, index, None
    return top, torch.arange(top.shape[1], device=top.device).expand_as(top), None


def to_corners(boxes: torch.Tensor) -> torch.Tensor:
    """Centre, width and height -> corners (torch, inside an exported graph; host_nms.xywh_to_xyxy is numpy's)."""
    import torch

    half = boxes[..., 2:4] / 2
    return torch.cat([boxes[..., :2] - half, boxes[..., :2] + half], -1)
