"""Find and load YOLOv5 models: official names, checkpoint paths, or random weights.

Checkpoints are loaded with ``torch.load(weights_only=True)``: the classes that
yolov5 pickled under their training-repo names (``models.common.Conv``) are
allowed explicitly and mapped to the ``yolov5`` package, and nothing else is.
"""

from __future__ import annotations

import hashlib
import os
import pickletools
import zipfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yolo_optimize.errors import UserError

if TYPE_CHECKING:
    import torch

MODEL_NAMES = ("yolov5n", "yolov5s", "yolov5m", "yolov5l", "yolov5x")
RELEASE_URL = "https://github.com/ultralytics/yolov5/releases/download/v7.0/{name}.pt"
WEIGHTS_ENV = "YOLO_OPTIMIZE_WEIGHTS"
OFFLINE_ENV = "YOLO_OPTIMIZE_OFFLINE"
RANDOM_SEED = 0

_YOLO_CLASSES = {
    "common": ("Conv", "DWConv", "Bottleneck", "BottleneckCSP", "C3", "C3x", "C3TR", "C3SPP", "C3Ghost",
               "SPP", "SPPF", "Focus", "Concat", "Contract", "Expand", "GhostConv", "GhostBottleneck"),
    "yolo": ("Detect", "DetectionModel", "Model"),
}
_PLAIN_GLOBALS = ("__builtin__.set", "builtins.set", "collections.OrderedDict")
_TORCH_MODULES = ("torch", "torch._utils")
_TORCH_CLASSES = ("Conv2d", "BatchNorm2d", "SiLU", "ReLU", "LeakyReLU", "Hardswish", "Identity",
                  "MaxPool2d", "Upsample", "Sequential", "ModuleList", "Dropout")


@dataclass(frozen=True)
class ModelSource:
    """Where a model comes from; ``identity`` changes whenever its weights could."""

    model_id: str  # artifact folder and file stem
    architecture: str  # yolov5 YAML name for random weights, checkpoint stem otherwise
    checkpoint: Path | None  # None: random weights from the YAML
    pretrained: bool
    identity: str


def resolve_source(model: str, *, random_weights: bool = False, weights_dir: Path | None = None) -> ModelSource:
    """Turn the CLI's MODEL argument into a source, without importing torch."""
    path = Path(model)
    if model.endswith(".pt") or path.exists():
        if random_weights:
            raise UserError("--random-weights takes a model name (yolov5n|s|m|l|x), not a checkpoint path")
        return _checkpoint_source(path)
    name = model.lower()
    if name not in MODEL_NAMES:
        raise UserError(f"unknown model {model!r}: use one of {', '.join(MODEL_NAMES)} or a path to a YOLOv5 .pt")
    if random_weights:
        return _random_source(name)
    return _checkpoint_source(find_weights(name, weights_dir))


def weights_search_path(weights_dir: Path | None) -> list[Path]:
    """Directories searched for ``<name>.pt``, in order."""
    dirs = [weights_dir] if weights_dir else []
    if os.environ.get(WEIGHTS_ENV):
        dirs.append(Path(os.environ[WEIGHTS_ENV]))
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    dirs.append(cache / "yolo-optimize" / "weights")
    return dirs


def find_weights(name: str, weights_dir: Path | None) -> Path:
    """Search the weights path, then download the official release into the cache dir."""
    dirs = weights_search_path(weights_dir)
    for directory in dirs:
        if (directory / f"{name}.pt").is_file():
            return (directory / f"{name}.pt").resolve()
    where = ", ".join(str(d) for d in dirs)
    if os.environ.get(OFFLINE_ENV, "").lower() in ("1", "true"):
        raise UserError(f"{name}.pt not found in {where}; offline ({OFFLINE_ENV}=1): put the file there "
                        f"or pass --weights-dir")
    try:
        return _download(name, dirs[-1])
    except OSError as err:
        raise UserError(f"{name}.pt not found in {where} and the download failed ({err}); put the file "
                        f"in one of those directories or pass --weights-dir") from None


def _download(name: str, cache_dir: Path) -> Path:
    cache_dir.mkdir(parents=True, exist_ok=True)
    target = cache_dir / f"{name}.pt"
    partial = cache_dir / f".{name}.pt.{os.getpid()}.part"
    try:
        with urllib.request.urlopen(RELEASE_URL.format(name=name), timeout=20) as response:
            partial.write_bytes(response.read())
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def _checkpoint_source(path: Path) -> ModelSource:
    if not path.is_file():
        raise UserError(f"checkpoint not found: {path}")
    return ModelSource(model_id=path.stem, architecture=path.stem, checkpoint=path.resolve(),
                       pretrained=True, identity=file_sha256(path))


def _random_source(name: str) -> ModelSource:
    identity = hashlib.sha256(yaml_config(name).read_bytes() + f"seed={RANDOM_SEED}".encode()).hexdigest()
    return ModelSource(model_id=f"{name}-random", architecture=name, checkpoint=None,
                       pretrained=False, identity=identity)


