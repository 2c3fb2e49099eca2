"""YOLOv7: the shipped upstream configs and a user's model YAML (checked before YOLOv7's parser evals it), a
checkpoint pickled under the training repo's module names beside a YOLOv5 one in the same process, real builds."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import VAL_DATA, WEIGHTS, brief, optimize
from yolo_optimize.checkpoint import load_model, pickle_globals, resolve_source
from yolo_optimize.errors import UserError

TOY = Path(__file__).parent / "data" / "yolov7-toy.yaml"


def test_a_model_yaml_builds_with_seeded_random_weights_and_is_labelled() -> None:
    source = resolve_source(str(TOY))
    assert (source.family, source.model_id, source.pretrained) == ("yolov7", "yolov7-toy-random", False)
    assert resolve_source(str(TOY)).identity == source.identity
    model = load_model(source)
    with torch.no_grad():
        output = model(torch.zeros(2, 3, 320, 320))
    assert output.shape == (2, 3 * (40 * 40 + 20 * 20 + 10 * 10), 85)
    assert model.names[0] == "person"


def test_named_yolov7s_build_from_the_shipped_upstream_configs(tmp_path: Path) -> None:
    """yolov7-tiny, yolov7 and yolov7x are upstream's cfg/deploy files, passed through the same config check;
    their parameter counts are the ones upstream's README gives."""
    for name, parameters in (("yolov7-tiny", 6.2e6), ("yolov7", 36.9e6), ("yolov7x", 71.3e6)):
        source = resolve_source(name, random_weights=True)
        assert (source.family, source.model_id, source.pretrained) == ("yolov7", f"{name}-random", False)
        model = load_model(source)
        assert abs(sum(p.numel() for p in model.parameters()) / parameters - 1) < 0.01, name
    with pytest.raises(UserError, match="model config not found: .*nowhere.yaml"):
        resolve_source(str(tmp_path / "nowhere.yaml"))


def test_a_config_argument_yolov7_would_eval_is_refused_before_anything_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    hostile = tmp_path / "hostile.yaml"
    hostile.write_text(TOY.read_text().replace("[[-1, 1, Conv, [32, 1, 1, None, 1, nn.LeakyReLU(0.1)]],  # 8",
                                               f"[[-1, 1, Conv, [32, 1, 1, \"open('{marker}', 'w')\"]],  # 8"))
    with pytest.raises(UserError, match=r"argument \"open\(.*\)\" of Conv is not a form YOLOv7 configs use"):
        load_model(resolve_source(str(hostile)))
    assert not marker.exists()


def test_a_checkpoint_with_training_repo_names_loads_beside_yolov5_in_one_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Saved as YOLOv7's train.py saves it: classes pickled as ``models.common.*`` / ``models.yolo.*``."""
    import yolov7_package.models
    import yolov7_package.models.common
    import yolov7_package.models.yolo
    from yolov7_package.models.yolo import Model

    torch.manual_seed(1)
    trained = Model(str(TOY), ch=3, nc=80).eval()
    checkpoint = tmp_path / "yolov7-mine.pt"
    with monkeypatch.context() as patch:
        for name, module in (("models", yolov7_package.models), ("models.common", yolov7_package.models.common),
                             ("models.yolo", yolov7_package.models.yolo)):
            patch.setitem(sys.modules, name, module)
            for cls in {type(m) for m in trained.modules() if type(m).__module__ == module.__name__}:
                patch.setattr(cls, "__module__", name)
        torch.save({"model": trained, "epoch": -1}, checkpoint)
    pickled = pickle_globals(checkpoint)
    assert "models.yolo.IDetect" in pickled and "models.common.SPPCSPC" in pickled
    source = resolve_source(str(checkpoint))
    assert (source.family, source.pretrained) == ("yolov7", True)
    image = torch.rand(1, 3, 320, 320)
    with torch.no_grad():
        expected = trained(image)[0]
        torch.testing.assert_close(load_model(source)(image), expected, atol=1e-4, rtol=1e-4)
        yolov5 = load_model(resolve_source(str(WEIGHTS)))
        assert yolov5(image).shape == (1, 6300, 85) and type(yolov5.model).__module__ == "yolov5.models.yolo"


@pytest.mark.slow
def test_yolov7_tiny_builds_to_onnx_and_openvino_with_parity(tmp_path: Path) -> None:
    out = tmp_path / "artifacts"
    result = optimize("build", "yolov7-tiny", "--random-weights", "--imgsz", "320", "--targets", "onnx,openvino",
                      "--precisions", "fp32", "--batch-sizes", "1,2", "--out", out, "--parity-data", VAL_DATA)
    assert result.returncode == 0, brief(result)
    for node in ("onnx-fp32", "openvino-fp32"):
        manifest = json.loads((out / "yolov7-tiny-random" / node / "manifest.json").read_text())
        assert manifest["metadata"]["family"] == "yolov7" and manifest["parity"]["passed"]
        assert manifest["parity"]["max_abs_diff_boxes_px"] < 0.05 and manifest["parity"]["max_abs_diff_scores"] < 1e-3
        assert manifest["parity"]["agreement_enforced"].startswith("no: random weights")
