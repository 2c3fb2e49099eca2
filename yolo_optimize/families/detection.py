"""What every detector family shares: letterbox preprocessing, the parity comparison and the float head.

Families differ in their raw output layout and its decode (``boxes_and_scores``, ``decode``);
the comparison is the same for all heads that need NMS: box and score differences of the raw
outputs, and the agreement of the detections each family's own NMS keeps. Heads whose graph
ends in final detections (``FinalDetections``: YOLO26's and YOLOv10's one-to-one head, RT-DETR,
any detector built with NMS inside) share one layout, one decode and one comparison.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from yolo_optimize.errors import UserError
from yolo_optimize.families.base import Family, ParityStats, Preprocessed, package_dir

if TYPE_CHECKING:
    import torch

    from yolo_optimize.families.host_nms import HostNms
    from yolo_optimize.families.suppression import Candidates

PARITY_CONF, PARITY_IOU, MATCH_IOU = 0.25, 0.45, 0.5
PAD_VALUE = 114
FINAL_LAYOUT = ("x1, y1, x2, y2 (input pixels), score, class; rows by descending score, unused rows all zero "
                "(keep rows scored at least your threshold)")


class Detector(Family):
    """A family whose models map a letterboxed image to boxes with class scores."""

    task = "detect"
    default_imgsz = 640
    # NMS settings of the family's own validation, so mAP here matches what its repository reports
    map_conf: ClassVar[float] = 0.001
    map_iou: ClassVar[float] = 0.6
    map_max_det: ClassVar[int] = 300
    needs_nms: ClassVar[bool] = True  # its raw output is candidates that NMS reduces (``nms_candidates``)
    agreement_of = f"detections after NMS ({PARITY_CONF}/{PARITY_IOU}) matching at IoU {MATCH_IOU}"

    @abstractmethod
    def boxes_and_scores(self, raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Raw output -> ([B, anchors, 4] box coordinates, [B, anchors, k] scores), for comparing outputs."""

    @abstractmethod
    def decode(self, raw: np.ndarray, conf: float, iou: float, *, multi_label: bool,
               max_det: int) -> list[np.ndarray]:
        """Raw output -> per image [N, 6] (x1, y1, x2, y2, score, class) in letterboxed pixels, by the family's NMS."""

    def nms_candidates(self, raw: torch.Tensor) -> Candidates:
        """The exported raw output (a torch tensor, inside the graph) -> the boxes and scores the family's NMS
        compares (``suppression.Candidates``): what NMS inside the artifact (``optimize build --nms``) and on a GPU
        (``kept_on_device``) suppresses. Only heads that need NMS have it."""
        raise NotImplementedError(f"{self.name} has no NMS head")

    def embedded_facts(self, model: Any) -> dict[str, Any]:
        names = [model.names[i] for i in sorted(model.names)] if isinstance(model.names, dict) else list(model.names)
        return {"names": names, "nc": len(names), "stride": int(model.stride.max()),
                "strides": [int(s) for s in model.stride]}

    def predictions(self, raw: np.ndarray) -> list[np.ndarray]:
        """Per image [N, 6] (x1, y1, x2, y2, score, class) in letterboxed pixels, as the family's own val decodes."""
        return self.decode(raw, self.map_conf, self.map_iou, multi_label=True, max_det=self.map_max_det)

    def read_image(self, path: Path) -> Any:
        """BGR uint8, as YOLOv5's and Ultralytics' loaders read it (cv2)."""
        import cv2

        bgr = cv2.imread(str(path))
        if bgr is None:
            raise UserError(f"cannot read image {path}")
        return bgr

    def prepare(self, image: Any, imgsz: int) -> Preprocessed:
        return letterbox(image, imgsz)

    def postprocess(self, raw: np.ndarray) -> list[np.ndarray]:
        from yolo_optimize.families.suppression import DEPLOY_CONF

        return self.decode(raw, DEPLOY_CONF, self.map_iou, multi_label=False, max_det=300)

    def kept_on_device(self, raw: torch.Tensor, side: int) -> list[np.ndarray]:
        """What ``postprocess`` keeps, suppressed on the device for every image of the batch in one NMS call (the
        arithmetic of the NMS inside ``--nms`` artifacts: suppression.py), and only the kept rows copied back. The
        families' own NMS functions loop over the images in Python: on a GPU that bounded yolov5n at ~1,400 img/s
        from batch 8 on, whatever the batch. Heads without NMS copy their final rows (a few) and decode them on the
        host."""
        from yolo_optimize.families.host_nms import MAX_CANDIDATES
        from yolo_optimize.families.suppression import NmsSettings, kept_per_image

        if not self.needs_nms:
            return super().kept_on_device(raw, side)
        settings = NmsSettings().resolved(self.map_iou)
        return kept_per_image(self.nms_candidates(raw.float()), settings, MAX_CANDIDATES, side)

    def input_spec(self) -> dict[str, Any]:
        return {"name": "images", "layout": "NCHW", "dtype": "float32",
                "preprocess": f"letterbox to imgsz (pad {PAD_VALUE}), RGB, /255"}

    def compare(self, got: np.ndarray, want: np.ndarray) -> ParityStats:
        (got_boxes, got_scores), (want_boxes, want_scores) = self.boxes_and_scores(got), self.boxes_and_scores(want)
        matched, total = self._agreement(got, want)
        return ParityStats.of_scores(float(np.abs(got_boxes - want_boxes).max()), got_scores, want_scores, matched,
                                     total)

    def _agreement(self, got: np.ndarray, want: np.ndarray) -> tuple[int, int]:
        """Detections that match (same class, IoU >= 0.5) and the larger of the two counts."""
        kept = [self.decode(raw, PARITY_CONF, PARITY_IOU, multi_label=False, max_det=300) for raw in (got, want)]
        return self.agreement(*kept)

    def agreement(self, got: list[np.ndarray], want: list[np.ndarray]) -> tuple[int, int]:
        """Of two models' per-image detections, those scored at least PARITY_CONF that match (same class, IoU >= 0.5),
        and the larger of the two counts."""
        import torch
        from torchvision.ops import box_iou

        matched = total = 0
        for mine, theirs in zip(got, want):
            a, b = (torch.from_numpy(d[d[:, 4] >= PARITY_CONF]) for d in (mine, theirs))
            total += max(len(a), len(b))
            if len(a) and len(b):
                same_class = a[:, 5:6] == b[:, 5][None]
                iou = box_iou(a[:, :4], b[:, :4]) * same_class
                matched += int((iou.max(dim=1).values >= MATCH_IOU).sum().clamp(max=len(b)))
        return matched, total

    def float_module(self, model: Any) -> str | None:
        """The Detect head (YOLOv5's and Ultralytics' ``Detect``, YOLOv7's ``IDetect``...): its convolutions and the
        decode after them."""
        heads = [name for name, module in model.named_modules() if type(module).__name__.endswith("Detect")]
        return heads[-1] if heads else None


