"""The ``optimize`` command."""

from __future__ import annotations

import functools
import json
import os
import shlex
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console

from yolo_optimize.artifact import check_writable, written_whole
from yolo_optimize.building.options import BuildOptions, build_options
from yolo_optimize.cli.click_options import options_of
from yolo_optimize.declaring import RAY, record_of
from yolo_optimize.errors import UserError
from yolo_optimize.evaluation.measuring.options import ProfileOptions
from yolo_optimize.evaluation.options import COMMAND_OUT, EvalOptions, eval_options
from yolo_optimize.evaluation.reporting.options import RecommendOptions, ReportOptions
from yolo_optimize.host.cpu import usable_cpus
from yolo_optimize.limits.options import InfoOptions
from yolo_optimize.versions import __version__

if TYPE_CHECKING:
    from yolo_optimize.limits.peaks import MachineLimits

console = Console(width=None if sys.stdout.isatty() else 160)


def user_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Bad input becomes one line on stderr and exit code 2; a failure while working one line and exit code 1, its
    class first (``out of memory``, ``disk full``, else ``crashed``, the traceback kept in a file it names)."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, _interrupted_once)
        try:
            return command(*args, **kwargs)
        except UserError as err:
            click.echo(f"error: {err}", err=True)
            sys.exit(2)
        except KeyboardInterrupt:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up short
            raise
        except Exception as err:  # noqa: BLE001 - one line for the user, the traceback for a bug report
            click.echo(f"error: {_failure_line(err)}", err=True)
            sys.exit(1)

    return wrapper


def _interrupted_once(signum: int, frame: Any) -> None:
    """The first Ctrl-C interrupts the work; every later one is ignored from that moment, so a second press (a
    terminal's double Ctrl-C) cannot land in the clean-up that stops the measuring processes and cut it short."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def _failure_line(err: Exception) -> str:
    from yolo_optimize.host.environment import scratch_dir
    from yolo_optimize.host.processes import classified, one_line, resource_shortage

    if resource_shortage(err):
        return classified(err)
    log = scratch_dir() / f"crash-{os.getpid()}.log"
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("".join(traceback.format_exception(err)))
    except OSError:
        return f"crashed: {type(err).__name__}: {one_line(err)}"
    return f"crashed: {type(err).__name__}: {one_line(err)} (traceback: {log})"


class OneLineErrors(click.Group):
    """Click's own refusals (a value out of range, an unknown option) said like every other bad input: one line on
    stderr naming the option, exit 2, instead of click's usage block."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        try:
            code = super().main(*args, **{**kwargs, "standalone_mode": False})
        except click.ClickException as err:
            click.echo(f"error: {err.format_message()}", err=True)
            sys.exit(err.exit_code)
        except click.Abort:
            click.echo("interrupted", err=True)
            sys.exit(130)
        sys.exit(code if isinstance(code, int) else 0)


@click.group(cls=OneLineErrors)
@click.version_option(__version__, prog_name="yolo-optimize")
def main() -> None:
    """Export, optimize and evaluate YOLO detectors (YOLOv3 to YOLO12) and torchvision classifiers."""
    from yolo_optimize.host.environment import configure

    configure()  # this process is ours: the tools stay offline and out of $HOME


@main.command()
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
    from yolo_optimize.limits.choices import needs_measuring

    options = build_options(config_file, _given({**given, "model": model}), "command line")
    hosts = options.executor == RAY
    if not hosts and needs_measuring(options.precisions):
        console.print("measuring this machine's bf16 and fp32 rates first: whether bf16 pays here (optimize info, "
                      "about a minute, once per machine and tool versions)", highlight=False)
    try:
        result = run_build(options, on_event=_node_line, on_model=functools.partial(_model_display, hosts=hosts))
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up short
        click.echo("interrupted: nodes in flight were stopped and their staging folders removed; "
                   "built nodes are kept and the next build resumes", err=True)
        sys.exit(130)
    if hosts and len(result.models) > 1:  # the models were built at once, each line as it came: their tables now
        from yolo_optimize.cli.console import results_table

        for built in result.models:
            console.print(results_table(built.nodes, title=f"{built.model} at {built.imgsz}", hosts=True))
    for note in result.notes:
        console.print(note, highlight=False, soft_wrap=True)
    if result.failed:
        failed = result.failed if len(result.models) > 1 else [name.split("/", 1)[1] for name in result.failed]
        click.echo(f"error: {len(failed)} node(s) failed: {', '.join(failed)}", err=True)
        sys.exit(1)