def yaml_config(name: str) -> Path:
    """The model YAML shipped inside the yolov5 package (located without importing it)."""
    from importlib.util import find_spec

    spec = find_spec("yolov5")
    assert spec and spec.origin, "yolov5 is not installed"
    return Path(spec.origin).parent / "models" / f"{name}.yaml"


def file_sha256(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def load_model(source: ModelSource) -> torch.nn.Module:
    """FP32, fused, eval-mode model whose Detect head returns one decoded [B, anchors, 85] tensor."""
    import torch

    _quiet_yolov5()
    from yolov5.models.yolo import Detect

    with torch.no_grad():
        model = _random_model(source.architecture) if source.checkpoint is None else _checkpoint_model(source.checkpoint)
        model = model.float().requires_grad_(False).fuse().eval()

    for module in model.modules():
        if isinstance(module, Detect):
            module.export, module.inplace, module.dynamic = True, False, False
    return model


def _quiet_yolov5() -> None:
    """yolov5 logs model summaries at INFO on every load; keep the CLI's output ours."""
    import logging

    import yolov5.utils.general  # noqa: F401 - configures the 'yolov5' logger we then quiet

    logging.getLogger("yolov5").setLevel(logging.WARNING)


def _checkpoint_model(path: Path) -> torch.nn.Module:
    import torch
    from yolov5.models.yolo import DetectionModel

    foreign = [name for name in pickle_globals(path) if not _allowed_name(name)]
    if foreign:
        raise UserError(f"{path} was refused before loading: its pickle would import {', '.join(sorted(set(foreign)))}, "
                        f"which is not a YOLOv5 or PyTorch class (nothing in it was run)")
    try:
        with torch.serialization.safe_globals(_allowed_globals()):
            checkpoint: Any = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - any unpickling failure means the same thing to the user
        raise UserError(f"{path} was refused: {_load_failure(err)} (nothing in it was run)") from None
    model = checkpoint.get("ema") or checkpoint.get("model") if isinstance(checkpoint, dict) else None
    if not isinstance(model, DetectionModel):
        raise UserError(f"{path} is not a YOLOv5 detection checkpoint (no 'model' DetectionModel inside)")
    return model


def pickle_globals(path: Path) -> list[str]:
    """Every ``module.name`` the checkpoint's pickle imports, read without unpickling anything."""
    try:
        with zipfile.ZipFile(path) as archive:
            pickled = next(n for n in archive.namelist() if n.endswith("/data.pkl") or n == "data.pkl")
            ops = list(pickletools.genops(archive.read(pickled)))
    except (zipfile.BadZipFile, StopIteration, ValueError, OSError, EOFError):
        raise UserError(f"{path} is not a PyTorch checkpoint (not a torch.save archive with a data.pkl)") from None
    found, strings = [], []
    for op, arg, _ in ops:
        if op.name == "GLOBAL":
            found.append(str(arg).replace(" ", "."))
        elif isinstance(arg, str):
            strings.append(arg)
        elif op.name == "STACK_GLOBAL":  # module and name were pushed as strings (or fetched from the memo)
            found.append(".".join(strings[-2:]) if len(strings) >= 2 else "<a computed name>")
    return found


def _allowed_name(name: str) -> bool:
    """The prefilter: torch's own tensors and layers, and the allow-listed yolov5 classes under either package."""
    module, _, _ = name.rpartition(".")
    yolo = {f"{prefix}models.{m}.{c}" for m, classes in _YOLO_CLASSES.items() for c in classes
            for prefix in ("", "yolov5.")}
    return name in yolo or name in _PLAIN_GLOBALS or module in _TORCH_MODULES or module.startswith("torch.nn.modules.")


def _load_failure(err: Exception) -> str:
    """What torch's weights-only loader refused, without its advice to load unsafely."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    detail = next((line for line in lines if "Unsupported" in line or "WeightsUnpickler error" in line),
                  lines[0] if lines else type(err).__name__)
    detail = detail.split("WeightsUnpickler error:", 1)[-1].strip()
    return f"the safe loader refused its contents ({detail.split('. ')[0][:160]})"


def _random_model(name: str) -> torch.nn.Module:
    import torch
    import yaml
    from yolov5.models.yolo import DetectionModel

    torch.manual_seed(RANDOM_SEED)
    model = DetectionModel(str(yaml_config(name)), ch=3, nc=80)
    coco = yaml.safe_load((yaml_config(name).parents[1] / "data" / "coco.yaml").read_text())
    model.names = [coco["names"][i] for i in range(80)]
    return model


def _allowed_globals() -> list[Any]:
    """The yolov5 and torch.nn classes a detection checkpoint may contain, under both module names."""
    import torch.nn
    import yolov5.models.common
    import yolov5.models.yolo

    allowed: list[Any] = [set, *(getattr(torch.nn, name) for name in _TORCH_CLASSES)]
    for module_name, names in _YOLO_CLASSES.items():
        module = getattr(yolov5.models, module_name)
        for name in names:
            cls = getattr(module, name)
            allowed += [cls, (cls, f"models.{module_name}.{name}")]
    return allowed
