"""The family registry: one file per family; this table is the only place that lists them."""

from __future__ import annotations

from functools import cache

from yolo_optimize.errors import UserError
from yolo_optimize.families.base import Family
from yolo_optimize.families.nms import SUFFIX, nms_family
from yolo_optimize.families.torchvision import TorchvisionClassifier
from yolo_optimize.families.ultralytics import RTDETR, Ultralytics, UltralyticsEndToEnd
from yolo_optimize.families.yolov5 import YoloV5
from yolo_optimize.families.yolov7 import YoloV7

FAMILIES: tuple[type[Family], ...] = (YoloV5, YoloV7, Ultralytics, UltralyticsEndToEnd, RTDETR, TorchvisionClassifier)


@cache
def family_named(name: str) -> Family:
    """The family recorded in a source or manifest under ``name`` (``<family>+nms``: that family with NMS inside
    the artifact, families/nms.py)."""
    if name.endswith(SUFFIX):
        return nms_family(family_named(name[:-len(SUFFIX)]))
    for family in FAMILIES:
        if family.name == name:
            return family()
    raise ValueError(f"unknown model family {name!r}")


def all_families() -> list[Family]:
    return [family_named(f.name) for f in FAMILIES]


def family_for_model(model: str) -> Family | None:
    """The family that builds the model called ``model`` (``yolov5n``, ``yolo11s``...), if any."""
    return next((f for f in all_families() if model in f.model_names()), None)


def names_hint() -> str:
    return "; ".join(family.names_hint for family in all_families())


def family_for_config(config: dict[str, object], path: object) -> Family:
    """The family whose config a user's model YAML is; a UserError when none claims it."""
    found = [f for f in all_families() if f.recognizes_config(config)]
    if not found:
        raise UserError(f"{path} is not a model config of a family that builds from configs (yolov7)")
    return found[0]


def family_for_checkpoint(pickled: list[str], path: object) -> Family:
    """The family whose classes a checkpoint's pickle names; a UserError (nothing unpickled yet) when none does."""
    found = [f for f in all_families() if f.recognizes(pickled)]
    if len(found) != 1:
        names = ", ".join(f.name for f in all_families() if not f.recognized_by)
        why = "its pickle holds no model class of theirs" if not found else \
            f"its pickle mixes classes of {', '.join(f.name for f in found)}"
        raise UserError(f"{path} is not a checkpoint of a supported model family ({names}): {why} "
                        f"(nothing in it was run)")
    return found[0]
