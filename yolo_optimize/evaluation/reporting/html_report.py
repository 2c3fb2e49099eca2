"""report.html: one self-contained page per eval (no network: figures are embedded SVG, the sorting script is
inline) that opens on the answer (which artifact to ship) and then shows why: the speedup heatmap and matrix,
latency bands, the accuracy/throughput Pareto front, memory, the roofline and hotspots when profiled, the
environment. Every matrix cell carries the value it shows as matrix.csv holds it (``data-value``; headers name
the matrix.csv column, ``data-key``).
"""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

from yolo_optimize.evaluation.reporting.compare import Comparison, caveats
from yolo_optimize.evaluation.reporting.matrix import Column, report_warnings
from yolo_optimize.evaluation.reporting.plots import report_figures, save_figure
from yolo_optimize.evaluation.reporting.recommend import Budget, Recommendation, recommend
from yolo_optimize.evaluation.reporting.recommendation_text import memory_text
from yolo_optimize.evaluation.results import Report

# The page never scrolls sideways (checked at 1400 px in Chromium, tests/evaluation/reporting/test_html_report.py): a
# table wider than the page scrolls in its own box, the matrix's figures stay on one line and its text columns wrap,
# long paths and snippets break where they must.
STYLE = """
body{font-family:system-ui,sans-serif;margin:24px;max-width:1400px;color:#222}
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;font-size:13px;margin:8px 0}td,th{padding:3px 8px;border:1px solid #ccc}
td{overflow-wrap:anywhere}#matrix td{white-space:nowrap}#matrix td.text{white-space:normal;min-width:10em}
#matrix th{white-space:normal;min-width:4em}
th{background:#f3f3f3;cursor:pointer;white-space:nowrap}th[data-order=asc]:after{content:" \\25B2"}
th[data-order=desc]:after{content:" \\25BC"}
pre{background:#f6f8fa;padding:8px;font-size:12px;white-space:pre-wrap;overflow-wrap:anywhere}
.verdict{font-weight:600}.tie{color:#a60}.doubt,.warning{color:#b00}figure{margin:12px 0}figure img{max-width:100%}
figcaption,.note{font-size:12px;color:#555}
"""
TEXT_COLUMNS = ("executed_precision", "status", "cpu_note", "note")  # matrix columns that wrap; figures do not

SORT_SCRIPT = """
// the matrix scrolls in its box: its model and artifact columns stay in view
(function () {
  var matrix = document.getElementById("matrix"), left = 0;
  if (!matrix) { return; }
  [1, 2].forEach(function (column) {
    matrix.querySelectorAll("tr > :nth-child(" + column + ")").forEach(function (cell) {
      cell.style.position = "sticky"; cell.style.left = left + "px";
      cell.style.background = cell.tagName === "TH" ? "#f3f3f3" : "#fff"; cell.style.boxShadow = "inset -1px 0 #ccc";
    });
    left += matrix.rows[0].cells[column - 1].offsetWidth;
  });
})();
document.querySelectorAll("table.sortable th").forEach(function (header, column) {
  header.addEventListener("click", function () {
    var body = header.closest("table").tBodies[0];
    var ascending = header.dataset.order !== "asc";
    header.closest("tr").querySelectorAll("th").forEach(function (other) { delete other.dataset.order; });
    header.dataset.order = ascending ? "asc" : "desc";
    var value = function (row) {
      var cell = row.cells[column], raw = cell.dataset.value !== undefined ? cell.dataset.value : cell.textContent;
      var number = parseFloat(raw);
      return isNaN(number) ? raw : number;
    };
    Array.from(body.rows).sort(function (a, b) {
      var x = value(a), y = value(b);
      var order = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
      return ascending ? order : -order;
    }).forEach(function (row) { body.appendChild(row); });
  });
});
"""

CAPTIONS = {
    "heatmap": "Speedup over PyTorch FP32 eager at the same batch size, both in the host's fast state (legend).",
    "latency": "Latency per image against batch size: the p50 in the host's fast state (the matrix's b1 p50 ms, "
               "divided by the batch size), with a band up to the p99 over all runs (median over processes), the "
               "slow state's runs included.",
    "pareto": "Accuracy against throughput; the dashed step is the Pareto front (no artifact both faster and "
              "more accurate), its artifacts ringed.",
    "memory": "Peak resident memory of the measuring process, file size, and the weights as the runtime loaded them.",
    "roofline": "Roofline: achieved GOP/s against operational intensity, under this machine's measured peaks.",
    "layer_types": "Where the time goes: share of the runtime profiler's per-layer time in each layer type.",
}


