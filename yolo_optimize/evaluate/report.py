"""The speedup matrix and its files: results.json, matrix.csv, matrix.md, matrix.html."""

from __future__ import annotations

import csv
import html
import json
import os
import platform
import statistics
from dataclasses import asdict
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from rich.table import Table

from yolo_optimize.cpu import cpu_facts, cpu_model
from yolo_optimize.evaluate.discover import BASELINE_TARGET
from yolo_optimize.evaluate.results import SCHEMA_VERSION, Report, Row

UNSTABLE_SPREAD = 0.15  # repeats of one row disagreeing by more than this are flagged
PACKAGES = ("yolo-optimize", "torch", "onnxruntime", "openvino", "onnx", "yolov5", "numpy", "faster-coco-eval")


def build_report(rows: list[Row], settings: dict[str, Any]) -> Report:
    baselines = {r.model: r for r in rows if r.target == BASELINE_TARGET}
    matrix = [matrix_row(r, baselines.get(r.model), settings["batch_sizes"]) for r in rows]
    return Report(SCHEMA_VERSION, environment(settings["threads"]), settings, rows, matrix)


def matrix_row(row: Row, baseline: Row | None, batch_sizes: list[int]) -> dict[str, Any]:
    """One line of the matrix: per-batch speedups from the fastest processes, medians beside them.

    Speedup = the row's fastest process over the baseline's fastest process (both measured
    ``repeats`` times), so it equals the ratio of the throughputs (and of the b1 latencies)
    the matrix shows; the ratio of the medians is kept as ``speedup_b<N>_median``.
    """
    cells: dict[str, Any] = {"model": row.model, "artifact": row.name, "precision": row.precision}
    if row.error or not row.measurements:
        return {**cells, "status": f"failed: {row.error or 'not measured'}"}
    for batch in batch_sizes:
        mine, base = _throughputs(row, batch), _throughputs(baseline, batch) if baseline else []
        if not mine:
            cells[f"speedup_b{batch}"] = _batch_error(row, batch)
            continue
        cells[f"throughput_b{batch}_ips"] = round(max(mine), 2)
        cells[f"throughput_b{batch}_median_ips"] = round(statistics.median(mine), 2)
        cells[f"speedup_b{batch}"] = round(max(mine) / max(base), 3) if base else None
        cells[f"speedup_b{batch}_median"] = round(statistics.median(mine) / statistics.median(base), 3) if base else None
    fastest_b1 = max(row.measurements, key=lambda m: m.throughput(1) or 0.0)
    b1 = next((b for b in fastest_b1.batches if b.batch == 1 and b.latency), None)
    accuracy, base_accuracy = row.accuracy, baseline.accuracy if baseline else None
    delta = (accuracy.map50_95 - base_accuracy.map50_95
             if accuracy and base_accuracy and accuracy.map50_95 is not None and base_accuracy.map50_95 is not None
             else None)
    return {
        **cells,
        "executed_precision": row.measurements[0].executed_precision,
        "latency_b1_p50_ms": b1.latency.p50_ms if b1 and b1.latency else None,
        "peak_rss_mb": round(statistics.median(m.peak_rss_mb for m in row.measurements), 1),
        "file_mb": row.file_mb,
        "map50_95": accuracy.map50_95 if accuracy else None,
        "map50": accuracy.map50 if accuracy else None,
        "map50_95_delta": round(delta, 4) if delta is not None else None,
        "accuracy_note": accuracy.note if accuracy else "not measured",
        "cpu_note": row.cpu_note,
        "repeats": len(row.measurements),
        "unstable": _unstable(row, batch_sizes),
        "status": "ok",
    }


def _throughputs(row: Row, batch: int) -> list[float]:
    return [t for m in row.measurements if (t := m.throughput(batch))]


def _batch_error(row: Row, batch: int) -> str:
    errors = [b.error for m in row.measurements for b in m.batches if b.batch == batch and b.error]
    return errors[0] if errors else "n/a"


def _unstable(row: Row, batch_sizes: list[int]) -> bool:
    """The row's processes disagree by more than UNSTABLE_SPREAD at some batch size (a slow-mode process)."""
    return any(len(values) > 1 and max(values) / min(values) - 1 > UNSTABLE_SPREAD
               for values in (_throughputs(row, batch) for batch in batch_sizes))


