"""The command line's options, made from the option records: every declared option is a click option of its command,
in declaration order, with its help, and that help states the option's real default."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from yolo_optimize.building.config import BuildOptions
from yolo_optimize.cli.main import build, evaluate_command, main
from yolo_optimize.cli.options import help_text, shown_value
from yolo_optimize.evaluation.options import EvalOptions
from yolo_optimize.options import Flag, declared

COMMANDS = [(build, BuildOptions), (evaluate_command, EvalOptions)]


@pytest.mark.parametrize(("command", "record"), COMMANDS, ids=["build", "eval"])
def test_every_declared_option_is_a_click_option_of_its_command_with_its_help(command: click.Command,
                                                                              record: type) -> None:
    options = {p.name: p for p in command.params if isinstance(p, click.Option) and p.name != "config_file"}
    on_line = [item for item in declared(record) if item.option.on_command_line]
    assert list(options) == [item.name for item in on_line]
    for item in on_line:
        option = options[item.name]
        dashed = item.name.replace("_", "-")
        flag_on = isinstance(item.option.kind, Flag) and item.default
        assert option.opts == [f"--no-{dashed}" if flag_on else f"--{dashed}"] and option.help == help_text(item)
    arguments = {p.name for p in command.params if isinstance(p, click.Argument)}
    assert {item.name for item in declared(record) if not item.option.on_command_line} == \
        {"root" if name == "directory" else name for name in arguments}


@pytest.mark.parametrize("record", [BuildOptions, EvalOptions], ids=["build", "eval"])
def test_the_help_states_each_options_real_default(record: type) -> None:
    """Where the help says more than the value (``auto: cuda where a GPU is visible``), it starts with the value."""
    shown = [item for item in declared(record) if not isinstance(item.option.kind, Flag)
             and item.default not in (None, ()) and item.option.on_command_line]
    assert len(shown) >= 8
    for item in shown:
        assert f"[default: {shown_value(item.default)}" in help_text(item), item.name


def test_the_help_pages_list_the_declared_options() -> None:
    runs = {name: CliRunner().invoke(main, [name, "--help"]) for name in ("build", "eval")}
    assert all(run.exit_code == 0 for run in runs.values())
    pages = {name: " ".join(run.output.split()) for name, run in runs.items()}  # as one line, however click wraps
    assert "--threads INTEGER RANGE" in pages["build"] and "[default: the CPUs this process may use]" in pages["build"]
    assert "--no-accuracy" in pages["eval"] and "--add [FAMILY=]PATH" in pages["eval"]
    assert "[default: torchscript,aoti,onnx,openvino]" in pages["build"]
