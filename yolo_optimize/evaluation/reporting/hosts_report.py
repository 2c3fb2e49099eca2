"""The hosts side by side (``optimize eval --executor ray --on ...``): hosts.csv, hosts.md and a report.html that
put what to ship where (``recommend``'s pick per host) beside every artifact's figures on every host, and link each
host's own report. A speedup is over the same host's own baseline; ratios between hosts are labelled as not
interleaved (the hosts were measured at the same time, not turn by turn)."""

from __future__ import annotations

import csv
import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yolo_optimize.artifact import written_whole
from yolo_optimize.cluster.nodes import ClusterNode
from yolo_optimize.evaluation.reporting.recommend import Budget, Recommendation, recommend
from yolo_optimize.evaluation.results import Report


@dataclass
class HostRun:
    """One host's evaluation: where and when it ran, and its report (also in ``folder``)."""

    selector: str
    node: ClusterNode
    folder: Path
    report: Report
    started: float  # time.time() on the node
    finished: float


SHIP_COLUMNS = ("host", "node", "model", "batch", "ship", "img/s", "speedup", "accuracy", "note")


def ship_where(runs: list[HostRun]) -> list[dict[str, Any]]:
    """What to ship where: per host, model and batch size, ``recommend``'s pick (its defaults: within 1 point of
    accuracy, ranked on inference) with its figures, or why there is none."""
    table = []
    for run in runs:
        for batch in run.report.settings.batch_sizes:
            for pick in recommend(run.report, Budget(batch)):
                table.append(_ship_row(run, pick))
    return table


def _ship_row(run: HostRun, pick: Recommendation) -> dict[str, Any]:
    choice, other = pick.choice, pick.runner_up
    row = {"host": run.selector, "node": run.node.hostname, "model": pick.model, "batch": pick.batch}
    if choice is None:
        return {**row, "ship": "none", "note": pick.verdict}
    note = f"tied within noise with {other.artifact}" if pick.tie and other else ""
    return {**row, "ship": choice.artifact, "img/s": choice.throughput_ips, "speedup": choice.speedup,
            "accuracy": choice.accuracy, "note": note}


def host_rows(runs: list[HostRun]) -> list[dict[str, Any]]:
    """Per model, artifact and batch size: each host's img/s and speedup over its own baseline, and the other hosts'
    img/s over the first one's (not interleaved)."""
    cells: dict[tuple[str, str, int], dict[str, Any]] = {}
    for run in runs:
        for line in run.report.matrix:
            for batch in run.report.settings.batch_sizes:
                row = cells.setdefault((line.model, line.artifact, batch),
                                       {"model": line.model, "artifact": line.artifact, "batch": batch})
                row[f"{run.selector} img/s"] = line.at(batch).throughput_ips
                row[f"{run.selector} speedup"] = line.at(batch).speedup_or_error()
    first = runs[0].selector
    for row in cells.values():
        for run in runs[1:]:
            mine, theirs = row.get(f"{run.selector} img/s"), row.get(f"{first} img/s")
            row[f"{run.selector} / {first} img/s (not interleaved)"] = round(mine / theirs, 3) if mine and theirs \
                else None
    return list(cells.values())


def write_hosts(runs: list[HostRun], out: Path) -> list[Path]:
    """hosts.csv, hosts.md and report.html (the hosts side by side, linking each host's own report) in ``out``, the
    three or none (``written_whole``)."""
    rows = host_rows(runs)
    columns = list(dict.fromkeys(key for row in rows for key in row))
    names = ("hosts.csv", "hosts.md", "report.html")
    with written_whole(out) as staging:
        with open(staging / names[0], "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=columns)
            writer.writeheader()
            writer.writerows(rows)
        (staging / names[1]).write_text(hosts_markdown(runs, rows, columns))
        (staging / names[2]).write_text(hosts_page(runs, rows, columns))
    return [out / name for name in names]


def hosts_markdown(runs: list[HostRun], rows: list[dict[str, Any]], columns: list[str]) -> str:
    lines = ["# What to ship where", "", *_markdown_table(ship_where(runs), list(SHIP_COLUMNS)), "",
             "# Every artifact on every host", "",
             "Speedups are over each host's own PyTorch baseline; ratios between hosts were not interleaved.", "",
             *_markdown_table(rows, columns)]
    lines += ["", "Each host's report: " + ", ".join(f"{run.selector}: {run.folder.name}/report.html" for run in runs)]
    return "\n".join(lines) + "\n"


def _markdown_table(rows: list[dict[str, Any]], columns: list[str]) -> list[str]:
    return ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns),
            *["| " + " | ".join(_cell(row.get(c)) for c in columns) + " |" for row in rows]]


def _html_table(rows: list[dict[str, Any]], columns: list[str], table_id: str) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(row.get(c)))}</td>" for c in columns) + "</tr>"
                   for row in rows)
    return f"<table id='{table_id}'><tr>{head}</tr>{body}</table>"


def hosts_page(runs: list[HostRun], rows: list[dict[str, Any]], columns: list[str]) -> str:
    """One self-contained page: what to ship where, the hosts side by side, links to each host's own report."""
    hosts = "".join(f"<li><a href='{html.escape(run.folder.name)}/report.html'>{html.escape(run.selector)}</a>: "
                    f"{html.escape(run.node.describe())}, {html.escape(str(run.report.environment.get('cpu')))}</li>"
                    for run in runs)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>yolo-optimize: hosts</title>"
            f"<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}"
            f"td,th{{border:1px solid #ccc;padding:2px 6px;text-align:right}}</style></head><body>"
            f"<h1>What to ship where</h1>{_html_table(ship_where(runs), list(SHIP_COLUMNS), 'ship-where')}"
            f"<h2>Hosts</h2><ul id='hosts'>{hosts}</ul>"
            f"<h2>Every artifact on every host</h2><p>Speedups are over each host's own PyTorch baseline; ratios "
            f"between hosts were not interleaved.</p>{_html_table(rows, columns, 'hosts-matrix')}</body></html>\n")


def _cell(value: Any) -> str:
    return "" if value is None else str(value)
