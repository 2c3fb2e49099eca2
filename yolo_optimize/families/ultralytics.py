"""The Ultralytics detectors (the ``ultralytics`` package), from the configs the installed package ships, in three
families by what their graph returns:

- ``ultralytics``: the anchor-free Detect head that needs NMS (YOLOv3, YOLOv5u, YOLOv6, YOLOv8, YOLOv9, YOLO11,
  YOLO12; YOLO26 and YOLOv10 built with ``--head one-to-many``): [B, 4 + nc, anchors], xywh boxes in input pixels
  then per-class sigmoid scores. Decoding it with YOLOv5's NMS (which expects objectness) returns garbage without an
  error, so it decodes with Ultralytics' own NMS.
- ``ultralytics-end2end``: YOLO26 and YOLOv10 with their one-to-one head (the default: what makes them NMS-free),
  whose top-k selection is in the graph: [B, 300, 6] final detections (``FinalDetections``).
- ``rtdetr``: RT-DETR's transformer decoder, whose 300 queries are ranked in the graph; its normalized centre boxes
  are turned into corner boxes in input pixels inside the graph, so it returns the same [B, 300, 6].

Since ultralytics 8.4.142 its own export picks the one-to-many head unless told ``nms=False``; here the one-to-one
head is the default and the manifest says which head every artifact carries. Checkpoints
(``ultralytics.nn.tasks.DetectionModel`` pickled under its installed name, FP16 after training) are loaded with the
allow-list, and the loaded model tells which family decodes it (its classes alone cannot tell YOLO26 from YOLO11).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from yolo_optimize.errors import UserError
from yolo_optimize.families.base import RANDOM_SEED, package_dir
from yolo_optimize.families.detection import Detector, FinalDetections, coco_names
from yolo_optimize.families.host_nms import HostNms

if TYPE_CHECKING:
    import torch

    from yolo_optimize.families.suppression import Candidates

SIZES = "nsmlx"
SCALED = {"yolov6": "v6/yolov6.yaml", "yolov8": "v8/yolov8.yaml", "yolo11": "11/yolo11.yaml",
          "yolo12": "12/yolo12.yaml", "yolo26": "26/yolo26.yaml"}  # a name's prefix -> the config its size scales
# model name -> (its config under cfg/models, the scale it is built at: "" where the config has none); the names
# are Ultralytics' own (yolov5nu: YOLOv5's backbone with the anchor-free head, as its released weights are named)
CONFIGS = {**{f"{prefix}{size}": (config, size) for prefix, config in SCALED.items() for size in SIZES},
           **{f"yolov5{size}u": ("v5/yolov5.yaml", size) for size in SIZES},
           **{f"yolov9{size}": (f"v9/yolov9{size}.yaml", "") for size in "tsmce"},
           **{name: (f"v3/{name}.yaml", "") for name in ("yolov3", "yolov3-tiny", "yolov3-spp")},
           **{f"yolov10{size}": (f"v10/yolov10{size}.yaml", "") for size in "nsmblx"},
           **{f"rtdetr-{size}": (f"rt-detr/rtdetr-{size}.yaml", "") for size in ("l", "x", "resnet50", "resnet101")}}
END_TO_END = tuple(name for name in CONFIGS if name.startswith(("yolo26", "yolov10")))
DETR = tuple(name for name in CONFIGS if name.startswith("rtdetr"))
OUTPUT_LAYOUT = "[batch, 4 + nc, anchors]: xywh (input pixels), then per-class sigmoid scores; no objectness"
HOST_NMS = HostNms(class_offset=7680, objectness=False)  # ultralytics.utils.nms.non_max_suppression
ONE_TO_ONE, ONE_TO_MANY = "one-to-one", "one-to-many"


class Ultralytics(Detector):
    """The Detect head that needs NMS; the base of the other two, which share its loading."""

    name = "ultralytics"
    names_hint = ("yolov8n-yolov8x, yolo11n-yolo11x, yolo12n-yolo12x, yolov6n-yolov6x, yolov5nu-yolov5xu, "
                  "yolov9t/s/m/c/e, yolov3, yolov3-tiny, yolov3-spp")
    one_to_one: ClassVar[bool] = False  # which of an end-to-end head's two branches the export keeps
    family_told_by_model = True
    tools = ("ultralytics",)
    module_prefixes = ("ultralytics.nn.",)
    extra_classes = ("ultralytics.utils.IterableSimpleNamespace",)  # a training run's ``model.args``
    release_url = "https://github.com/ultralytics/assets/releases/download/v8.3.0/{name}.pt"
    map_iou = 0.7  # Ultralytics' val default (YOLOv5's val.py uses 0.6)
    export_warm_up = False  # Detect compares its cached anchors' input shape, batch included, on every call

    def model_names(self) -> tuple[str, ...]:
        return tuple(name for name in CONFIGS if name not in END_TO_END + DETR)

    def recognizes(self, pickled: list[str]) -> bool:
        """Any Ultralytics checkpoint: the loaded model then says which of the three families it is."""
        return not self.recognized_by and any(n.startswith("ultralytics.") for n in pickled)

    def family_of_model(self, model: Any) -> str:
        from ultralytics.nn.tasks import RTDETRDetectionModel

        if isinstance(model, RTDETRDetectionModel):
            return RTDETR.name
        return UltralyticsEndToEnd.name if getattr(model.model[-1], "one2one_cv2", None) is not None else self.name

    def config_bytes(self, name: str) -> bytes:
        """What a random model's cache key holds: the config, and the scale a scaled config is built at."""
        config, scale = _config(name)
        return (f"scale={scale}\n".encode() if scale else b"") + config.read_bytes()

    def random_model(self, name: str) -> torch.nn.Module:
        import torch
        from ultralytics.nn.tasks import DetectionModel, RTDETRDetectionModel

        torch.manual_seed(RANDOM_SEED)
        kind = RTDETRDetectionModel if name in DETR else DetectionModel
        model = kind(f"{name}.yaml", nc=80, verbose=False)
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
        """FP32, fused, with the family's branch of an end-to-end head (chosen before fusing, which drops the other);
        the head in export mode returns its decoded tensor alone."""
        from ultralytics.nn.modules.head import Detect, RTDETRDecoder

        ultralytics_model: Any = model.float().requires_grad_(False)  # its fuse() and layer list are its own
        head = ultralytics_model.model[-1]
        if getattr(head, "one2one_cv2", None) is not None:
            head.end2end = self.one_to_one
        model = ultralytics_model.fuse(verbose=False).eval()
        for module in model.modules():
            if isinstance(module, (Detect, RTDETRDecoder)):
                exporting: Any = module  # its export settings are class attributes typed None
                exporting.export, exporting.dynamic, exporting.format = True, False, "onnx"
        return model

    def nms_candidates(self, raw: torch.Tensor) -> Candidates:
        from yolo_optimize.families.suppression import Candidates, to_corners

        rows = raw.transpose(1, 2)
        return Candidates(to_corners(rows[..., :4]), rows[..., 4:])

    def embedded_facts(self, model: Any) -> dict[str, Any]:
        """The Detect facts; for YOLO26 and YOLOv10 built with their NMS head, which head that is."""
        end_to_end = getattr(model, "yaml", {}).get("end2end") or type(model.model[-1]).__name__ == "v10Detect"
        head = {"head": ONE_TO_MANY} if end_to_end and not self.one_to_one else {}
        return {**super().embedded_facts(model), **head}

    def output_spec(self, facts: dict[str, Any]) -> dict[str, Any]:
        spec = {"name": "output0", "shape": ["batch", 4 + facts["nc"], "anchors"], "layout": OUTPUT_LAYOUT}
        return {**spec, "head": "one-to-many (needs NMS)"} if facts.get("head") == ONE_TO_MANY else spec

    def sample_images(self) -> Path:
        return package_dir("ultralytics") / "assets"

    def boxes_and_scores(self, raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rows = raw.transpose(0, 2, 1)
        return rows[..., :4], rows[..., 4:]

    def decode(self, raw: np.ndarray, conf: float, iou: float, *, multi_label: bool,
               max_det: int) -> list[np.ndarray]:
        return HOST_NMS(raw.transpose(0, 2, 1), conf, iou, multi_label=multi_label, max_det=max_det)


class UltralyticsEndToEnd(FinalDetections, Ultralytics):
    """YOLO26 and YOLOv10 with the one-to-one head: the top-300 of (anchor, class) scores, in the graph."""

    name = "ultralytics-end2end"
    names_hint = "yolo26n-yolo26x, yolov10n/s/m/b/l/x"
    head = "one-to-one (NMS-free: the top-k selection is in the graph)"
    one_to_one = True
    heads = {ONE_TO_ONE: name, ONE_TO_MANY: Ultralytics.name}
    recognized_by = Ultralytics.name  # which names this family for a checkpoint (family_of_model)

    def model_names(self) -> tuple[str, ...]:
        return END_TO_END

    def embedded_facts(self, model: Any) -> dict[str, Any]:
        return {**super().embedded_facts(model), "max_det": int(model.model[-1].max_det)}


class RTDETR(FinalDetections, Ultralytics):
    """RT-DETR: a transformer decoder's 300 queries, ranked in the graph, boxes turned into input pixels there too."""

    name = "rtdetr"
    names_hint = "rtdetr-l, rtdetr-x, rtdetr-resnet50, rtdetr-resnet101"
    head = "DETR decoder (queries ranked in the graph, no NMS)"
    recognized_by = Ultralytics.name

    def model_names(self) -> tuple[str, ...]:
        return DETR

    def for_export(self, model: torch.nn.Module) -> torch.nn.Module:
        from yolo_optimize.families.modules import DetrInPixels

        return DetrInPixels(super().for_export(model)).eval()

    def embedded_facts(self, model: Any) -> dict[str, Any]:
        return {**super().embedded_facts(model.model), "max_det": int(model.model.model[-1].max_det)}

    def float_module(self, model: Any) -> str | None:
        """The decoder (its sampling, query ranking and box regression) stays in float32."""
        found = [name for name, module in model.named_modules() if type(module).__name__ == "RTDETRDecoder"]
        return found[-1] if found else None


def _config(name: str) -> tuple[Path, str]:
    """The installed config of ``name`` and the scale it is built at."""
    if name not in CONFIGS:
        raise UserError(f"no Ultralytics config for {name!r}")
    config, scale = CONFIGS[name]
    return package_dir("ultralytics") / "cfg" / "models" / config, scale