def _given(values: dict[str, Any]) -> dict[str, Any]:
    """What the command line said: the options it was given (click passes None, or () for a repeatable option, for
    the others), which override the config file's."""
    return {key: value for key, value in values.items() if value is not None and value != ()}


def _node_line(node: str, result: Any) -> None:
    """One line per node event of models built at once (a cluster build of several input sizes)."""
    if result is None:
        console.print(f"{node}: started", highlight=False)
    else:
        where = f" on {result.host}" + (f" (attempt {result.attempt})" if result.attempt > 1 else "") \
            if result.host else ""
        console.print(f"{node}: {result.status}{where}", highlight=False)


class _model_display:  # noqa: N801 - used as a function: the live table of one model's build, then its summary
    def __init__(self, request: Any, nodes: list[str], hosts: bool = False) -> None:
        from yolo_optimize.cli.console import BuildDisplay

        self.request, self.display, self.hosts = request, BuildDisplay(console, nodes), hosts
        self.results: list[Any] = []

    def __enter__(self) -> Any:
        _say(f"building {self.request.source.model_id}")
        self.display.__enter__()
        return self

    def event(self, node: str, result: Any) -> None:
        self.display.event(node, result)
        if result is not None:
            self.results.append(result)

    def __exit__(self, *exc: Any) -> None:
        from yolo_optimize.cli.console import results_table

        self.display.__exit__(*exc)
        if exc[0] is None:
            order = {name: index for index, name in enumerate(self.display.rows)}
            console.print(results_table(sorted(self.results, key=lambda r: order[r.node]),
                                        title=f"{self.request.source.model_id} at {self.request.imgsz}",
                                        hosts=self.hosts))


def _say(text: str) -> None:
    """Progress for logs: a spinner shows it on a terminal, a line elsewhere."""
    if not console.is_terminal:
        console.print(text)


@main.command(name="eval")
@click.argument("directory", required=False, type=click.Path(path_type=Path))
@click.option("--config", "config_file", type=click.Path(path_type=Path),
              help="A TOML file of these options (keys as named here: batch-sizes = [1, 8], directory = \"...\"); "
                   "options given on the command line override it.")
@options_of(EvalOptions)
@user_errors
def evaluate_command(directory: Path | None, config_file: Path | None, **given: Any) -> None:
    """Measure every artifact under DIRECTORY (and any --add model file) and write the speedup matrix."""
    from yolo_optimize.cli.console import progress_bar
    from yolo_optimize.evaluation.reporting.matrix import report_warnings
    from yolo_optimize.evaluation.reporting.recommend import Budget, brief, recommend
    from yolo_optimize.evaluation.reporting.report import rich_table
    from yolo_optimize.evaluation.session import EvalRequest, measured_anything, report_folder, run_evaluation

    options = eval_options(config_file, _given({**given, "root": directory}), "command line")
    options = replace(options, out=options.out or COMMAND_OUT)
    out = options.out_folder
    if options.executor == RAY:
        _evaluate_on_hosts(options)
        return
    if options.on:
        raise UserError("--on goes with --executor ray")
    request = EvalRequest.of(options)
    try:
        with progress_bar(console) as bar:
            task = bar.add_task("evaluating", total=None)
            report = run_evaluation(request, lambda text, done, total: _progress(bar, task, text, done, total))
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up short
        click.echo("interrupted: nothing was written", err=True)
        sys.exit(130)
    console.print(rich_table(report))
    for warning in report_warnings(report):
        click.echo(warning, err=True)
    written = report_folder(out, report)
    console.print(f"wrote {written / 'results.json'}, matrix.csv, matrix.md, report.html", highlight=False)
    if not measured_anything(report):
        kept = f"; {out} is as it was" if (out / "results.json").is_file() else ""
        click.echo(f"error: no artifact could be measured (the failed report is in {written}{kept})", err=True)
        sys.exit(1)
    console.print(f"What to ship (within 1.0 point of accuracy; 'optimize recommend {shlex.quote(str(out))}' for "
                  f"limits and code):", highlight=False)
    for batch in request.settings.batch_sizes:
        for found in recommend(report, Budget(batch)):
            console.print(f"  {brief(found)}", highlight=False)


