"""Which images calibrate an INT8 file, which may tune it and which gate it: never the same ones.

A model calibrated on some images and judged on the same images reads optimistic, and an accuracy-aware route
that reverts quantizers until the gate passes would be tuned against its own judge. So, given only a labelled
``--calib-data``, the build holds half of it out for the gate: a seeded split, stratified by the label the gate's
metric depends on (a detector image's most frequent class, a classifier image's class folder), so each class
appears on both sides in proportion. The calibration half also serves as the tuning set of the accuracy-aware
route. A ``--gate-data`` of its own is taken as it is, and refused in one line when it shares an image (by its
bytes, so a copy in another folder is caught too) with the calibration images.

Why half (docs/building.md, "The held-out gate"): the gate's 90% interval widens with the square root of the
images it loses (sqrt 2 for half of a set), while INT8 accuracy measured on coco_val128 did not change between
calibration on 64 and on 128 images (bench/archive/int8_recipes/README.md); an even split keeps each side as large as it
can be.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from yolo_optimize.errors import UserError
from yolo_optimize.runtime.dataset import Dataset

GATE_SHARE = 0.5  # of a labelled --calib-data given without --gate-data
SPLIT_SEED = 0
UNLABELLED = "(none)"  # the stratum of an image without labels


@dataclass(frozen=True)
class ImageSet:
    """Images (resolved paths) of one dataset ``root``, whose labels are read from there."""

    root: str
    images: tuple[str, ...]

    @classmethod
    def of(cls, root: Path, count: int | None = None) -> ImageSet:
        """The first ``count`` images of the folder ``root`` (None: all)."""
        from yolo_optimize.images import list_images

        return cls(str(root.resolve()), tuple(str(p.resolve()) for p in list_images(root)[:count]))

    def names(self) -> list[str]:
        return relative_names(self.images)


def relative_names(images: tuple[str, ...]) -> list[str]:
    """Images as paths under their common folder: what a manifest lists."""
    if not images:
        return []
    common = os.path.commonpath(images) if len(images) > 1 else str(Path(images[0]).parent)
    return [os.path.relpath(image, common) for image in images]


@dataclass(frozen=True)
class HeldOutSplit:
    """The calibration and gate images taken from one set, and the words a manifest records of how."""

    calibration: tuple[Path, ...]
    gate: tuple[Path, ...]
    rule: str


def stratum_of(dataset: Dataset) -> list[str]:
    """Each image's stratum: its class folder (classifiers), else its most frequent labelled class (detectors; the
    smallest class id among equals), else one stratum for all."""
    if dataset.image_classes is not None:
        return list(dataset.image_classes)
    if dataset.ground_truth is None:
        return [UNLABELLED] * len(dataset.images)
    counts: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for annotation in dataset.ground_truth["annotations"]:
        counts[annotation["image_id"]][annotation["category_id"]] += 1
    return [str(min(counts[i], key=lambda c: (-counts[i][c], c))) if counts[i] else UNLABELLED
            for i in dataset.image_ids]


def split_held_out(dataset: Dataset, seed: int = SPLIT_SEED) -> HeldOutSplit:
    """Half the images of ``dataset`` for the gate, the rest for calibration, every stratum split in proportion.

    Each stratum's images are shuffled, the strata laid end to end, and every other image from a seeded start goes
    to the gate, so a stratum splits within one image of half. Each side is then in a seeded random order, so that
    ``--calib-images`` and ``--gate-images`` take random subsets of it."""
    count = len(dataset.images)
    if count < 2:
        raise UserError(f"--calib-data {dataset.root} has {count} image: the INT8 gate holds half of it out, so it "
                        f"needs 2 or more (or pass --gate-data)")
    rng = np.random.default_rng(seed)
    strata = stratum_of(dataset)
    laid: list[int] = []
    for stratum in sorted(set(strata)):
        members = [i for i, s in enumerate(strata) if s == stratum]
        laid += [members[j] for j in rng.permutation(len(members))]
    start = int(rng.integers(0, 2))
    gate = [index for position, index in enumerate(laid) if (position + start) % 2 == 0]
    calibration = [index for position, index in enumerate(laid) if (position + start) % 2 == 1]
    shuffled = [[side[j] for j in rng.permutation(len(side))] for side in (calibration, gate)]
    rule = (f"held out of --calib-data: {round(GATE_SHARE * 100)}% of its {count} images, seed {seed}, stratified "
            f"by {'class folder' if dataset.image_classes is not None else 'most frequent labelled class'}")
    calibrating, gating = (tuple(dataset.images[i] for i in side) for side in shuffled)
    return HeldOutSplit(calibrating, gating, rule)


def check_disjoint(calibration: Sequence[Path], gate: Sequence[Path], gate_root: Path, digest: Callable[[Path], str],
                   held_out: bool = False) -> None:
    """Refuse (UserError) a gate that shares an image, by content (``digest``: a file's sha256), with the calibration
    images. With ``held_out`` (the gate held out of --calib-data, ``gate_root``) a shared image is one --calib-data
    holds twice, whose copies the split put on both sides: the message says so, where it would otherwise blame a
    --gate-data never given."""
    seen = {digest(path): path for path in calibration}
    shared = [(path, seen[found]) for path in gate if (found := digest(path)) in seen]
    if shared:
        raise UserError(_duplicates(shared, gate_root) if held_out else _shared(shared, gate_root))


def _shared(shared: list[tuple[Path, Path]], gate_root: Path) -> str:
    gate_image, calib_image = shared[0]
    example = gate_image if gate_image == calib_image else f"{gate_image} is a copy of {calib_image}"
    return (f"--gate-data {gate_root} shares {len(shared)} image(s) with the calibration images ({example}): the gate "
            f"must score images the quantizer never saw; leave --gate-data out to hold half of --calib-data out, or "
            f"pass a disjoint set")


def _duplicates(shared: list[tuple[Path, Path]], calib_root: Path) -> str:
    gate_image, calib_image = shared[0]
    more = f", and {len(shared) - 1} more such pair(s)" if len(shared) > 1 else ""
    return (f"--calib-data {calib_root} holds duplicate images ({calib_image} and {gate_image} have the same "
            f"bytes{more}): the INT8 gate is held out of it and must score images the quantizer never saw; remove "
            f"the duplicates from --calib-data")
