"""NMS inside the artifact (``optimize build --nms``): images in, final detections out, for every detector whose head
needs NMS (YOLOv5, YOLOv7, the Ultralytics NMS heads).

The artifact of ``yolov5n`` built with ``--nms`` decodes as the family ``yolov5+nms``: everything about loading and
preprocessing is YOLOv5's, the output is ``FinalDetections``' [B, max_det, 6]. Its graph is the inner family's
export form followed by ``suppression.in_graph_nms`` (``modules.WithNms``), the arithmetic this family shares with
a GPU deployment's host-side NMS.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from yolo_optimize.families.detection import Detector, FinalDetections
from yolo_optimize.families.host_nms import MAX_CANDIDATES
from yolo_optimize.families.suppression import NmsSettings, unsuppressed

if TYPE_CHECKING:
    import torch

    from yolo_optimize.families.base import Family, Preprocessed

SUFFIX = "+nms"  # family name of an artifact with NMS inside: "<family>+nms"
FOLDER = "-nms"  # and its model folder: "<model>-nms"
# The inner family's facts an artifact with NMS inside keeps as they are
INHERITED = ("default_imgsz", "names_hint", "map_conf", "map_iou", "map_max_det", "module_aliases", "module_prefixes",
             "extra_classes", "release_url", "export_warm_up", "graph_revision")


class InGraphNms(FinalDetections):
    """The family of an artifact built with NMS inside: ``inner``'s model and images, final detections out."""

    head = "the family's NMS head, suppressed inside the graph"

    def __init__(self, inner: Detector) -> None:
        self.inner = inner
        for attribute in INHERITED:  # one class serves every family: what it takes from the inner one is per instance
            setattr(self, attribute, getattr(inner, attribute))
        self.name = inner.name + SUFFIX  # type: ignore[misc]  # per instance: every other family's is a ClassVar
        self.tools = inner.tools + ("torchvision",)  # type: ignore[misc]  # per instance, as name

    def model_names(self) -> tuple[str, ...]:
        return ()  # reached through the option, never by name

    def recognizes(self, pickled: list[str]) -> bool:
        return False

    def config_bytes(self, name: str) -> bytes:
        return self.inner.config_bytes(name)

    def random_model(self, name: str) -> torch.nn.Module:
        return self.inner.random_model(name)

    def model_from_checkpoint(self, checkpoint: Any, path: Path) -> torch.nn.Module:
        return self.inner.model_from_checkpoint(checkpoint, path)

    def for_export(self, model: torch.nn.Module) -> torch.nn.Module:
        """The inner family's export form; ``checkpoint.load_model`` then appends the NMS (``with_nms``)."""
        return self.inner.for_export(model)

    def embedded_facts(self, model: Any) -> dict[str, Any]:
        settings: NmsSettings = model.nms_settings
        return {**self.inner.embedded_facts(model.model), "max_det": settings.max_det,
                "nms": {"conf": settings.conf, "iou": settings.iou, "max_det": settings.max_det,
                        "multi_label": settings.multi_label}}

    def output_spec(self, facts: dict[str, Any]) -> dict[str, Any]:
        nms = facts["nms"]
        return {**super().output_spec(facts), "nms": nms,
                "head": f"{self.inner.name}'s NMS head with NMS inside the graph "
                        f"({NmsSettings(**nms).describe()})"}

    def read_image(self, path: Path) -> Any:
        return self.inner.read_image(path)

    def prepare(self, image: Any, imgsz: int) -> Preprocessed:
        return self.inner.prepare(image, imgsz)

    def sample_images(self) -> Path:
        return self.inner.sample_images()

    def float_module(self, model: Any) -> str | None:
        return self.inner.float_module(model)

    def violations(self, output: np.ndarray, facts: dict[str, Any]) -> int:
        """Kept pairs of one class, in one image, overlapping above the IoU the graph suppresses at: what its NMS must
        never keep, whatever the reference kept. Reduced precision in the graph's suppression (FP16 or bf16 per-class
        coordinate regions) shows exactly so."""
        return sum(unsuppressed(rows[rows[:, 4] > 0], float(facts["nms"]["iou"])) for rows in output)


def with_nms(model: torch.nn.Module, family: Family, settings: NmsSettings) -> torch.nn.Module:
    """``model`` (its family's export form) followed by the NMS of ``settings`` inside the same graph."""
    import torchvision  # noqa: F401 - registers torchvision::nms before an exporter builds its table of operators

    from yolo_optimize.families.modules import WithNms

    assert isinstance(family, InGraphNms)
    return WithNms(model, family.inner.nms_candidates, settings.resolved(family.inner.map_iou), MAX_CANDIDATES).eval()


def nms_family(family: Family) -> InGraphNms:
    """The family of ``family``'s artifacts built with NMS inside."""
    assert isinstance(family, Detector) and family.needs_nms
    return InGraphNms(family)
