"""Loading: the real checkpoint through the allow-list, random weights, and every bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.conftest import WEIGHTS
from yolo_optimize.checkpoint import load_model, pickle_globals, resolve_source
from yolo_optimize.errors import UserError


def test_pretrained_checkpoint_loads_fused_in_eval_mode_with_its_names_and_strides() -> None:
    source = resolve_source(str(WEIGHTS))
    model = load_model(source)
    assert source.pretrained and source.model_id == "yolov5n"
    assert source.identity == "4f180cf23ba0717ada0badd6c685026d73d48f184d00fc159c2641284b2ac0a3"
    assert not model.training
    assert model.names[0] == "person" and len(model.names) == 80
    assert model.stride.tolist() == [8, 16, 32]
    assert not any(type(m).__name__ == "BatchNorm2d" for m in model.modules()), "BatchNorm should be fused"
    with torch.no_grad():
        output = model(torch.zeros(2, 3, 320, 320))
    assert output.shape == (2, (40 * 40 + 20 * 20 + 10 * 10) * 3, 85)


def test_name_resolves_through_weights_dir() -> None:
    source = resolve_source("yolov5n", weights_dir=WEIGHTS.parent)
    assert source.checkpoint == WEIGHTS.resolve()


def test_missing_name_offline_says_where_to_put_the_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("YOLO_OPTIMIZE_OFFLINE", "1")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with pytest.raises(UserError, match=r"yolov5s\.pt not found in .*--weights-dir"):
        resolve_source("yolov5s", weights_dir=tmp_path / "nowhere")


def test_random_weights_build_the_architecture_and_are_labelled() -> None:
    source = resolve_source("yolov5s", random_weights=True)
    model = load_model(source)
    assert not source.pretrained and source.model_id == "yolov5s-random"
    assert 7.0e6 < sum(p.numel() for p in model.parameters()) < 7.5e6
    assert resolve_source("yolov5s", random_weights=True).identity == source.identity


@pytest.mark.parametrize("model", ["yolov9", "resnet5"])
def test_unknown_model_name(model: str) -> None:
    with pytest.raises(UserError, match="unknown model .*: use yolov5n-yolov5x; yolov7, yolov7-tiny, yolov7x, or "
                                        "a YOLOv7 model YAML or checkpoint; "
                                        "yolov8n-yolov8x, yolo11n-yolo11x, yolo12n-yolo12x, .*yolov9t/s/m/c/e, .*; "
                                        "any torchvision.models classifier"):
        resolve_source(model)


def test_a_classifier_without_weights_says_to_bring_them_or_use_random_weights(monkeypatch: pytest.MonkeyPatch,
                                                                               tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("YOLO_OPTIMIZE_OFFLINE", raising=False)  # online, and still nothing to download
    with pytest.raises(UserError, match="resnet50.pt not found in .* torchvision publishes no weights to download"):
        resolve_source("resnet50", weights_dir=tmp_path)


def test_corrupt_checkpoint(tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(WEIGHTS.read_bytes()[: 100_000])
    with pytest.raises(UserError, match="is not a PyTorch checkpoint"):
        load_model(resolve_source(str(corrupt)))


def test_pickle_outside_the_allow_list_is_refused_before_loading(tmp_path: Path) -> None:
    hostile = tmp_path / "hostile.pt"
    torch.save({"model": Path("/")}, hostile)
    assert any(name.startswith("pathlib.") for name in pickle_globals(hostile))
    with pytest.raises(UserError, match="refused before loading: its pickle would import pathlib"):
        load_model(resolve_source(str(hostile)))


def test_a_checkpoint_of_no_known_family_is_refused_before_unpickling(tmp_path: Path) -> None:
    other = tmp_path / "other.pt"
    torch.save({"model": torch.nn.Linear(2, 2).state_dict()}, other)
    with pytest.raises(UserError, match=r"not a checkpoint of a supported model family \(yolov5, yolov7, "
                                        r"ultralytics, torchvision\): its pickle holds no model class of theirs "
                                        r"\(nothing in it was run\)"):
        resolve_source(str(other))
