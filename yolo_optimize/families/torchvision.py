"""torchvision image classifiers, by any ``torchvision.models`` classification name (resnet18, ...).

Preprocessing is torchvision's own evaluation transform (``ImageClassification``): resize the
short side to imgsz / 0.875 (bilinear, antialiased), center-crop imgsz. The ImageNet mean/std
normalization is folded into the exported model, so every artifact takes the same [0, 1] RGB input
as the detectors. The output is [B, classes] logits. Parity and the task metric compare top-1
classes: agreement with the FP32 model always (meaningful for random weights too), and top-1
accuracy where the evaluation images carry labels.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from yolo_optimize.errors import UserError
from yolo_optimize.families.base import (
    RANDOM_SEED,
    Family,
    ParityStats,
    Preprocessed,
    package_dir,
)

if TYPE_CHECKING:
    import torch

CROP_RATIO = 0.875  # torchvision's evaluation transforms: resize 256, crop 224
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
TOP_K = 5


class TorchvisionClassifier(Family):
    name = "torchvision"
    names_hint = "any torchvision.models classifier (resnet18, mobilenet_v3_small, ...)"
    task = "classify"
    tools = ("torchvision",)
    module_prefixes = ("torchvision.models.", "torchvision.ops.")
    default_imgsz = 224
    agreement_of = "top-1 classes"

    def model_names(self) -> tuple[str, ...]:
        return _classification_models()

    def recognizes(self, pickled: list[str]) -> bool:
        return any(n.startswith("torchvision.models.") for n in pickled)

    def config_bytes(self, name: str) -> bytes:
        return f"torchvision.models.get_model({name!r}, weights=None)".encode()

    def random_model(self, name: str) -> torch.nn.Module:
        import torch
        from torchvision import models

        torch.manual_seed(RANDOM_SEED)
        model = models.get_model(name, weights=None)
        model.names = list(models.get_model_weights(name).DEFAULT.meta["categories"])
        return model

    def model_from_checkpoint(self, checkpoint: Any, path: Path) -> torch.nn.Module:
        import torch

        model = checkpoint.get("model") if isinstance(checkpoint, dict) else checkpoint
        if not isinstance(model, torch.nn.Module):
            raise UserError(f"{path} holds no torchvision model (save the model itself, or a dict with 'model')")
        return model

    def for_export(self, model: torch.nn.Module) -> torch.nn.Module:
        from yolo_optimize.families.modules import Normalized

        return Normalized(model.float().requires_grad_(False).eval(), MEAN, STD, _class_names(model)).eval()

    def embedded_facts(self, model: torch.nn.Module) -> dict[str, Any]:
        names: Any = model.names  # set by Normalized
        return {"names": list(names), "nc": len(names)}

    def output_spec(self, facts: dict[str, Any]) -> dict[str, Any]:
        return {"name": "output0", "shape": ["batch", facts["nc"]],
                "layout": "class logits (softmax for probabilities)"}

    def input_spec(self) -> dict[str, Any]:
        return {"name": "images", "layout": "NCHW", "dtype": "float32",
                "preprocess": f"resize the short side to imgsz / {CROP_RATIO} (bilinear, antialiased), center-crop "
                              f"imgsz, RGB, /255; the ImageNet mean/std normalization is inside the model"}

    def read_image(self, path: Path) -> Any:
        """RGB PIL image, as torchvision's ImageFolder reads it."""
        from PIL import Image

        try:
            with Image.open(path) as image:
                return image.convert("RGB")
        except OSError:
            raise UserError(f"cannot read image {path}") from None

    def prepare(self, image: Any, imgsz: int) -> Preprocessed:
        """The PIL path of torchvision's ``ImageClassification`` (as its ImageFolder references use), up to the
        uint8 image: resize (bilinear, antialiased), center-crop."""
        from torchvision.transforms import functional

        rgb = image
        resized = functional.resize(rgb, [round(imgsz / CROP_RATIO)], antialias=True)
        cropped = functional.center_crop(resized, [imgsz])
        return Preprocessed(np.asarray(cropped).copy(), (rgb.height, rgb.width), 1.0, (0, 0))

    def sample_images(self) -> Path:
        return package_dir("ultralytics") / "assets"  # torchvision ships no images; Ultralytics' two

    def compare(self, got: np.ndarray, want: np.ndarray) -> ParityStats:
        probabilities = [_softmax(raw) for raw in (got, want)]
        same = int((got.argmax(1) == want.argmax(1)).sum())
        return ParityStats.of_scores(None, probabilities[0], probabilities[1], same, len(got))

    def predictions(self, raw: np.ndarray) -> list[np.ndarray]:
        """The top-5 classes of every image, best first."""
        return list(np.argsort(-raw, axis=1)[:, :TOP_K])

    def agreement(self, got: list[np.ndarray], want: list[np.ndarray]) -> tuple[int, int]:
        return sum(int(a[0]) == int(b[0]) for a, b in zip(got, want)), len(want)

    def postprocess(self, raw: np.ndarray) -> list[np.ndarray]:
        return self.predictions(raw)


@cache
def _classification_models() -> tuple[str, ...]:
    """Every classification model name torchvision registers (its import takes seconds: asked once)."""
    from torchvision import models

    return tuple(models.list_models(module=models))


def _class_names(model: torch.nn.Module) -> list[str]:
    """The model's own names, or ImageNet's for a 1000-class model, or numbers."""
    names = getattr(model, "names", None)
    if names:
        return list(names)
    classes = _output_classes(model)
    if classes == 1000:
        from torchvision.models import ResNet18_Weights

        return list(ResNet18_Weights.DEFAULT.meta["categories"])
    return [str(i) for i in range(classes)]


def _output_classes(model: torch.nn.Module) -> int:
    import torch

    with torch.no_grad():
        return int(model.eval()(torch.zeros(1, 3, 224, 224)).shape[1])


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)
