"""Image discovery and the one preprocessing every runtime gets: letterbox, RGB, /255."""

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


def bundled_images() -> Path:
    """The sample images shipped inside the yolov5 package (bus.jpg, zidane.jpg)."""
    from yolo_optimize.checkpoint import yaml_config

    return yaml_config("yolov5n").parents[1] / "data" / "images"


def letterbox(path: Path, imgsz: int) -> tuple[np.ndarray, tuple[int, int], float, tuple[float, float]]:
    """Square ``imgsz`` RGB uint8 image as yolov5's val.py makes it.

    Returns the image, the original (h, w), the resize ratio and the (x, y) padding,
    which together map boxes back to the original image.
    """
    import cv2
    from yolov5.utils.augmentations import letterbox as yolov5_letterbox

    bgr = cv2.imread(str(path))
    if bgr is None:
        raise UserError(f"cannot read image {path}")
    h0, w0 = bgr.shape[:2]
    ratio = imgsz / max(h0, w0)
    if ratio != 1:
        interpolation = cv2.INTER_LINEAR if ratio > 1 else cv2.INTER_AREA
        bgr = cv2.resize(bgr, (round(w0 * ratio), round(h0 * ratio)), interpolation=interpolation)
    boxed, _, (pad_w, pad_h) = yolov5_letterbox(bgr, imgsz, auto=False, scaleup=False)
    return np.ascontiguousarray(boxed[..., ::-1]), (h0, w0), ratio, (pad_w, pad_h)


def to_input(images: np.ndarray) -> np.ndarray:
    """uint8 NHWC RGB batch -> float32 NCHW in [0, 1], the input of every artifact."""
    return np.ascontiguousarray(images.transpose(0, 3, 1, 2), dtype=np.float32) / 255.0
