"""YOLOv5 n-x (the ``yolov5`` package): anchor-based, output [B, anchors, 5 + nc] with objectness.

Checkpoints pickle their classes under the training repo's names (``models.common.Conv``);
they map to the installed ``yolov5`` package. A YOLOv7 checkpoint uses the same module
names, so recognition also requires that every pickled ``models.*`` class exists in yolov5.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from yolo_optimize.families.base import RANDOM_SEED, package_dir
from yolo_optimize.families.detection import AnchorDetector
from yolo_optimize.families.host_nms import HostNms

if TYPE_CHECKING:
    import torch

SIZES = "nsmlx"


class YoloV5(AnchorDetector):
    name = "yolov5"
    title = "YOLOv5"
    names_hint = "yolov5n-yolov5x"
    tools = ("yolov5",)
    module_aliases = {"models.": "yolov5.models."}
    module_prefixes = ("yolov5.models.",)
    release_url = "https://github.com/ultralytics/yolov5/releases/download/v7.0/{name}.pt"
    host_nms = HostNms(class_offset=7680, objectness=True)  # yolov5.utils.general.non_max_suppression
    graph_revision = 1  # 1: the Detect head decoded channels last (modules.decoded_channels_last)

    def model_names(self) -> tuple[str, ...]:
        return tuple(f"yolov5{size}" for size in SIZES)

    def recognizes(self, pickled: list[str]) -> bool:
        ours = [n for n in pickled if n.startswith(("models.", "yolov5.models."))]
        return bool(ours) and all(self.may_name(n) for n in ours)

    def config_bytes(self, name: str) -> bytes:
        return package_dir("yolov5").joinpath("models", f"{name}.yaml").read_bytes()

    def random_model(self, name: str) -> torch.nn.Module:
        import torch
        import yaml

        _quiet()
        from yolov5.models.yolo import DetectionModel

        torch.manual_seed(RANDOM_SEED)
        model = DetectionModel(str(package_dir("yolov5") / "models" / f"{name}.yaml"), ch=3, nc=80)
        coco = yaml.safe_load((package_dir("yolov5") / "data" / "coco.yaml").read_text())
        model.names = [coco["names"][i] for i in range(80)]
        return model

    def model_class(self) -> type:
        from yolov5.models.yolo import DetectionModel

        return DetectionModel

    def for_export(self, model: torch.nn.Module) -> torch.nn.Module:
        """Fused; returns the Detect head's one decoded [B, anchors, 5 + nc] tensor (it returns a 1-tuple), decoded
        channels last (``modules.decoded_channels_last``: the rows in (y, x, anchor) order)."""
        import types

        _quiet()
        from yolov5.models.yolo import Detect

        from yolo_optimize.families.modules import FirstOutput, decoded_channels_last

        yolov5_model: Any = model.float().requires_grad_(False)  # yolov5's DetectionModel, whose fuse() is its own
        model = yolov5_model.fuse().eval()
        for module in model.modules():
            if isinstance(module, Detect):
                module.export, module.inplace, module.dynamic = True, False, False
                module.forward = types.MethodType(decoded_channels_last, module)
        return FirstOutput(model).eval()

    def output_spec(self, facts: dict[str, Any]) -> dict[str, Any]:
        spec = super().output_spec(facts)
        return {**spec, "layout": spec["layout"] + "; each level's rows in (y, x, anchor) order"}

    def sample_images(self) -> Path:
        return package_dir("yolov5") / "data" / "images"


def _quiet() -> None:
    """yolov5 logs model summaries at INFO on every load; keep the CLI's output ours."""
    import logging

    import yolov5.utils.general  # noqa: F401 - configures the 'yolov5' logger we then quiet

    logging.getLogger("yolov5").setLevel(logging.WARNING)
