"""Evaluation options: one record for the command, the API and TOML config files, the command line overriding the
file, and a wrong key or value refused in one line that names it and where it came from, before any work."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import VAL_DATA, optimize
from yolo_optimize.errors import UserError
from yolo_optimize.evaluation.options import ROW_TIMEOUT_S, EvalOptions, eval_options
from yolo_optimize.evaluation.session import EvalRequest


def test_every_command_line_option_of_eval_is_a_config_key() -> None:
    from yolo_optimize.cli.measure_commands import evaluate_command

    options = {param.name for param in evaluate_command.params} - {"config_file"}
    keys = {"root" if name == "directory" else name for name in options}
    assert keys == set(EvalOptions.__dataclass_fields__)


def test_a_config_file_is_read_then_overridden_by_what_is_given(tmp_path: Path) -> None:
    config = tmp_path / "eval.toml"
    config.write_text(f'directory = "{tmp_path}"\ndata = "{VAL_DATA}"\nbatch-sizes = [8, 1, 8]\nrepeats = 5\n'
                      'end_to_end = false\n')
    options = eval_options(config, {"repeats": 2, "add": ["yolov5=a.onnx"]}, "command line")
    assert options == EvalOptions(root=tmp_path, data=VAL_DATA, batch_sizes=(1, 8), repeats=2, end_to_end=False,
                                  add=("yolov5=a.onnx",))
    assert options.row_timeout == ROW_TIMEOUT_S and options.mode == "auto" and options.out is None


def test_the_request_carries_the_options_as_settings_without_parsing_them_again(tmp_path: Path) -> None:
    options = eval_options(None, {"root": tmp_path, "batch_sizes": [8, 1], "threads": 1, "device": "cpu",
                                  "row_timeout": 30, "profile": True, "out": tmp_path / "report"}, "test")
    request = EvalRequest.of(options)
    settings = request.settings
    assert settings.batch_sizes == (1, 8) and settings.threads == 1 and settings.device == "cpu"
    assert settings.row_timeout_s == 30 and settings.profile_dir == tmp_path / "report" / "profiles"


@pytest.mark.parametrize(("given", "message"), [
    ({"repeats": 0}, "test: repeats: must be an integer >= 1, got 0"),
    ({"batch_size": 2}, "test: unknown key 'batch_size' (keys: root, data, out, batch-sizes, device,"),
    ({"mode": "fast"}, "test: mode: must be one of auto, latency, throughput, got 'fast'"),
    ({"row_timeout": 0.5}, "test: row_timeout: must be a finite number >= 1, got 0.5"),
])
def test_a_bad_option_is_named_with_where_it_came_from(given: dict[str, object], message: str) -> None:
    with pytest.raises(UserError) as refused:
        eval_options(None, given, "test")
    assert str(refused.value).startswith(message)


def test_eval_with_a_bad_config_file_says_so_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    config = tmp_path / "eval.toml"
    config.write_text(f'directory = "{tmp_path}"\nrepeats = "three"\n')
    result = optimize("eval", "--config", config, "--out", tmp_path / "report")
    assert result.returncode == 2 and result.stdout == "", result.stdout
    assert result.stderr.strip() == f"error: config file {config}: repeats: must be an integer >= 1, got 'three'"
    assert not (tmp_path / "report").exists()
