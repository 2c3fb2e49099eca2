"""The ``optimize`` command: the click group, its version and error handling, and the commands it gathers from the
modules that hold them (build_command.py, measure_commands.py, report_commands.py)."""

from __future__ import annotations

import click

from yolo_optimize.cli.arm_command import arm_setup
from yolo_optimize.cli.build_command import build
from yolo_optimize.cli.exit_codes import OneLineErrors
from yolo_optimize.cli.measure_commands import evaluate_command, info, profile
from yolo_optimize.cli.report_commands import recommend, report
from yolo_optimize.versions import __version__


@click.group(cls=OneLineErrors)
@click.version_option(__version__, prog_name="yolo-optimize")
def main() -> None:
    """Export, optimize and evaluate YOLO detectors (YOLOv3 to YOLO12) and torchvision classifiers."""
    from yolo_optimize.host.environment import configure

    configure()  # this process is ours: the tools stay offline and out of $HOME


for command in (build, evaluate_command, info, profile, recommend, report, arm_setup):
    main.add_command(command)
