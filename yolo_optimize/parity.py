"""Parity: every artifact's raw output and detections against the PyTorch FP32 model on real images."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from yolo_optimize.artifact import Manifest
from yolo_optimize.stage import Stage, StageContext, StageOutput

REFERENCE_FILE = "reference.npz"
NMS_CONF, NMS_IOU, MATCH_IOU = 0.25, 0.45, 0.5


@dataclass(frozen=True)
class Tolerance:
    """Largest score difference and smallest detection agreement an export may show."""

    max_score_diff: float
    min_agreement: float


TOLERANCES = {
    "fp32": Tolerance(1e-3, 0.95),
    "fp16": Tolerance(0.05, 0.90),
    "bf16": Tolerance(0.1, 0.85),
    "int8": Tolerance(1.0, 0.60),  # a sanity check only: INT8 answers to the mAP gate
}


@dataclass(frozen=True)
class ReferenceConfig:
    imgsz: int
    images: tuple[str, ...]
    batch_sizes: tuple[int, ...]


class ReferenceStage(Stage):
    """PyTorch FP32 outputs on the parity images, computed once and shared by every artifact."""

    name = "reference"
    tools = ("torch", "yolov5", "opencv-python", "numpy")

    def run(self, ctx: StageContext) -> StageOutput:
        import torch

        from yolo_optimize.checkpoint import load_model
        from yolo_optimize.images import letterbox, to_input

        model = load_model(ctx.source)
        images = np.stack([letterbox(Path(p), self.config.imgsz)[0] for p in self.config.images])
        with torch.no_grad():
            outputs = np.concatenate([model(torch.from_numpy(to_input(im[None])))[0].numpy() for im in images])
        np.savez(ctx.out_dir / REFERENCE_FILE, images=images, outputs=outputs)
        return StageOutput(entry=REFERENCE_FILE, metadata={"images": list(self.config.images)})


def check_parity(folder: Path, manifest: Manifest, ctx: StageContext) -> dict[str, Any]:
    """Run the artifact at every requested batch size; raise if it departs from the reference."""
    from yolo_optimize.evaluate.runners import open_runner
    from yolo_optimize.images import to_input

    reference = np.load(ctx.parents["reference"] / REFERENCE_FILE)
    images, expected = reference["images"], reference["outputs"]
    batch_sizes = ctx.parent_manifest("reference").params["batch_sizes"]
    box_diff = score_diff = 0.0
    matched = total = 0
    with open_runner(folder, manifest, device=ctx.device, threads=ctx.threads) as runner:
        for batch in batch_sizes:
            index = np.arange(max(batch, len(images))) % len(images)
            for start in range(0, len(index), batch):
                rows = index[start:start + batch]
                got = runner.infer(to_input(images[rows]))
                want = expected[rows]
                box_diff = max(box_diff, float(np.abs(got[..., :4] - want[..., :4]).max()))
                score_diff = max(score_diff, float(np.abs(got[..., 4:] - want[..., 4:]).max()))
                agree, count = detection_agreement(got, want)
                matched, total = matched + agree, total + count
        executed = runner.executed_precision
    tolerance = TOLERANCES[manifest.precision or "fp32"]
    result = {
        "images": len(images), "batch_sizes": list(batch_sizes), "executed_precision": executed,
        "max_abs_diff_boxes_px": round(box_diff, 6), "max_abs_diff_scores": round(score_diff, 6),
        "detection_agreement": round(matched / total, 4) if total else 1.0,
        "tolerance": {"max_score_diff": tolerance.max_score_diff, "min_agreement": tolerance.min_agreement},
    }
    result["passed"] = score_diff <= tolerance.max_score_diff and result["detection_agreement"] >= tolerance.min_agreement
    if not result["passed"]:
        raise RuntimeError(f"parity failed: score diff {score_diff:.4g}, detection agreement "
                           f"{result['detection_agreement']:.3f} (tolerance {tolerance})")
    return result


def detection_agreement(got: np.ndarray, want: np.ndarray) -> tuple[int, int]:
    """Detections after NMS that match (same class, IoU >= 0.5) and the larger of the two counts."""
    import torch
    from torchvision.ops import box_iou
    from yolov5.utils.general import non_max_suppression

    def nms(raw: np.ndarray) -> list[torch.Tensor]:
        return non_max_suppression(torch.from_numpy(np.ascontiguousarray(raw)), NMS_CONF, NMS_IOU)

    matched = total = 0
    for a, b in zip(nms(got), nms(want)):
        total += max(len(a), len(b))
        if len(a) and len(b):
            same_class = a[:, 5:6] == b[:, 5][None]
            iou = box_iou(a[:, :4], b[:, :4]) * same_class
            matched += int((iou.max(dim=1).values >= MATCH_IOU).sum().clamp(max=len(b)))
    return matched, total