def environment(threads: int) -> dict[str, Any]:
    return {
        "cpu": cpu_model(), "cpu_facts": cpu_facts(), "cores": os.cpu_count(), "threads": threads, "os": platform.platform(),
        "python": platform.python_version(), "packages": {p: _version(p) for p in PACKAGES},
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "absent"


def write_report(report: Report, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    columns = matrix_columns(report.settings["batch_sizes"])
    files = [out / "results.json", out / "matrix.csv", out / "matrix.md", out / "matrix.html"]
    files[0].write_text(json.dumps(asdict(report), indent=2) + "\n")
    with open(files[1], "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=[c for c, _ in columns], extrasaction="ignore")
        writer.writeheader()
        writer.writerows({c: _plain(line.get(c)) for c, _ in columns} for line in report.matrix)
    files[2].write_text(markdown(report, columns))
    files[3].write_text(html_page(report, columns))
    return files


def matrix_columns(batch_sizes: list[int]) -> list[tuple[str, str]]:
    """(key, header) of the matrix, in display order."""
    speed = [(f"speedup_b{b}", f"b{b} speedup") for b in batch_sizes]
    return [("model", "model"), ("artifact", "artifact"), ("executed_precision", "runs in"), *speed,
            ("latency_b1_p50_ms", "b1 p50 ms"), ("peak_rss_mb", "peak MB"), ("file_mb", "file MB"),
            ("map50_95", "mAP50-95"), ("map50_95_delta", "ΔmAP"), ("status", "status"), ("cpu_note", "CPU note")]


def cell(line: dict[str, Any], key: str) -> str:
    value = line.get(key)
    if key.startswith("speedup_b") and isinstance(value, float):
        median = line.get(f"{key}_median") or value
        text = f"{value:.2f}x" + (f" (median {median:.2f}x)" if abs(median - value) >= 0.05 * value else "")
        return text + (" !" if line.get("unstable") else "")
    if key == "map50_95" and value is None:
        return line.get("accuracy_note", "")
    if key == "map50_95_delta" and isinstance(value, float):
        return f"{value:+.4f}"
    return "" if value is None else str(value)


def _plain(value: Any) -> Any:
    return json.dumps(value) if isinstance(value, list) else value


def markdown(report: Report, columns: list[tuple[str, str]]) -> str:
    lines = ["| " + " | ".join(h for _, h in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(line, k) for k, _ in columns) + " |" for line in report.matrix]
    return "\n".join([*lines, "", _legend(report), ""])


def html_page(report: Report, columns: list[tuple[str, str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for _, h in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(cell(line, k))}</td>" for k, _ in columns) + "</tr>"
                   for line in report.matrix)
    return (f"<!doctype html><meta charset='utf-8'><title>yolo-optimize speedup matrix</title>"
            f"<style>td,th{{padding:4px 8px;border:1px solid #ccc}}table{{border-collapse:collapse}}</style>"
            f"<table><tr>{head}</tr>{body}</table><p>{html.escape(_legend(report))}</p>")


def _legend(report: Report) -> str:
    env = report.environment
    return (f"Speedup = throughput over PyTorch FP32 eager at the same batch size, each row's fastest of "
            f"{report.settings['repeats']} processes over the baseline's fastest (processes on this kind of host "
            f"run in a fast or a slower mode; the median is shown where it differs by 5% or more; ! = a row's "
            f"processes differ by more than {UNSTABLE_SPREAD:.0%}). 'runs in' is the precision the runtime "
            f"reported computing in. {env['cpu']} ({', '.join(env['cpu_facts']['isa']) or 'no AVX2'}), "
            f"{env['threads']} threads, {env['date']}.")


def rich_table(report: Report) -> Table:
    columns = matrix_columns(report.settings["batch_sizes"])
    table = Table(title="speedup matrix", title_justify="left")
    for _, header in columns:
        table.add_column(header, overflow="fold")
    for line in report.matrix:
        table.add_row(*(cell(line, k) for k, _ in columns))
    return table
