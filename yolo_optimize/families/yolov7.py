"""YOLOv7 and YOLOv7-tiny (model code from the registry's ``yolov7-package``): anchor-based, like YOLOv5.

Output [B, anchors, 5 + nc] with objectness, decoded with YOLOv7's own NMS at its val.py
settings (conf 0.001, IoU 0.65). Two ways in:
- a user's checkpoint: YOLOv7 pickles its classes under the training repo's names
  (``models.yolo.Model``, ``models.common.SPPCSPC``), the same module names as YOLOv5. They are
  mapped to ``yolov7_package`` here and to ``yolov5`` by the YOLOv5 family; a checkpoint is
  YOLOv7's when every pickled ``models.*`` class exists in yolov7-package and one of them does
  not exist in yolov5 (``IDetect``, ``SPPCSPC``, ``MP``...);
- a name (``yolov7``, ``yolov7-tiny``, ``yolov7x``) or a user's model YAML
  (``optimize build path/to/my-yolov7.yaml``), with seeded random weights. yolov7-package carries no
  configs, so upstream's ``cfg/deploy`` ones ship in ``configs/yolov7/`` (GPL-3.0, see its README).
  YOLOv7's parser evaluates the YAML's strings with ``eval``, so every config, ours included, is
  checked first: every module must be a yolov7-package or ``torch.nn`` class name and every string
  argument one of a few known forms.
"""

from __future__ import annotations

import contextlib
import io
import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yolo_optimize.errors import UserError
from yolo_optimize.families.base import RANDOM_SEED, package_dir, source_names
from yolo_optimize.families.detection import AnchorDetector, coco_names
from yolo_optimize.families.host_nms import HostNms

if TYPE_CHECKING:
    import torch

NAMES = ("yolov7", "yolov7-tiny", "yolov7x")
HEADS = ("IDetect", "IAuxDetect", "Detect")
# What YOLOv7's configs pass as strings: names (nc, anchors, None, 'nearest': evaluating a bare name runs
# nothing) and activations with a number (nn.LeakyReLU(0.1)). Anything else could call arbitrary code.
SAFE_ARGUMENT = re.compile(r"^([A-Za-z_]\w*|nn\.[A-Za-z]+\((\d+(\.\d+)?)?\))$")


class YoloV7(AnchorDetector):
    name = "yolov7"
    title = "YOLOv7"
    names_hint = "yolov7, yolov7-tiny, yolov7x, or a YOLOv7 model YAML or checkpoint"
    tools = ("yolov7-package",)
    module_aliases = {"models.": "yolov7_package.models.", "utils.": "yolov7_package.utils."}
    module_prefixes = ("yolov7_package.models.",)
    map_iou = 0.65  # YOLOv7's test.py
    host_nms = HostNms(class_offset=4096, objectness=True, lone_class_scores_objectness=True)  # utils.general's

    def model_names(self) -> tuple[str, ...]:
        return NAMES

    def recognizes(self, pickled: list[str]) -> bool:
        ours = [n for n in pickled if n.startswith(("models.", "yolov7_package.models."))]
        return (bool(ours) and all(self.may_name(n) for n in ours)
                and any(n.rpartition(".")[2] not in _yolov5_classes() for n in ours))

    def recognizes_config(self, config: dict[str, Any]) -> bool:
        modules = {layer[2] for layer in config.get("backbone", []) + config.get("head", []) if len(layer) == 4}
        return bool(modules) and any(m in HEADS for m in modules) and any(m not in _yolov5_classes() for m in modules)

    def config_bytes(self, name: str) -> bytes:
        return _config_path(name).read_bytes()

    def random_model(self, name: str) -> torch.nn.Module:
        import torch
        from yolov7_package.models.yolo import Model

        config = _checked_config(_config_path(name))
        torch.manual_seed(RANDOM_SEED)
        model = Model(config, ch=3, nc=config["nc"])
        model.names = coco_names() if config["nc"] == 80 else [str(i) for i in range(config["nc"])]
        return model

    def model_class(self) -> type:
        from yolov7_package.models.yolo import Model

        return Model

    def for_export(self, model: torch.nn.Module) -> torch.nn.Module:
        """Fused (RepConv and implicit layers folded too); the head returns its one decoded tensor."""
        from yolov7_package.models.yolo import Detect, IAuxDetect, IDetect

        with contextlib.redirect_stdout(io.StringIO()):  # yolov7 prints "Fusing layers..." and a summary
            yolov7_model: Any = model.float().requires_grad_(False)  # yolov7's Model, whose fuse() is its own
            model = yolov7_model.fuse().eval()
        for module in model.modules():
            if isinstance(module, (Detect, IDetect, IAuxDetect)):
                module.export, module.end2end, module.include_nms, module.concat = False, False, False, True
        return model

    def sample_images(self) -> Path:
        return package_dir("ultralytics") / "assets"  # yolov7-package ships no images; Ultralytics' two


def _config_path(name: str) -> Path:
    """A shipped config by name (upstream's cfg/deploy), else the user's YAML."""
    if name in NAMES:
        return Path(__file__).parent / "configs" / "yolov7" / f"{name}.yaml"
    path = Path(name)
    if not path.is_file():
        raise UserError(f"{name}: not a YOLOv7 name ({', '.join(NAMES)}) nor a model YAML that exists")
    return path.resolve()


def _checked_config(path: Path) -> dict[str, Any]:
    """The YAML, refused in one line unless every module is a known class and every string argument a known form."""
    import yaml

    config = yaml.safe_load(path.read_text())
    for layer in config.get("backbone", []) + config.get("head", []):
        module, arguments = layer[2], layer[3]
        if not _known_module(module):
            raise UserError(f"{path}: module {module!r} is not a yolov7-package or torch.nn class")
        strings = [a for a in arguments if isinstance(a, str) and not SAFE_ARGUMENT.match(a)]
        if strings:
            raise UserError(f"{path}: argument {strings[0]!r} of {module} is not a form YOLOv7 configs use "
                            f"(a name such as nc or 'nearest', or nn.Activation(number)); YOLOv7 would eval it")
    return config


def _known_module(name: str) -> bool:
    import yolov7_package.models.common
    import yolov7_package.models.yolo

    if name.startswith("nn."):
        import torch.nn

        return isinstance(getattr(torch.nn, name[3:], None), type)
    return any(isinstance(getattr(m, name, None), type) and name.isidentifier()
               for m in (yolov7_package.models.common, yolov7_package.models.yolo))


@cache
def _yolov5_classes() -> frozenset[str]:
    """Class names YOLOv5 also defines: a checkpoint or config made only of these is not told apart as YOLOv7's (read
    from its source: ``source_names``)."""
    return frozenset(n for m in ("yolov5.models.common", "yolov5.models.yolo") for n in source_names(m)
                     if n[:1].isupper())
