"""The command line's options, made from the option records: every declared option is a click option of its command,
in declaration order, with its help, and that help states the option's real default; no command declares an option
by hand beside its record but ``--config`` and ``--json`` (where options come from, how the result prints)."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from yolo_optimize.building.options import BuildOptions
from yolo_optimize.cli.build_command import build
from yolo_optimize.cli.click_options import help_text, shown_value
from yolo_optimize.cli.main import main
from yolo_optimize.cli.measure_commands import evaluate_command, info, profile
from yolo_optimize.cli.report_commands import recommend, report
from yolo_optimize.declaring import Flag, declared
from yolo_optimize.evaluation.measuring.options import ProfileOptions
from yolo_optimize.evaluation.options import EvalOptions
from yolo_optimize.evaluation.reporting.options import RecommendOptions, ReportOptions
from yolo_optimize.limits.options import InfoOptions

COMMANDS = {"build": (build, BuildOptions), "eval": (evaluate_command, EvalOptions), "info": (info, InfoOptions),
            "profile": (profile, ProfileOptions), "recommend": (recommend, RecommendOptions),
            "report": (report, ReportOptions)}
OWN_FLAGS = {"config_file", "as_json"}  # --config, --json: the command's own


@pytest.mark.parametrize(("command", "record"), COMMANDS.values(), ids=COMMANDS)
def test_every_declared_option_is_a_click_option_of_its_command_with_its_help(command: click.Command,
                                                                              record: type) -> None:
    options = {p.name: p for p in command.params if isinstance(p, click.Option) and p.name not in OWN_FLAGS}
    on_line = [item for item in declared(record) if item.option.on_command_line]
    assert list(options) == [item.name for item in on_line]
    for item in on_line:
        option = options[item.name]
        dashed = item.name.replace("_", "-")
        flag_on = isinstance(item.option.kind, Flag) and item.default
        assert option.opts == [f"--no-{dashed}" if flag_on else f"--{dashed}"] and option.help == help_text(item)
        assert item.option.metavar in (None, option.metavar)


@pytest.mark.parametrize(("command", "record"), [COMMANDS["build"], COMMANDS["eval"]], ids=["build", "eval"])
def test_the_arguments_of_commands_with_config_files_are_declared_keys(command: click.Command, record: type) -> None:
    arguments = {p.name for p in command.params if isinstance(p, click.Argument)}
    assert {item.name for item in declared(record) if not item.option.on_command_line} == \
        {"root" if name == "directory" else name for name in arguments}


@pytest.mark.parametrize("record", [record for _, record in COMMANDS.values()], ids=COMMANDS)
def test_the_help_states_each_options_real_default(record: type) -> None:
    """Where the help says more than the value (``auto: cuda where a GPU is visible``), it starts with the value."""
    shown = [item for item in declared(record) if not isinstance(item.option.kind, Flag)
             and item.default not in (None, ()) and item.option.on_command_line]
    for item in shown:
        assert f"[default: {shown_value(item.default)}" in help_text(item), item.name


def test_the_help_pages_list_the_declared_options() -> None:
    runs = {name: CliRunner().invoke(main, [name, "--help"]) for name in COMMANDS}
    assert all(run.exit_code == 0 for run in runs.values())
    pages = {name: " ".join(run.output.split()) for name, run in runs.items()}  # as one line, however click wraps
    assert "--threads INTEGER RANGE" in pages["build"] and "[default: the CPUs this process may use]" in pages["build"]
    assert "--no-accuracy" in pages["eval"] and "--add [FAMILY=]PATH" in pages["eval"]
    assert "[default: torchscript,aoti,onnx,openvino]" in pages["build"]
    assert "[default: every batch size the report measured]" in pages["recommend"] and "--json" in pages["recommend"]
    assert "--by [inference|e2e]" in pages["recommend"] and "--compare OTHER" in pages["report"]
    assert "--fail-on-regression P%" in pages["report"] and "[default: the usable CPUs]" in pages["info"]
    assert "--out PATH" in pages["profile"] and "[default: reports/profile]" in pages["profile"]
