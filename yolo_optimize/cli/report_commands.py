"""The commands that read an eval's results.json again without measuring: ``optimize recommend`` (what to ship,
exit 1 when nothing fits) and ``optimize report`` (the pages rewritten, optionally against another eval, exit 1 on
a regression beyond the limit)."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from yolo_optimize.artifact import check_writable, written_whole
from yolo_optimize.cli.click_options import given_only, json_flag, options_of
from yolo_optimize.cli.console import console
from yolo_optimize.cli.exit_codes import user_errors
from yolo_optimize.declaring import record_of
from yolo_optimize.errors import UserError
from yolo_optimize.evaluation.reporting.options import RecommendOptions, ReportOptions


@click.command()
@click.argument("report_dir", metavar="REPORT", type=click.Path(path_type=Path))
@options_of(RecommendOptions)
@json_flag("recommendations")
@user_errors
def recommend(report_dir: Path, as_json: bool, **given: Any) -> None:
    """Which artifact of an eval REPORT folder to ship: per model and batch size, the fastest within the budget,
    its spread and runner-up, a tie when they are within noise, and three lines that load it."""
    from yolo_optimize.evaluation.reporting.recommend import recommendations
    from yolo_optimize.evaluation.reporting.recommendation_text import describe
    from yolo_optimize.evaluation.reporting.report import load_report

    options = record_of(RecommendOptions, given_only(given), "command line")
    found = recommendations(load_report(report_dir), options, str(report_dir))
    if as_json:
        click.echo(json.dumps([asdict(r) for r in found], indent=2))
    else:
        click.echo("\n\n".join(describe(r) for r in found))
    if not any(r.choice for r in found):
        sys.exit(1)


@click.command()
@click.argument("report_dir", metavar="REPORT", type=click.Path(path_type=Path))
@options_of(ReportOptions)
@user_errors
def report(report_dir: Path, **given: Any) -> None:
    """Write REPORT's pages again from its results.json (report.html, matrix, figures); with --compare, against
    another eval, also comparison.md and a comparison section on the page."""
    from yolo_optimize.evaluation.reporting.compare import compare, comparison_markdown
    from yolo_optimize.evaluation.reporting.report import load_report, write_report

    options = record_of(ReportOptions, given_only(given), "command line")
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
