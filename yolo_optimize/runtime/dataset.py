"""Evaluation data: a YOLO-format folder or a COCO ``instances_*.json``, read and checked once.

Ground truth becomes a COCO dict a single time; images are preprocessed a single
time per input size into one ``.npy`` that every measurement process memory-maps.
"""

from __future__ import annotations

from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from yolo_optimize.errors import UserError
from yolo_optimize.families.base import Family
from yolo_optimize.images import IMAGE_SUFFIXES, checked_images
from yolo_optimize.runtime.coco_annotations import read_annotations

COCO_CLASSES = 80


@dataclass
class Dataset:
    """Images, their COCO ground truth (None: unlabelled) and the class index -> category id map."""

    root: Path
    images: list[Path]
    image_ids: list[int]
    ground_truth: dict[str, Any] | None
    category_ids: list[int]
    image_classes: list[str] | None = None  # an ImageFolder's class folder per image (classifiers' labels)

    @property
    def boxes(self) -> int:
        """Labelled boxes in the set: 0 means no mAP can be scored on it (COCOeval's -1 on both sides of a drop)."""
        return len(self.ground_truth["annotations"]) if self.ground_truth is not None else 0

    def subset(self, images: Collection[str | Path]) -> Dataset:
        """The images of this set named in ``images`` (resolved paths), in this set's order, with their labels only;
        an image it does not hold is a UserError."""
        wanted = {str(Path(p).resolve()) for p in images}
        kept = [i for i, image in enumerate(self.images) if str(image.resolve()) in wanted]
        if len(kept) != len(wanted):
            missing = sorted(wanted - {str(self.images[i].resolve()) for i in kept})
            raise UserError(f"{missing[0]} is not an image of {self.root} ({len(missing)} missing)")
        ids = {self.image_ids[i] for i in kept}
        truth = None if self.ground_truth is None else {
            **self.ground_truth, "images": [e for e in self.ground_truth["images"] if e["id"] in ids],
            "annotations": [a for a in self.ground_truth["annotations"] if a["image_id"] in ids]}
        classes = None if self.image_classes is None else [self.image_classes[i] for i in kept]
        return Dataset(self.root, [self.images[i] for i in kept], [self.image_ids[i] for i in kept], truth,
                       self.category_ids, classes)


@dataclass(frozen=True)
class PreparedImages:
    """Preprocessed uint8 NHWC images on disk plus what maps boxes back to each original image."""

    pixels: Path  # .npy, memory-mapped by the workers
    original_shapes: np.ndarray  # [N, 2] (h, w)
    ratios: np.ndarray  # [N]
    pads: np.ndarray  # [N, 2] (x, y)


def load_dataset(path: Path, *, max_images: int | None = None, nc: int = COCO_CLASSES) -> Dataset:
    """Read the dataset at ``path``; malformed or out-of-range labels are a UserError naming file and line."""
    if path.suffix == ".json":
        return _coco_dataset(path, max_images)
    return _yolo_dataset(path, max_images, nc)


def _yolo_dataset(root: Path, max_images: int | None, nc: int) -> Dataset:
    from yolo_optimize.images import list_images

    images = checked_images(list_images(root)[:max_images])
    labels = [label_path(image) for image in images]
    if not any(label.is_file() for label in labels):
        return Dataset(root, images, list(range(len(images))), None, list(range(nc)), _class_folders(root, images))
    gt: dict[str, Any] = {"images": [], "annotations": [], "categories": [{"id": i, "name": str(i)} for i in range(nc)]}
    for image_id, (image, label) in enumerate(zip(images, labels)):
        height, width = _image_size(image)
        gt["images"].append({"id": image_id, "file_name": image.name, "height": height, "width": width})
        for cls, cx, cy, w, h in _read_labels(label, nc) if label.is_file() else []:
            box = [(cx - w / 2) * width, (cy - h / 2) * height, w * width, h * height]
            gt["annotations"].append({"id": len(gt["annotations"]) + 1, "image_id": image_id, "category_id": cls,
                                      "bbox": box, "area": box[2] * box[3], "iscrowd": 0})
    return Dataset(root, images, list(range(len(images))), gt, list(range(nc)))


