"""Image discovery, and the uint8 NHWC -> float32 NCHW conversion every runtime input goes through."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from yolo_optimize.errors import UserError

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff"}


def list_images(folder: Path) -> list[Path]:
    """Images of a YOLO dataset root (``images/<split>``), an images folder, or one image file."""
    if folder.is_file():
        return [folder]
    if not folder.is_dir():
        raise UserError(f"image folder not found: {folder}")
    root = folder / "images" if (folder / "images").is_dir() else folder
    found = sorted(p for p in root.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES)
    if not found:
        raise UserError(f"no images ({', '.join(sorted(IMAGE_SUFFIXES))}) under {folder}")
    return found


UINT8_NHWC = {"dtype": "uint8", "layout": "NHWC"}


def to_input(images: np.ndarray) -> np.ndarray:
    """uint8 NHWC RGB batch -> float32 NCHW in [0, 1], the input of PyTorch models and of float-input artifacts."""
    return np.ascontiguousarray(images.transpose(0, 3, 1, 2), dtype=np.float32) / 255.0


def model_input(images: np.ndarray, spec: dict[str, object]) -> np.ndarray:
    """uint8 NHWC RGB batch -> the input an artifact's metadata describes: the bytes themselves for an artifact that
    takes the uint8 image (its layout and scale are in its graph; copied only where they are not a writable C array,
    e.g. memory-mapped read-only: runtimes that share their input's memory refuse those), else ``to_input``."""
    if all(spec.get(key) == value for key, value in UINT8_NHWC.items()):
        return np.require(images, requirements=("C", "W"))
    return to_input(images)


def describe_input(spec: dict[str, object]) -> str:
    """What a deployment feeds an artifact with this input spec, in a few words."""
    if all(spec.get(key) == value for key, value in UINT8_NHWC.items()):
        return "uint8 NHWC RGB, as prepared (layout and scale are in the graph)"
    return f"{spec.get('dtype', 'float32')} NCHW RGB in [0, 1]"
