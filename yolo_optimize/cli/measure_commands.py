"""The commands that measure: ``optimize eval`` (every artifact of a folder, here or once per host kind on a Ray
cluster, then the matrix and what to ship), ``optimize profile`` (one artifact explained) and ``optimize info``
(this machine's peak rates), with their progress and exit codes."""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from yolo_optimize.artifact import check_writable, written_whole
from yolo_optimize.cli.click_options import given_only, json_flag, options_of
from yolo_optimize.cli.console import console, progress_bar, say
from yolo_optimize.cli.exit_codes import stop_interrupted, user_errors
from yolo_optimize.declaring import RAY, record_of
from yolo_optimize.errors import UserError
from yolo_optimize.evaluation.measuring.options import ProfileOptions
from yolo_optimize.evaluation.options import COMMAND_OUT, EvalOptions, eval_options
from yolo_optimize.host.cpu import usable_cpus
from yolo_optimize.limits.options import InfoOptions

if TYPE_CHECKING:
    from yolo_optimize.limits.peaks import MachineLimits


@click.command(name="eval")
@click.argument("directory", required=False, type=click.Path(path_type=Path))
@click.option("--config", "config_file", type=click.Path(path_type=Path),
              help="A TOML file of these options (keys as named here: batch-sizes = [1, 8], directory = \"...\"); "
                   "options given on the command line override it.")
@options_of(EvalOptions)
@user_errors
def evaluate_command(directory: Path | None, config_file: Path | None, **given: Any) -> None:
    """Measure every artifact under DIRECTORY (and any --add model file) and write the speedup matrix."""
    from yolo_optimize.evaluation.reporting.matrix import report_warnings
    from yolo_optimize.evaluation.reporting.recommend import Budget, recommend
    from yolo_optimize.evaluation.reporting.recommendation_text import brief
    from yolo_optimize.evaluation.reporting.report import rich_table
    from yolo_optimize.evaluation.session import EvalRequest, measured_anything, report_folder, run_evaluation

    options = eval_options(config_file, given_only({**given, "root": directory}), "command line")
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
        stop_interrupted("interrupted: nothing was written")
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


def _evaluate_on_hosts(options: EvalOptions) -> None:
    """``eval --executor ray``: each selector's host measured on its own node, one progress line per host, then each
    host's matrix and what to ship where."""
    from rich.table import Table

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
    say(f"[{done}/{total}] {text}")


@click.command()
@options_of(InfoOptions)
@json_flag("limits")
@user_errors
def info(as_json: bool, **given: Any) -> None:
    """This machine: CPU, ISA, runtimes and their measured peak GEMM/convolution rates and memory bandwidth (cached)."""
    from yolo_optimize.limits.display import limits_tables
    from yolo_optimize.limits.peaks import machine_limits

    options = record_of(InfoOptions, given_only(given), "command line")
    with console.status("measuring this machine's limits (about a minute, once per machine and tool versions)"):
        limits = machine_limits(options.threads or usable_cpus(), refresh=options.refresh, rounds=options.rounds)
    if as_json:
        click.echo(json.dumps(asdict(limits), indent=2))
        return
    for table in limits_tables(limits):
        console.print(table)


@click.command()
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

    options = record_of(ProfileOptions, given_only(given), "command line")
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


def _measured_limits(threads: int) -> MachineLimits:
    """This machine's peaks at ``threads``, measured before anything else runs (then cached)."""
    from yolo_optimize.limits.peaks import machine_limits

    with console.status("this machine's limits (measured once per machine and tool versions, then cached)"):
        return machine_limits(threads)
