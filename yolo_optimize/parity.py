"""Parity: every artifact's raw output and detections against the PyTorch FP32 model on real images."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from yolo_optimize.artifact import Manifest
from yolo_optimize.cpu import cpu_facts
from yolo_optimize.stage import Stage, StageContext, StageOutput

REFERENCE_FILE = "reference.npz"
NMS_CONF, NMS_IOU, MATCH_IOU = 0.25, 0.45, 0.5


@dataclass(frozen=True)
class Tolerance:
    """Largest score difference and smallest detection agreement an export may show."""

    precision: str
    max_score_diff: float
    min_agreement: float


# From tightest to loosest. bf16 keeps 8 bits of mantissa: OpenVINO's bf16 execution of yolov5n was reported
# 0.067-0.080 off in scores with 0.947-1.0 agreement on 4 images (issue 8), hence 0.15 for more images.
TOLERANCES = {t.precision: t for t in (
    Tolerance("fp32", 1e-3, 0.95),
    Tolerance("fp16", 0.05, 0.90),
    Tolerance("bf16", 0.15, 0.85),
    Tolerance("int8", 1.0, 0.60),  # a sanity check only: INT8 answers to the mAP gate
)}


def tolerance_for(file_precision: str, compute_precision: str) -> Tolerance:
    """The looser of the file's and the arithmetic's tolerance: an FP32 IR run in bf16 is held to bf16's."""
    order = list(TOLERANCES)
    return TOLERANCES[max(file_precision, compute_precision, key=order.index)]


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
        executed, compute = runner.executed_precision, runner.compute_precision
    tolerance = tolerance_for(manifest.precision or "fp32", compute)
    result = {
        "images": len(images), "batch_sizes": list(batch_sizes), "executed_precision": executed,
        "compute_precision": compute, "cpu": cpu_facts(),
        "max_abs_diff_boxes_px": round(box_diff, 6), "max_abs_diff_scores": round(score_diff, 6),
        "detection_agreement": round(matched / total, 4) if total else 1.0,
        "tolerance": asdict(tolerance),
    }
    result["passed"] = score_diff <= tolerance.max_score_diff and result["detection_agreement"] >= tolerance.min_agreement
    if not result["passed"]:
        raise RuntimeError(f"parity failed (runs in {executed}, {tolerance.precision} tolerance): score diff "
                           f"{score_diff:.4g} (at most {tolerance.max_score_diff}), detection agreement "
                           f"{result['detection_agreement']:.3f} (at least {tolerance.min_agreement})")
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