def html_page(report: Report, columns: list[Column], figures: dict[str, Path], recommendations: list[Recommendation],
              comparison: Comparison | None, legend: str) -> str:
    """The page: the matrix in ``columns`` (matrix.matrix_columns); ``figures`` holds the SVG file per name."""
    env = report.environment
    parts = [f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>yolo-optimize report</title>"
             f"<style>{STYLE}</style></head><body>",
             f"<h1>yolo-optimize report</h1><p class='note'>{_e(env['cpu'])}, {env['threads']} threads, "
             f"{_e(env['date'])}; every number is in results.json beside this page.</p>",
             *[f"<p class='warning'>{_e(warning)}</p>" for warning in report_warnings(report)],
             _recommendation_section(recommendations)]
    if comparison:
        parts.append(_comparison_section(comparison))
    parts += [_figure("heatmap", figures), "<h2 id='matrix-title'>Speedup matrix</h2>",
              _matrix_table(report, columns), f"<p class='note'>{_e(legend)}</p>"]
    parts += [_figure(name, figures) for name in ("latency", "pareto", "memory", "roofline", "layer_types")]
    parts += [_hotspots_section(report), _environment_section(report), f"<script>{SORT_SCRIPT}</script></body></html>"]
    return "".join(part for part in parts if part)


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _recommendation_section(recommendations: list[Recommendation]) -> str:
    blocks = ["<h2 id='recommendation'>What to ship</h2>"]
    for rec in recommendations:
        blocks.append(f"<p class='verdict{' tie' if rec.tie else ''}'>{_e(rec.model)} at batch {rec.batch}: "
                      f"{_e(rec.verdict)}</p>")
        if rec.doubt:
            blocks.append(f"<p class='doubt'>{_e(rec.doubt)}</p>")
        picked = [(label, c) for label, c in (("ship", rec.choice), ("runner-up", rec.runner_up)) if c]
        if picked:
            head = ["", "artifact", "file", "runs in", "img/s", "rounds", "p50 ms", "p99 ms", "peak memory",
                    "accuracy"]
            rows = [[label, c.artifact, c.path, c.runs_in, c.throughput_ips,
                     f"{c.throughput_range[0]:g}-{c.throughput_range[1]:g}", c.p50_ms, c.p99_ms, memory_text(c),
                     c.accuracy] for label, c in picked]
            blocks.append(_table(head, rows, sortable=False))
        if rec.choice:
            blocks.append(f"<pre>{_e(rec.choice.snippet)}</pre>")
        if rec.excluded:
            blocks.append("<p class='note'>Not eligible: " + "; ".join(
                f"{_e(artifact)}: {_e(why)}" for artifact, why in rec.excluded.items()) + "</p>")
    return "".join(blocks)


def _comparison_section(comparison: Comparison) -> str:
    head = ["model", "artifact", "batch", "img/s old", "img/s new", "throughput", "p50", "p50 95% interval", "p99",
            "memory MB", "accuracy (points)", "verdict"]
    rows = [[c.model, c.artifact, c.batch, c.old_ips, c.new_ips, f"{c.throughput_change:+.1%}",
             f"{c.p50_change:+.1%}", f"{c.p50_interval[0]:+.1%} .. {c.p50_interval[1]:+.1%}", f"{c.p99_change:+.1%}",
             f"{c.memory_change_mb:+g}", "n/a" if c.accuracy_change is None else f"{c.accuracy_change:+.2f}",
             c.verdict] for c in comparison.changes]
    notes = " ".join(caveats(comparison))
    return (f"<h2 id='comparison'>Against {_e(comparison.old)}</h2><p class='note'>{_e(notes)}</p>"
            + _table(head, rows))


