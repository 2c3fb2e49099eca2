"""Model facts: GFLOPs per image at the input size match the figures YOLOv5 and torchvision publish; a built
model's are counted once and then read from the cache."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from tests.conftest import WEIGHTS
from yolo_optimize.artifact import Manifest
from yolo_optimize.checkpoint import resolve_source
from yolo_optimize.evaluation.facts import model_facts, recorded_model_facts


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


def test_a_built_models_facts_are_counted_once_per_build_record_and_input_size(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A changed cache file is what the next evaluation reads (nothing counted again); another build record of the
    model (a changed checkpoint or family package) is counted afresh."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    source = resolve_source("resnet18", random_weights=True)
    load = Manifest(node="load", stage="load", model_id=source.model_id, target=None, precision=None, entry=None,
                    cache_key="first", parents={}, params={}, tool_versions={}, metadata={},
                    info={"source": asdict(source)})
    counted = recorded_model_facts(load, 64)
    assert counted == model_facts(source, 64)
    (cached,) = (tmp_path / "yolo-optimize" / "facts").glob("*.json")
    cached.write_text(json.dumps({**json.loads(cached.read_text()), "parameters": -1}))
    assert recorded_model_facts(load, 64).parameters == -1, "read from the cache, not counted again"
    assert recorded_model_facts(replace(load, cache_key="rebuilt"), 64) == counted
    assert len(list((tmp_path / "yolo-optimize" / "facts").glob("*.json"))) == 2
