"""``optimize build``: every target x precision of a model, cached, with a live table per model (one line per node
in logs, or per node event of models built at once on a cluster) and exit 1 when a node failed."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from yolo_optimize.building.options import BuildOptions, build_options
from yolo_optimize.cli.click_options import given_only, options_of
from yolo_optimize.cli.console import console, say
from yolo_optimize.cli.exit_codes import stop_interrupted, user_errors
from yolo_optimize.declaring import RAY

if TYPE_CHECKING:
    from yolo_optimize.building.dag import NodeResult
    from yolo_optimize.building.request import BuildRequest


@click.command()
@click.argument("model", required=False)
@click.option("--config", "config_file", type=click.Path(path_type=Path),
              help="A TOML file of these options (keys as named here: batch-sizes = [1, 8]); options given on the "
                   "command line override it.")
@options_of(BuildOptions)
@user_errors
def build(model: str | None, config_file: Path | None, **given: Any) -> None:
    """Export MODEL (yolov5n-x, yolov8n-x, yolo11n-x, yolo12n-x, yolo26n-x, yolov10n-x, rtdetr-l, yolov9t, a
    torchvision classifier such as resnet18, a YOLOv7 model YAML, or a .pt path) to every target x precision,
    cached, in parallel."""
    from yolo_optimize.building.builder import run_build
    from yolo_optimize.cli.build_display import results_table
    from yolo_optimize.limits.choices import needs_measuring

    options = build_options(config_file, given_only({**given, "model": model}), "command line")
    hosts = options.executor == RAY
    if not hosts and needs_measuring(options.precisions):
        console.print("measuring this machine's bf16 and fp32 rates first: whether bf16 pays here (optimize info, "
                      "about a minute, once per machine and tool versions)", highlight=False)
    try:
        result = run_build(options, on_event=_node_line, on_model=functools.partial(_model_display, hosts=hosts))
    except KeyboardInterrupt:
        stop_interrupted("interrupted: nodes in flight were stopped and their staging folders removed; built nodes "
                         "are kept and the next build resumes")
    if hosts and len(result.models) > 1:  # the models were built at once, each line as it came: their tables now
        for built in result.models:
            console.print(results_table(built.nodes, title=f"{built.model} at {built.imgsz}", hosts=True))
    for note in result.notes:
        console.print(note, highlight=False, soft_wrap=True)
    if result.failed:
        failed = result.failed if len(result.models) > 1 else [name.split("/", 1)[1] for name in result.failed]
        click.echo(f"error: {len(failed)} node(s) failed: {', '.join(failed)}", err=True)
        sys.exit(1)


def _node_line(node: str, result: NodeResult | None) -> None:
    """One line per node event of models built at once (a cluster build of several input sizes)."""
    if result is None:
        console.print(f"{node}: started", highlight=False)
    else:
        where = f" on {result.host}" + (f" (attempt {result.attempt})" if result.attempt > 1 else "") \
            if result.host else ""
        console.print(f"{node}: {result.status}{where}", highlight=False)


class _model_display:  # noqa: N801 - used as a function: the live table of one model's build, then its summary
    def __init__(self, request: BuildRequest, nodes: list[str], hosts: bool = False) -> None:
        from yolo_optimize.cli.build_display import BuildDisplay

        self.request, self.display, self.hosts = request, BuildDisplay(console, nodes), hosts
        self.results: list[NodeResult] = []

    def __enter__(self) -> _model_display:
        say(f"building {self.request.source.model_id}")
        self.display.__enter__()
        return self

    def event(self, node: str, result: NodeResult | None) -> None:
        self.display.event(node, result)
        if result is not None:
            self.results.append(result)

    def __exit__(self, *exc: Any) -> None:
        self.display.__exit__(*exc)
        if exc[0] is None:
            from yolo_optimize.cli.build_display import results_table

            order = {name: index for index, name in enumerate(self.display.rows)}
            console.print(results_table(sorted(self.results, key=lambda r: order[r.node]),
                                        title=f"{self.request.source.model_id} at {self.request.imgsz}",
                                        hosts=self.hosts))
