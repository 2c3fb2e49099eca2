"""The Ultralytics detectors with the anchor-free Detect head (the ``ultralytics`` package): YOLOv3, YOLOv6,
YOLOv8, YOLOv9, YOLO11 and YOLO12 from the configs the installed package ships. The NMS-free end-to-end heads
(YOLOv10, YOLO26) are refused in one line until their decoding is in.

The exported output is [B, 4 + nc, anchors]: xywh boxes in input pixels, then per-class
sigmoid scores. Decoding it with YOLOv5's NMS (which expects [B, anchors, 5 + nc] with
objectness) returns garbage without an error, so this family decodes with Ultralytics' own
NMS. Checkpoints (``ultralytics.nn.tasks.DetectionModel`` pickled under its installed name,
FP16 after training) are loaded with the allow-list; configs are the installed YAMLs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from yolo_optimize.errors import UserError
from yolo_optimize.families.base import RANDOM_SEED, package_dir
from yolo_optimize.families.detection import Detector, coco_names

if TYPE_CHECKING:
    import torch

SIZES = "nsmlx"
SCALED = {"yolov6": "v6/yolov6.yaml", "yolov8": "v8/yolov8.yaml", "yolo11": "11/yolo11.yaml",
          "yolo12": "12/yolo12.yaml"}  # a name's prefix -> the config its size letter (SIZES) scales
# model name -> (its config under cfg/models, the scale it is built at: "" where the config has none); the names
# are Ultralytics' own (yolov5nu: YOLOv5's backbone with the anchor-free head, as its released weights are named)
CONFIGS = {**{f"{prefix}{size}": (config, size) for prefix, config in SCALED.items() for size in SIZES},
           **{f"yolov5{size}u": ("v5/yolov5.yaml", size) for size in SIZES},
           **{f"yolov9{size}": (f"v9/yolov9{size}.yaml", "") for size in "tsmce"},
           **{name: (f"v3/{name}.yaml", "") for name in ("yolov3", "yolov3-tiny", "yolov3-spp")}}
OUTPUT_LAYOUT = "[batch, 4 + nc, anchors]: xywh (input pixels), then per-class sigmoid scores; no objectness"
NMS_TIME_LIMIT_S = 60.0  # per image; Ultralytics' default (0.05 s) cuts NMS short on slow hosts, changing the result


class Ultralytics(Detector):
    name = "ultralytics"
    names_hint = ("yolov8n-yolov8x, yolo11n-yolo11x, yolo12n-yolo12x, yolov6n-yolov6x, yolov5nu-yolov5xu, "
                  "yolov9t/s/m/c/e, yolov3, yolov3-tiny, yolov3-spp")
    tools = ("ultralytics",)
    module_prefixes = ("ultralytics.nn.",)
    extra_classes = ("ultralytics.utils.IterableSimpleNamespace",)  # a training run's ``model.args``
    release_url = "https://github.com/ultralytics/assets/releases/download/v8.3.0/{name}.pt"
    map_iou = 0.7  # Ultralytics' val default (YOLOv5's val.py uses 0.6)
    export_warm_up = False  # Detect compares its cached anchors' input shape, batch included, on every call

    def model_names(self) -> tuple[str, ...]:
        return tuple(CONFIGS)

    def recognizes(self, pickled: list[str]) -> bool:
        return any(n.startswith("ultralytics.") for n in pickled)

    def config_bytes(self, name: str) -> bytes:
        """What a random model's cache key holds: the config, and the scale a scaled config is built at."""
        config, scale = _config(name)
        return (f"scale={scale}\n".encode() if scale else b"") + config.read_bytes()

    def random_model(self, name: str) -> torch.nn.Module:
        import torch
        from ultralytics.nn.tasks import DetectionModel

        torch.manual_seed(RANDOM_SEED)
        model = DetectionModel(f"{name}.yaml", nc=80, verbose=False)
        model.names = dict(enumerate(coco_names()))
        return model

    def model_from_checkpoint(self, checkpoint: Any, path: Path) -> torch.nn.Module:
        from ultralytics.nn.tasks import DetectionModel

        model = checkpoint.get("ema") or checkpoint.get("model") if isinstance(checkpoint, dict) else None
        if not isinstance(model, DetectionModel):
            kind = type(model).__name__ if model is not None else "no model"
            raise UserError(f"{path} is an Ultralytics checkpoint but not a detection model ({kind}); "
                            f"only detection models are supported")
        return model

    def for_export(self, model: torch.nn.Module) -> torch.nn.Module:
        """FP32, fused; the Detect head in export mode returns the decoded [B, 4 + nc, anchors] tensor alone."""
        from ultralytics.nn.modules.head import Detect

        model = model.float().requires_grad_(False).fuse(verbose=False).eval()
        for module in model.modules():
            if isinstance(module, Detect):
                if module.end2end:
                    raise UserError("end-to-end (NMS-free) Ultralytics heads are not supported yet")
                module.export, module.dynamic, module.format = True, False, "onnx"
        return model

    def output_spec(self, facts: dict[str, Any]) -> dict[str, Any]:
        return {"name": "output0", "shape": ["batch", 4 + facts["nc"], "anchors"], "layout": OUTPUT_LAYOUT}

    def sample_images(self) -> Path:
        return package_dir("ultralytics") / "assets"

    def boxes_and_scores(self, raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rows = raw.transpose(0, 2, 1)
        return rows[..., :4], rows[..., 4:]

    def decode(self, raw: np.ndarray, conf: float, iou: float, *, multi_label: bool,
               max_det: int) -> list[np.ndarray]:
        import torch
        from ultralytics.utils.nms import non_max_suppression

        kept = non_max_suppression(torch.from_numpy(np.ascontiguousarray(raw, dtype=np.float32)), conf, iou,
                                   multi_label=multi_label, max_det=max_det, max_time_img=NMS_TIME_LIMIT_S)
        return [k.numpy() for k in kept]


def _config(name: str) -> tuple[Path, str]:
    """The installed config of ``name`` and the scale it is built at."""
    if name not in CONFIGS:
        raise UserError(f"no Ultralytics config for {name!r}")
    config, scale = CONFIGS[name]
    return package_dir("ultralytics") / "cfg" / "models" / config, scale