def _matrix_table(report: Report, columns: list[Column]) -> str:
    head = "".join(f"<th data-key='{_e(column.key)}'>{_e(column.header)}</th>" for column in columns)
    body = "".join("<tr>" + "".join(f"<td{_text_class(column)} data-value='{_e(column.raw(line))}'>"
                                    f"{_e(column.text(line))}</td>" for column in columns) + "</tr>"
                   for line in report.matrix)
    return (f"<div class='scroll'><table id='matrix' class='sortable'><thead><tr>{head}</tr></thead><tbody>{body}"
            f"</tbody></table></div>")


def _text_class(column: Column) -> str:
    return " class='text'" if column.key in TEXT_COLUMNS else ""


def _figure(name: str, figures: dict[str, Path]) -> str:
    if name not in figures:
        return ""
    data = base64.b64encode(figures[name].read_bytes()).decode()
    return (f"<figure id='{name}'><img alt='{_e(CAPTIONS[name])}' src='data:image/svg+xml;base64,{data}'>"
            f"<figcaption>{_e(CAPTIONS[name])} ({figures[name].name} and .png beside this page)</figcaption></figure>")


def _hotspots_section(report: Report) -> str:
    profiled = [row for row in report.rows if row.profile and row.profile.get("hotspots")]
    if not profiled:
        return ""
    head = ["model", "artifact", "layer", "type", "ms", "share", "of its peak", "runs in", "kernel"]
    rows = []
    for row in profiled:
        profile: dict[str, Any] = row.profile or {}
        rates = {rate["name"]: rate["utilization"] for rate in profile.get("convolutions", [])}
        rows += [[row.model, row.name, h["name"], h["kind"], h["ms"], f"{h['share']:.1%}",
                  f"{rates[h['name']]:.0%}" if rates.get(h["name"]) is not None else "", h["executed"], h["kernel"]]
                 for h in profile["hotspots"]]
    return ("<h2 id='hotspots'>Hotspots (batch 1, the runtime's own profiler)</h2>" + _table(head, rows)
            + "<p class='note'>Per artifact: profiles/&lt;model&gt;/&lt;artifact&gt;/profile.md, with its trace.json "
              "for chrome://tracing or ui.perfetto.dev.</p>")


def _environment_section(report: Report) -> str:
    env = report.environment
    facts = [["CPU", env["cpu"]], ["ISA", ", ".join(env["cpu_facts"]["isa"]) or "no AVX2"],
             ["VNNI", env["cpu_facts"]["vnni"]], ["native bf16", env["cpu_facts"]["native_bf16"]],
             ["cores", env["cores"]], ["threads", env["threads"]], ["OS", env["os"]], ["Python", env["python"]],
             ["date", env["date"]], *[[name, found] for name, found in env["packages"].items()]]
    if report.machine_limits:
        facts += [[f"peak {p['runtime']} {p['operation']} {p['precision']}",
                   f"{p['gops']} GOP/s (runs in {p['executed']})"]
                  for p in report.machine_limits["peaks"] if p["gops"]]
        facts.append(["memory bandwidth", f"{report.machine_limits['bandwidth_gb_s']:.1f} GB/s (triad)"])
    return "<h2 id='environment'>Environment</h2>" + _table(["", "value"], facts, sortable=False)


def _table(head: list[str], rows: list[list[Any]], *, sortable: bool = True) -> str:
    header = "".join(f"<th>{_e(name)}</th>" for name in head)
    body = "".join("<tr>" + "".join(f"<td>{_e(value)}</td>" for value in row) + "</tr>" for row in rows)
    return (f"<div class='scroll'><table{' class=sortable' if sortable else ''}><thead><tr>{header}</tr></thead>"
            f"<tbody>{body}</tbody></table></div>")


def write_page(report: Report, out: Path, columns: list[Column], legend: str,
               comparison: Comparison | None) -> list[Path]:
    """The figures (SVG and PNG) and report.html in ``out``, recommending with the default budget."""
    figures: dict[str, Path] = {}
    files: list[Path] = []
    for name, figure in report_figures(report).items():
        saved = save_figure(figure, out, name)
        figures[name], files = saved[0], files + saved
    recommendations = [r for batch in report.settings.batch_sizes for r in recommend(report, Budget(batch))]
    page = out / "report.html"
    page.write_text(html_page(report, columns, figures, recommendations, comparison, legend))
    return [*files, page]
