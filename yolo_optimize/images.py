"""Image discovery, and the uint8 NHWC -> float32 NCHW conversion every runtime input goes through."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


def checked_images(paths: list[Path]) -> list[Path]:
    """``paths``, each known to decode to its end: a file that is no image, or one that ends early (a truncated JPEG,
    which OpenCV decodes with gray rows and a warning on stderr, changing the accuracy measured on it), is a UserError
    naming it. JPEGs are decoded at 1/8 scale, which still reads all their data (about 1 ms each)."""
    from PIL import Image

    for path in paths:
        try:
            with pil_open(path) as image:
                image.draft("RGB", (image.width // 8, image.height // 8))
                image.load()
        except Image.DecompressionBombError:
            limit = 2 * (Image.MAX_IMAGE_PIXELS or 0)  # PIL raises this error past twice its limit
            raise UserError(f"cannot read image {path}: larger than {limit} pixels, PIL's guard against "
                            f"decompression bombs") from None
        except (OSError, SyntaxError, ValueError) as err:  # PIL's UnidentifiedImageError, "image file is truncated"
            raise UserError(f"cannot read image {path}: {str(err).strip() or type(err).__name__}") from None
    return paths


def pil_open(path: Path) -> Any:
    """PIL's own ``Image.open``. Importing Ultralytics replaces it process-wide with one that, on a file PIL cannot
    identify, tries to install pi-heif (from the network) and dies of ModuleNotFoundError where it cannot: a bad
    image must stay one line naming it."""
    import sys

    from PIL import Image

    return getattr(sys.modules.get("ultralytics.utils.patches"), "_image_open", Image.open)(path)


LEAST_BYTES_PER_PIXEL = 28  # float32: the 3 input channels, and the stem's output (stride 2, 16 channels or more)


def check_input_fits(imgsz: int, batch: int, what: str) -> None:
    """Refuse (a UserError) an input size and batch that cannot fit this machine's memory: the batch's input and its
    first layer's output alone would not (every supported model needs far more; a size that passes may still run
    out, and is then reported as out of memory)."""
    from yolo_optimize.host.cpu import usable_memory

    needed, usable = LEAST_BYTES_PER_PIXEL * batch * imgsz * imgsz, usable_memory()
    if needed > usable:
        raise UserError(f"{what}: {imgsz}x{imgsz} images in batches of {batch} need more than {needed / 2**30:.1f} GiB "
                        f"(their input and first layer alone), this machine has {usable / 2**30:.1f} GiB")


def to_input(images: np.ndarray) -> np.ndarray:
    """uint8 NHWC RGB batch -> float32 NCHW in [0, 1], the input of PyTorch models and of float-input artifacts."""
    return np.ascontiguousarray(images.transpose(0, 3, 1, 2), dtype=np.float32) / 255.0


def model_input(images: np.ndarray, prepared: bool) -> np.ndarray:
    """uint8 NHWC RGB batch -> the input an artifact takes: the bytes themselves for an artifact that takes the
    ``prepared`` uint8 image (its layout and scale are in its graph; copied only where they are not a writable C
    array, e.g. memory-mapped read-only: runtimes that share their input's memory refuse those), else ``to_input``."""
    if prepared:
        return np.require(images, requirements=("C", "W"))
    return to_input(images)
