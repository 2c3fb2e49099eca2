"""Model facts: GFLOPs per image at the input size match the figures YOLOv5 and torchvision publish."""

from __future__ import annotations

import pytest

from tests.conftest import WEIGHTS
from yolo_optimize.checkpoint import resolve_source
from yolo_optimize.evaluate.facts import model_facts


@pytest.mark.parametrize(("model", "imgsz", "gflops", "tolerance"), [
    (str(WEIGHTS), 640, 4.5, 0.2), ("yolov5s", 640, 16.5, 0.5), ("resnet18", 224, 3.6, 0.2)])
def test_gflops_match_the_published_figures(model: str, imgsz: int, gflops: float, tolerance: float) -> None:
    facts = model_facts(resolve_source(model, random_weights=model != str(WEIGHTS)), imgsz)
    assert facts.gflops_per_image == pytest.approx(gflops, abs=tolerance)
    assert next(iter(facts.macs_by_layer_type)) == "Conv2d", "convolutions carry nearly all the work"
    assert sum(facts.macs_by_layer_type.values()) * 2 / 1e9 == pytest.approx(facts.gflops_per_image, rel=1e-3)


def test_gflops_scale_with_the_input_area() -> None:
    source = resolve_source(str(WEIGHTS))
    assert model_facts(source, 320).gflops_per_image == pytest.approx(model_facts(source, 640).gflops_per_image / 4,
                                                                       rel=0.01)