def _json_flag(what: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--json``: the command's result printed as JSON instead of text, how it prints rather than what it does (as
    ``--config`` says where the options come from): the command's own flag, no option of its record."""
    return click.option("--json", "as_json", is_flag=True, help=f"Print the {what} as JSON.")


@main.command()
@options_of(InfoOptions)
@_json_flag("limits")
@user_errors
def info(as_json: bool, **given: Any) -> None:
    """This machine: CPU, ISA, runtimes and their measured peak GEMM/convolution rates and memory bandwidth (cached)."""
    from yolo_optimize.limits.display import limits_tables
    from yolo_optimize.limits.peaks import machine_limits

    options = record_of(InfoOptions, _given(given), "command line")
    with console.status("measuring this machine's limits (about a minute, once per machine and tool versions)"):
        limits = machine_limits(options.threads or usable_cpus(), refresh=options.refresh, rounds=options.rounds)
    if as_json:
        click.echo(json.dumps(asdict(limits), indent=2))
        return
    for table in limits_tables(limits):
        console.print(table)


@main.command()
@click.argument("artifact", type=click.Path(path_type=Path))
@options_of(ProfileOptions)
@user_errors
def profile(artifact: Path, **given: Any) -> None:
    """Explain one ARTIFACT folder: per-layer time and hotspots, a trace, the end-to-end breakdown, thread scaling
    and energy (profile.json, profile.md, trace.json in --out)."""
    from yolo_optimize.evaluation.measuring.discover import verified_artifact
    from yolo_optimize.evaluation.measuring.profiling import ProfileRequest, profile_artifact
    from yolo_optimize.evaluation.reporting.profile_page import profile_markdown, write_profile
    from yolo_optimize.images import list_images
    from yolo_optimize.metadata import ArtifactMetadata
    from yolo_optimize.runtime.runners import runner_class

    options = record_of(ProfileOptions, _given(given), "command line")
    manifest = verified_artifact(artifact)
    unavailable = runner_class(str(manifest.target)).unavailable_reason("cpu")  # profiles are taken on the CPU
    if unavailable:
        raise UserError(f"{artifact}: {unavailable}")
    family = ArtifactMetadata.of(manifest).model_family()
    files = tuple(list_images(options.data or family.sample_images())[:options.images])
    out = options.out
    check_writable(out)
    threads = options.threads or usable_cpus()
    limits = _measured_limits(threads)
    with console.status(f"profiling {artifact}"), written_whole(out, last="profile.json") as staging:
        result = profile_artifact(ProfileRequest(artifact, manifest, files, batch_size=options.batch_size,
                                                 largest_batch=options.largest_batch, threads=threads, out=staging,
                                                 min_time_s=options.min_time, limits=limits))
        written = write_profile(result, staging)
    console.print(profile_markdown(result))
    for path in written:
        console.print(f"wrote {out / path.relative_to(staging)}")


@main.command()
@click.argument("report_dir", metavar="REPORT", type=click.Path(path_type=Path))
@options_of(RecommendOptions)
@_json_flag("recommendations")
@user_errors
def recommend(report_dir: Path, as_json: bool, **given: Any) -> None:
    """Which artifact of an eval REPORT folder to ship: per model and batch size, the fastest within the budget,
    its spread and runner-up, a tie when they are within noise, and three lines that load it."""
    from yolo_optimize.evaluation.reporting.recommend import describe, recommendations
    from yolo_optimize.evaluation.reporting.report import load_report

    options = record_of(RecommendOptions, _given(given), "command line")
    found = recommendations(load_report(report_dir), options, str(report_dir))
    if as_json:
        click.echo(json.dumps([asdict(r) for r in found], indent=2))
    else:
        click.echo("\n\n".join(describe(r) for r in found))
    if not any(r.choice for r in found):
        sys.exit(1)


