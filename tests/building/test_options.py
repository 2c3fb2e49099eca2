"""Build config files: every option a key, the command line overriding the file, the same file for the API, and a
wrong key or value refused in one line that names it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import VAL_DATA, WEIGHTS, brief, optimize, statuses
from yolo_optimize.building.options import BuildOptions
from yolo_optimize.errors import UserError


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_every_command_line_option_of_build_is_a_config_key() -> None:
    from yolo_optimize.cli.build_command import build

    options = {param.name for param in build.params} - {"config_file"}
    assert options == {field for field in BuildOptions.__dataclass_fields__}


def test_a_config_file_builds_like_the_command_line_and_flags_override_it(built: Path, tmp_path: Path) -> None:
    """On a copy of the session build: the file asks for ONNX FP32, the command line adds OpenVINO; both come out
    cached (the same keys as the session build's), and the API reads the same file."""
    out = tmp_path / "artifacts"
    shutil.copytree(built.parent, out)
    config = write(tmp_path / "build.toml", f'model = "{WEIGHTS}"\ntargets = ["onnx"]\nprecisions = "fp32"\n'
                                            f'batch-sizes = [1, 8]\nparity-data = "{VAL_DATA}"\nout = "{out}"\n'
                                            'threads = 1\n')
    result = optimize("build", "--config", config, "--targets", "onnx,openvino")
    assert result.returncode == 0, brief(result)
    found = statuses(result)
    assert found["onnx-fp32"] == found["openvino-fp32"] == "cached" and "torchscript-fp32" not in found
    import yolo_optimize as yo

    build = yo.build(config=config)
    assert [r.node for r in build.models[0].nodes if r.status == "cached"] == ["load", "reference", "onnx-export",
                                                                               "onnx-fp32"]


@pytest.mark.parametrize(("text", "message"), [
    ("batch_size = 2\n", "unknown key 'batch_size'"),
    ("jobs = 'two'\n", "jobs: must be an integer >= 1, got 'two'"),
    ("targets = ['onnx', 'tflite']\n", "targets: unknown target tflite"),
    ("max-map-drop = -1\n", "max-map-drop: must be a finite number >= 0, got -1"),
    ("max-map-drop = nan\n", "max-map-drop: must be a finite number >= 0, got nan"),
    ("device = 'tpu'\n", "device: must be one of auto, cpu, cuda, got 'tpu'"),
    ("targets = [onnx\n", "is not valid TOML"),
])
def test_a_wrong_key_or_value_is_refused_in_one_line_naming_it(tmp_path: Path, text: str, message: str) -> None:
    config = write(tmp_path / "build.toml", f'model = "{WEIGHTS}"\n' + text)
    result = optimize("build", "--config", config, "--out", tmp_path / "out")
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert message in result.stderr and str(config) in result.stderr
    assert not (tmp_path / "out").exists()


def test_options_are_checked_the_same_from_the_api_and_a_file() -> None:
    options = BuildOptions().updated({"batch-sizes": "8,1,8", "imgsz": [320, 640], "jobs": 3}, "test")
    assert options.batch_sizes == (1, 8) and options.imgsz == (320, 640) and options.jobs == 3
    with pytest.raises(UserError, match="test: calib_images: must be an integer >= 1, got True"):
        BuildOptions().updated({"calib_images": True}, "test")