class FinalDetections(Detector):
    """A detector whose graph ends in final detections, [B, max_det, 6]: x1, y1, x2, y2 in input pixels, score, class,
    rows by descending score. Decoding keeps the rows scored at least the threshold: there is no NMS to run.

    Comparing two such outputs row by row would fail on a mere swap of two near-equal scores (random weights score
    everything alike), so scores are compared sorted, boxes between detections matched by class and overlap, and
    agreement as for every detector."""

    needs_nms = False
    head: ClassVar[str]  # what makes the detections, for the output spec

    def output_spec(self, facts: dict[str, Any]) -> dict[str, Any]:
        return {"name": "output0", "shape": ["batch", facts.get("max_det", 300), 6], "head": self.head,
                "layout": FINAL_LAYOUT}

    def boxes_and_scores(self, raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return raw[..., :4], raw[..., 4:5]

    def decode(self, raw: np.ndarray, conf: float, iou: float, *, multi_label: bool,
               max_det: int) -> list[np.ndarray]:
        """The rows scored at least ``conf`` (padding rows score 0), at most ``max_det``: ``iou`` and ``multi_label``
        were the graph's to apply."""
        return [np.ascontiguousarray(rows[rows[:, 4] >= max(conf, 1e-9)][:max_det], dtype=np.float32) for rows in raw]

    def compare(self, got: np.ndarray, want: np.ndarray) -> ParityStats:
        matched, total = self._agreement(got, want)
        return ParityStats.of_scores(_matched_box_diff(got, want), np.sort(got[..., 4], axis=1),
                                     np.sort(want[..., 4], axis=1), matched, total)


def _matched_box_diff(got: np.ndarray, want: np.ndarray) -> float:
    """The largest coordinate difference between each expected detection and the detection of its class that overlaps
    it most (pairs overlapping at least MATCH_IOU): how far the boxes moved, whatever the rows' order."""
    import torch
    from torchvision.ops import box_iou

    largest = 0.0
    for mine, theirs in zip(got, want):
        a, b = (torch.from_numpy(np.ascontiguousarray(d[d[:, 4] > 0])) for d in (mine, theirs))
        if not len(a) or not len(b):
            continue
        iou = box_iou(b[:, :4], a[:, :4]) * (b[:, 5:6] == a[:, 5][None])
        best, index = iou.max(dim=1)
        pairs = best >= MATCH_IOU
        if pairs.any():
            largest = max(largest, float((b[pairs, :4] - a[index[pairs], :4]).abs().max()))
    return largest


class AnchorDetector(Detector):
    """YOLOv5-style heads (YOLOv5, YOLOv7): output [B, anchors, 5 + nc] with objectness, checkpoints
    holding the model under ``ema`` or ``model``."""

    title: ClassVar[str]  # "YOLOv5", for messages
    host_nms: ClassVar[HostNms]  # its package's non_max_suppression, on numpy (decode)

    @abstractmethod
    def model_class(self) -> type:
        """The class a checkpoint's model must be."""

    def model_from_checkpoint(self, checkpoint: Any, path: Path) -> Any:
        model = checkpoint.get("ema") or checkpoint.get("model") if isinstance(checkpoint, dict) else None
        if not isinstance(model, self.model_class()):
            raise UserError(f"{path} is not a {self.title} detection checkpoint "
                            f"(no 'model' {self.model_class().__name__} inside)")
        return model

    def output_spec(self, facts: dict[str, Any]) -> dict[str, Any]:
        return {"name": "output0", "shape": ["batch", "anchors", 5 + facts["nc"]],
                "layout": "xywh (input pixels), objectness, per-class probabilities"}

    def boxes_and_scores(self, raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return raw[..., :4], raw[..., 4:]

    def decode(self, raw: np.ndarray, conf: float, iou: float, *, multi_label: bool,
               max_det: int) -> list[np.ndarray]:
        return self.host_nms(raw, conf, iou, multi_label=multi_label, max_det=max_det)

    def nms_candidates(self, raw: torch.Tensor) -> Candidates:
        """Class scores times objectness, as YOLOv5's and YOLOv7's NMS score them."""
        from yolo_optimize.families.suppression import Candidates, to_corners

        return Candidates(to_corners(raw[..., :4]), raw[..., 5:], raw[..., 4], raw)


def coco_names() -> list[str]:
    """The 80 COCO class names, from the dataset YAML the ultralytics package ships."""
    import yaml

    coco = yaml.safe_load((package_dir("ultralytics") / "cfg" / "datasets" / "coco.yaml").read_text())
    return [coco["names"][i] for i in range(80)]


def letterbox(bgr: np.ndarray, imgsz: int) -> Preprocessed:
    """Square ``imgsz`` RGB uint8 image from a decoded BGR one, as YOLOv5's and Ultralytics' validation make it
    (``fitted``), padded with grey 114. The channels are swapped by OpenCV before the padding (grey is the same in
    every order): the same pixels as the repositories' ``[..., ::-1]`` copy, which NumPy makes element by element. On
    the Zen 4 VM a COCO image's letterbox took 1.48 ms their way and 0.08 ms this way, on the end-to-end path's one
    reading thread (bench/archive/fastest_artifact/README.md)."""
    import cv2

    fitted, border = fitted_to(bgr, imgsz)
    boxed = cv2.copyMakeBorder(cv2.cvtColor(fitted.pixels, cv2.COLOR_BGR2RGB), *border, cv2.BORDER_CONSTANT,
                               value=(PAD_VALUE,) * 3)
    return replace(fitted, pixels=boxed)


def fitted_to(bgr: np.ndarray, imgsz: int) -> tuple[Preprocessed, tuple[int, int, int, int]]:
    """The image with its long side resized to ``imgsz`` (area interpolation down, linear up), with what the
    letterbox records of it, and the border (top, bottom, left, right) that pads its short side equally on both
    sides, rounded as both repositories do."""
    import cv2

    h0, w0 = bgr.shape[:2]
    ratio = imgsz / max(h0, w0)
    if ratio != 1:
        interpolation = cv2.INTER_LINEAR if ratio > 1 else cv2.INTER_AREA
        bgr = cv2.resize(bgr, (round(w0 * ratio), round(h0 * ratio)), interpolation=interpolation)
    pad_w, pad_h = (imgsz - bgr.shape[1]) / 2, (imgsz - bgr.shape[0]) / 2
    border = (round(pad_h - 0.1), round(pad_h + 0.1), round(pad_w - 0.1), round(pad_w + 0.1))
    return Preprocessed(bgr, (h0, w0), ratio, (pad_w, pad_h)), border