@main.command()
@click.argument("report_dir", metavar="REPORT", type=click.Path(path_type=Path))
@options_of(ReportOptions)
@user_errors
def report(report_dir: Path, **given: Any) -> None:
    """Write REPORT's pages again from its results.json (report.html, matrix, figures); with --compare, against
    another eval, also comparison.md and a comparison section on the page."""
    from yolo_optimize.evaluation.reporting.compare import compare, comparison_markdown
    from yolo_optimize.evaluation.reporting.report import load_report, write_report

    options = record_of(ReportOptions, _given(given), "command line")
    threshold = options.fail_on_regression
    if threshold is not None and options.compare is None:
        raise UserError("--fail-on-regression needs --compare OTHER")
    current = load_report(report_dir)
    comparison = None
    if options.compare is not None:
        comparison = compare(current, load_report(options.compare), names=(str(report_dir), str(options.compare)),
                             force=options.force)
        click.echo(comparison_markdown(comparison))
    check_writable(report_dir)
    with written_whole(report_dir, last="results.json") as staging:
        if comparison is not None:
            (staging / "comparison.md").write_text(comparison_markdown(comparison))
        written = write_report(current, staging, comparison)
    for path in written:
        console.print(f"wrote {report_dir / path.relative_to(staging)}")
    regressions = comparison.regressions(threshold) if comparison and threshold is not None else []
    if regressions:
        click.echo(f"regression: {len(regressions)} change(s) beyond the limit: " + "; ".join(
            f"{c.model} {c.artifact} b{c.batch} p50 {c.p50_change:+.1%}" for c in regressions), err=True)
        sys.exit(1)


def _measured_limits(threads: int) -> MachineLimits:
    """This machine's peaks at ``threads``, measured before anything else runs (then cached)."""
    from yolo_optimize.limits.peaks import machine_limits

    with console.status("this machine's limits (measured once per machine and tool versions, then cached)"):
        return machine_limits(threads)


def _evaluate_on_hosts(options: EvalOptions) -> None:
    """``eval --executor ray``: each selector's host measured on its own node, one progress line per host, then each
    host's matrix and what to ship where."""
    from rich.table import Table

    from yolo_optimize.cli.console import progress_bar
    from yolo_optimize.evaluation.per_host import evaluate_on_hosts
    from yolo_optimize.evaluation.reporting.hosts_report import SHIP_COLUMNS, ship_where
    from yolo_optimize.evaluation.reporting.report import rich_table
    from yolo_optimize.evaluation.session import EvalRequest, measured_anything

    if not options.on:
        raise UserError("--executor ray measures on the nodes --on names (label=value, comma list)")
    selectors, out = options.on, options.out_folder
    EvalRequest.of(replace(options, device="auto"))  # bad input refused here; the device is each node's
    with progress_bar(console) as bar:
        tasks = {selector: bar.add_task(selector, total=None) for selector in selectors}

        def progress(selector: str, text: str, done: int, total: int) -> None:
            _progress(bar, tasks[selector], f"{selector}: {text}", done, total)

        runs = evaluate_on_hosts(options, progress)
    for run in runs:
        console.print(f"{run.selector} on {run.node.describe()}: {run.folder}")
        console.print(rich_table(run.report))
    table = Table(title="What to ship where (within 1.0 point of accuracy)", title_justify="left")
    for column in SHIP_COLUMNS:
        table.add_column(column)
    for row in ship_where(runs):
        table.add_row(*["" if row.get(c) is None else str(row[c]) for c in SHIP_COLUMNS])
    console.print(table)
    console.print(f"wrote {out / 'hosts.csv'}, hosts.md, report.html and one report folder per host")
    if not all(measured_anything(run.report) for run in runs):
        click.echo("error: a host could measure no artifact", err=True)
        sys.exit(1)


def _progress(bar: Any, task: Any, text: str, done: int, total: int) -> None:
    bar.update(task, description=text, completed=done, total=total)
    _say(f"[{done}/{total}] {text}")