def _class_folders(root: Path, images: list[Path]) -> list[str] | None:
    """ImageFolder layout (``root/<class>/<image>``, two classes or more): each image's class name, else None."""
    if any(image.parent.parent != root for image in images):
        return None
    classes = [image.parent.name for image in images]
    return classes if len(set(classes)) > 1 else None


def label_path(image: Path) -> Path:
    """yolov5's rule: the last ``images`` folder of the path becomes ``labels``, suffix .txt."""
    parts = list(image.parts)
    index = len(parts) - 1 - parts[::-1].index("images") if "images" in parts else None
    if index is None:
        return image.with_suffix(".txt")
    parts[index] = "labels"
    return Path(*parts).with_suffix(".txt")


def _read_labels(label: Path, nc: int) -> list[tuple[int, float, float, float, float]]:
    rows: list[tuple[int, float, float, float, float]] = []
    for number, line in enumerate(label.read_text().splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split()
        try:
            cls, values = int(fields[0]), [float(v) for v in fields[1:]]
        except (ValueError, IndexError):
            raise UserError(f"{label}:{number}: malformed label line {line.strip()!r}") from None
        if len(values) != 4 or not all(0.0 <= v <= 1.0 for v in values):
            raise UserError(f"{label}:{number}: expected 'class cx cy w h' normalized to 0..1, got {line.strip()!r}")
        if not 0 <= cls < nc:
            raise UserError(f"{label}:{number}: class {cls} is outside 0..{nc - 1}")
        cx, cy, w, h = values
        rows.append((cls, cx, cy, w, h))
    return rows


def _image_size(path: Path) -> tuple[int, int]:
    from yolo_optimize.images import pil_open

    with pil_open(path) as image:
        width, height = image.size
    return height, width


def _coco_dataset(annotations: Path, max_images: int | None) -> Dataset:
    if not annotations.is_file():
        raise UserError(f"annotation file not found: {annotations}")
    gt = read_annotations(annotations)  # every entry checked: a bad one is refused before anything is measured
    folder = _coco_images_folder(annotations)
    entries = sorted(gt["images"], key=lambda e: e["file_name"])
    entries = [e for e in entries if (folder / e["file_name"]).is_file()][:max_images]
    if not entries:
        raise UserError(f"none of the images listed in {annotations} are in {folder}")
    kept = {e["id"] for e in entries}
    gt = {**gt, "images": entries, "annotations": [a for a in gt["annotations"] if a["image_id"] in kept]}
    categories = sorted(c["id"] for c in gt["categories"])
    images = checked_images([folder / e["file_name"] for e in entries])
    return Dataset(annotations, images, [e["id"] for e in entries], gt, categories)


def _coco_images_folder(annotations: Path) -> Path:
    """``<root>/annotations/instances_<split>.json`` -> ``<root>/images/<split>`` (or ``<root>/<split>``)."""
    split = annotations.stem.removeprefix("instances_")
    root = annotations.parent.parent if annotations.parent.name == "annotations" else annotations.parent
    for folder in (root / "images" / split, root / split, root / "images"):
        if folder.is_dir() and any(p.suffix.lower() in IMAGE_SUFFIXES for p in folder.iterdir()):
            return folder
    raise UserError(f"no images folder for {annotations} (looked for images/{split} and {split} under {root})")


def prepare_images(dataset: Dataset, family: Family, imgsz: int, folder: Path, threads: int = 2) -> PreparedImages:
    """Preprocess every image once, as ``family`` does, for ``imgsz``; shared by every artifact of that size."""
    with ThreadPoolExecutor(threads) as pool:
        done = list(pool.map(lambda p: family.preprocess(p, imgsz), dataset.images))
    pixels = folder / f"images-{family.name}-{imgsz}.npy"
    np.save(pixels, np.stack([d.pixels for d in done]))
    return PreparedImages(pixels, np.array([d.original_shape for d in done]), np.array([d.ratio for d in done]),
                          np.array([d.pad for d in done]))
