"""The speedup matrix and its files: results.json, matrix.csv, matrix.md, matrix.html."""

from __future__ import annotations

import csv
import json
import os
import platform
from dataclasses import asdict
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from rich.table import Table

from yolo_optimize.cpu import cpu_facts, cpu_model, usable_cpus
from yolo_optimize.errors import UserError
from yolo_optimize.evaluate.compare import Comparison
from yolo_optimize.evaluate.discover import BASELINE_TARGET
from yolo_optimize.evaluate.html_report import write_page
from yolo_optimize.evaluate.results import (
    BLOCK_S,
    END_TO_END,
    FAST_STATE_SPAN,
    REFERENCE_QUANTILE,
    SCHEMA_VERSION,
    Report,
    Row,
    from_json,
    read_results,
)
from yolo_optimize.evaluate.roofline import roofline_cells
from yolo_optimize.formats import formats
from yolo_optimize.machine.peaks import MachineLimits
from yolo_optimize.processes import allocator_settings
from yolo_optimize.runtime.runners.cuda_phases import PHASES

UNSTABLE_SPREAD = 0.15  # repeats of one row disagreeing by more than this are flagged
UNSTABLE_LEGEND = (f"! = the row's processes differ by more than {UNSTABLE_SPREAD:.0%} (the host slowed some of "
                   "them); its speedup is from the runs in the host's fast state (matrix.md: how many were kept)")
PACKAGES = ("yolo-optimize", "torch", "onnxruntime", "openvino", "onnx", "yolov5", "yolov7-package", "ultralytics",
            "torchvision", "numpy", "faster-coco-eval")


def build_report(rows: list[Row], settings: dict[str, Any], limits: MachineLimits | None = None) -> Report:
    """The matrix of every row; with this machine's measured ``limits``, each CPU row's utilization too."""
    return Report(SCHEMA_VERSION, environment(settings["threads"]), settings, rows, matrix_of(rows, settings, limits),
                  asdict(limits) if limits else None)


def matrix_of(rows: list[Row], settings: dict[str, Any], limits: MachineLimits | None) -> list[dict[str, Any]]:
    baselines = {r.model: r for r in rows if r.target == BASELINE_TARGET}
    matrix = [matrix_row(r, baselines.get(r.model), settings["batch_sizes"]) for r in rows]
    cpu_limits = limits if settings["device"] == "cpu" else None  # CPU peaks say nothing of a GPU row
    for row, line in zip(rows, matrix):
        if line["status"] == "ok":
            line.update(roofline_cells(row, line, settings["batch_sizes"], cpu_limits))
    return matrix


def load_report(folder: Path) -> Report:
    """An eval's results.json (``folder`` or the file itself) as the typed report it was written from, every field
    checked (``results.from_json``: one line naming a missing or mistyped field), the matrix computed again from its
    rows so that every line shown is one this version wrote."""
    from yolo_optimize.evaluate.evaluator import EvalSettings

    data = read_results(folder)
    try:
        report = from_json(Report, {**data, "matrix": []}, "results")
        settings = from_json(EvalSettings, report.settings, "results.settings")
        if any(size < 1 for size in settings.batch_sizes) or not settings.batch_sizes:
            raise UserError(f"results.settings.batch_sizes: expected positive batch sizes, got {settings.batch_sizes}")
        limits = from_json(MachineLimits | None, report.machine_limits, "results.machine_limits")
    except UserError as err:
        raise UserError(f"{folder / 'results.json' if folder.is_dir() else folder}: {err}") from None
    report.matrix = matrix_of(report.rows, report.settings, limits)
    return report


def execution_cells(row: Row, batch: int) -> dict[str, Any]:
    """How the row ran at ``batch`` (its configuration's label) and, where measured, the pipelined end-to-end path in
    the host's fast state: images/s and its share of the inference-only rate."""
    execution = row.execution(batch)
    cells: dict[str, Any] = {f"mode_b{batch}": execution["label"] if execution else None}
    path, inference = row.fast_state(batch, END_TO_END), row.fast_state(batch)
    if path and inference:
        cells[f"end_to_end_b{batch}_ips"] = path.throughput_ips
        cells[f"end_to_end_b{batch}_share"] = round(path.throughput_ips / inference.throughput_ips, 3)
    return cells


def matrix_row(row: Row, baseline: Row | None, batch_sizes: list[int]) -> dict[str, Any]:
    """One line of the matrix: per-batch speedups in the host's fast state and the row's other figures.

    Speedup = the row's throughput over the baseline's, each from the median of its runs in the
    host's fast state over all its processes (``Row.fast_state``; ``fast_runs_b<N>``: runs kept of
    all); throughput and latency columns are the same figures, so a speedup is exactly their
    ratio. ``speedup_b<N>_range`` is the spread of the per-round ratios over all runs (a round is
    one process of the row and one of the baseline), slow state included, to show how much a
    single process pair could be off.
    """
    cells: dict[str, Any] = {"model": row.model, "artifact": row.name, "precision": row.precision, "task": row.task,
                             "note": _note(row)}
    if row.skipped:
        return {**cells, "status": f"skipped: {row.skipped}"}
    if row.error or not row.measurements:
        return {**cells, "status": f"failed: {row.error or 'not measured'}"}
    for batch in batch_sizes:
        mine = row.fast_state(batch)
        if mine is None:
            cells[f"speedup_b{batch}"] = _batch_error(row, batch)
            continue
        theirs = baseline.fast_state(batch) if baseline else None
        ratios = row.round_ratios(baseline, batch) if baseline else []
        cells[f"throughput_b{batch}_ips"] = mine.throughput_ips
        cells.update(execution_cells(row, batch))
        cells[f"fast_runs_b{batch}"] = [mine.runs_kept, mine.runs]
        cells[f"speedup_b{batch}"] = round(mine.throughput_ips / theirs.throughput_ips, 3) if theirs else None
        cells[f"speedup_b{batch}_range"] = [round(min(ratios), 3), round(max(ratios), 3)] if ratios else None
        if split := row.median_phases(batch):
            cells[f"gpu_b{batch}_ms"] = split
    fast_b1 = row.fast_state(1)
    accuracy, base_accuracy = row.accuracy, baseline.accuracy if baseline else None
    delta = (accuracy.map50_95 - base_accuracy.map50_95
             if accuracy and base_accuracy and accuracy.map50_95 is not None and base_accuracy.map50_95 is not None
             else None)
    return {
        **cells,
        "executed_precision": row.measurements[0].executed_precision,
        "latency_b1_p50_ms": fast_b1.latency.p50_ms if fast_b1 else None,
        "peak_rss_mb": round(row.median_memory_mb(), 1),
        "file_mb": row.file_mb,
        "weights_mb": round(row.measurements[0].weight_bytes / 2**20, 3) if row.measurements[0].weight_bytes else None,
        "map50_95": accuracy.map50_95 if accuracy else None,
        "map50": accuracy.map50 if accuracy else None,
        "map50_95_delta": round(delta, 4) if delta is not None else None,
        "top1_agreement": accuracy.top1_agreement if accuracy else None,
        "top1": accuracy.top1 if accuracy else None,
        "accuracy_note": accuracy.note if accuracy else "not measured",
        "cpu_note": row.cpu_note,
        "repeats": len(row.measurements),
        "unstable": _unstable(row, batch_sizes),
        "status": "ok",
    }


def _note(row: Row) -> str:
    """What to know before trusting the row: an experimental format, a model file this tool did not build."""
    row_format = formats().get(row.target)
    notes = [row_format.experimental] if row_format and row_format.experimental else []
    if row.external:
        notes.append(f"external: {row.external['path']} (sha256 {row.external['sha256'][:12]}...)")
    return "; ".join(notes)


def _batch_error(row: Row, batch: int) -> str:
    errors = [b.error for m in row.measurements for b in m.batches if b.batch == batch and b.error]
    return errors[0] if errors else "n/a"


def _unstable(row: Row, batch_sizes: list[int]) -> bool:
    """The row's processes disagree by more than UNSTABLE_SPREAD at some batch size (a slow-mode process)."""
    return any(len(values) > 1 and max(values) / min(values) - 1 > UNSTABLE_SPREAD
               for values in (list(row.round_throughputs(batch).values()) for batch in batch_sizes))


def environment(threads: int) -> dict[str, Any]:
    return {
        "cpu": cpu_model(), "cpu_facts": cpu_facts(), "cores": os.cpu_count(), "usable_cpus": usable_cpus(),
        "threads": threads, "os": platform.platform(),
        "python": platform.python_version(), "packages": {p: _version(p) for p in PACKAGES},
        "allocator": allocator_settings(),  # the measurement processes' malloc
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "absent"


def write_report(report: Report, out: Path, comparison: Comparison | None = None) -> list[Path]:
    """results.json, the matrix as CSV and Markdown, and report.html with its figures (SVG and PNG) beside it."""
    out.mkdir(parents=True, exist_ok=True)
    columns = matrix_columns(report)
    files = [out / "results.json", out / "matrix.csv", out / "matrix.md"]
    files[0].write_text(json.dumps(asdict(report), indent=2) + "\n")
    with open(files[1], "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=[c for c, _ in columns], extrasaction="ignore")
        writer.writeheader()
        writer.writerows({c: _plain(line.get(c)) for c, _ in columns} for line in report.matrix)
    files[2].write_text(markdown(report, columns))
    cells = {key: [cell(line, key) for line in report.matrix] for key, _ in columns}
    return files + write_page(report, out, columns, cells, _legend(report), comparison)


ACCURACY_COLUMNS = {  # per task: (key, header) of its accuracy columns; the first shows the row's note when empty
    "detect": [("map50_95", "mAP50-95"), ("map50_95_delta", "ΔmAP")],
    "classify": [("top1_agreement", "top-1 agr."), ("top1", "top-1")],
}


def matrix_columns(report: Report) -> list[tuple[str, str]]:
    """(key, header) of the matrix, in display order; accuracy columns for the tasks of the rows present."""
    speed = [(f"speedup_b{b}", f"b{b} speedup") for b in report.settings["batch_sizes"]]
    rates = [column for b in report.settings["batch_sizes"] for column in (
        (f"mode_b{b}", f"b{b} mode"), (f"throughput_b{b}_ips", f"b{b} img/s"),
        (f"end_to_end_b{b}_ips", f"b{b} e2e img/s"))
        if any(column[0] in line for line in report.matrix)]
    kept = [(f"fast_runs_b{b}", f"b{b} fast runs") for b in report.settings["batch_sizes"]]
    tasks = {line.get("task") for line in report.matrix}
    accuracy = [column for task, columns in ACCURACY_COLUMNS.items() if task in tasks for column in columns]
    explained = ([(f"utilization_b{b}", f"b{b} util.") for b in report.settings["batch_sizes"]]
                 if report.machine_limits else [])
    explained += [(f"gpu_b{b}_ms", f"b{b} GPU ms in/compute/out") for b in report.settings["batch_sizes"]
                  if any(f"gpu_b{b}_ms" in line for line in report.matrix)]
    return [("model", "model"), ("artifact", "artifact"), ("executed_precision", "runs in"), *speed, *rates,
            ("latency_b1_p50_ms", "b1 p50 ms"), ("peak_rss_mb", "peak MB"), ("file_mb", "file MB"),
            ("weights_mb", "weights MB"), ("gflops_per_image", "GFLOPs"), *explained, *accuracy, *kept,
            ("status", "status"), ("cpu_note", "CPU note"), ("note", "note")]


def cell(line: dict[str, Any], key: str) -> str:
    value = line.get(key)
    first = {columns[0][0]: task for task, columns in ACCURACY_COLUMNS.items()}
    if key in first and value is None:
        return line.get("accuracy_note", "") if line.get("task") == first[key] else ""
    if key in ("top1_agreement", "top1") and isinstance(value, float):
        return f"{value:.1%}"
    if key.startswith("speedup_b") and isinstance(value, float):
        low, high = line.get(f"{key}_range") or (value, value)
        text = f"{value:.2f}x" + (f" ({low:.2f}-{high:.2f})" if high - low >= 0.01 else "")
        return text + (" !" if line.get("unstable") else "")
    if key.startswith("fast_runs_b") and isinstance(value, list):
        return f"{value[0]}/{value[1]}"
    if key.startswith("end_to_end_b") and value is not None:
        return f"{value:g} ({line[key.replace('_ips', '_share')]:.0%})"
    if key.startswith("utilization_b") and isinstance(value, float):
        return f"{value:.0%} of {line['peak_gops']:.0f}"
    if key.startswith("gpu_b") and isinstance(value, dict):
        return " / ".join(f"{value[phase]:.2f}" for phase in PHASES)
    if key == "map50_95_delta" and isinstance(value, float):
        return f"{value:+.4f}"
    return "" if value is None else str(value)


def _plain(value: Any) -> Any:
    return json.dumps(value) if isinstance(value, (list, dict)) else value


def markdown(report: Report, columns: list[tuple[str, str]]) -> str:
    lines = ["| " + " | ".join(h for _, h in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(line, k) for k, _ in columns) + " |" for line in report.matrix]
    return "\n".join([*lines, "", _legend(report), ""])


def _legend(report: Report) -> str:
    env = report.environment
    return (f"Speedup = throughput over PyTorch FP32 eager at the same batch size, both in the host's fast "
            f"state: each row's runs from its {report.settings['repeats']} processes (interleaved rounds, the "
            f"baseline first in each) are judged in blocks of {BLOCK_S:g} s, and the blocks within "
            f"{FAST_STATE_SPAN - 1:.0%} of the row's {REFERENCE_QUANTILE:.0%}-quantile block are kept (fast runs: "
            f"kept/all; every run is in results.json): some hosts slow every multi-threaded runtime for seconds "
            f"at a time, each by its own factor. Throughput (batch / median kept latency) and b1 p50 are the same "
            f"kept runs, so a speedup is exactly their ratio. In brackets: the range of the per-round ratios over "
            f"all runs (! = a row's processes differ by more than {UNSTABLE_SPREAD:.0%}). 'runs in' is "
            f"the precision the runtime reported computing in. GFLOPs per image count 2 per multiply-add (thop, at "
            f"the row's input size). {_modes_legend(report)}{_utilization_legend(report)}{_gpu_legend(report)} "
            f"{env['cpu']} "
            f"({', '.join(env['cpu_facts']['isa']) or 'no AVX2'}), {env['threads']} threads, {env['date']}.")


def _modes_legend(report: Report) -> str:
    text = ("mode: how each batch size ran, streams x threads per stream: 'latency' is one request on every thread, "
            "'throughput' the batch spread over concurrent one-image requests (OpenVINO's THROUGHPUT hint and its "
            "requests, ONNX Runtime requests on a one-thread session; PyTorch runs as it is); every setting is in "
            "results.json (rows' batches' execution).")
    if any(key.startswith("end_to_end_b") for line in report.matrix for key in line):
        text += (" e2e img/s: the deployed path, image files to kept predictions, pipelined (the next batch read and "
                 "prepared on one thread while this one infers, then its postprocessing), in the host's fast state; "
                 "in brackets its share of the inference-only img/s.")
    return text


def _utilization_legend(report: Report) -> str:
    if not report.machine_limits:
        return ""
    return (" util. = GFLOPs x images/s over the measured peak GOP/s of the row's runtime for the precision it "
            "runs in (INT8 files: the int8 peak; the highest rate of its GEMM and convolution kernels; optimize "
            "info); profiles/<model>/<artifact>/profile.md break each row's deployed path into its stages.")


def _gpu_legend(report: Report) -> str:
    if report.settings["device"] != "cuda":
        return ""
    return (" On CUDA, latency is the host's clock around each call, copies to and from the GPU included; GPU ms "
            "in/compute/out splits the same runs by CUDA events (medians).")


def rich_table(report: Report) -> Table:
    """The console's summary of the matrix: the columns that decide (speedup, latency, accuracy, status), short
    enough for a 120-column terminal; matrix.md and report.html have every column."""
    accuracy = [c for task, columns in ACCURACY_COLUMNS.items() for c in columns[:1]
                if task in {line.get("task") for line in report.matrix}]
    columns = [("model", "model"), ("artifact", "artifact"), ("executed_precision", "runs in"),
               *[(f"speedup_b{b}", f"b{b}") for b in report.settings["batch_sizes"]],
               *[(f"end_to_end_b{b}_ips", f"b{b} e2e img/s") for b in report.settings["batch_sizes"]
                 if any(f"end_to_end_b{b}_ips" in line for line in report.matrix)],
               ("latency_b1_p50_ms", "b1 p50 ms"), *accuracy, ("status", "status")]
    cells = [[_short(line, key) for key, _ in columns] for line in report.matrix]
    flagged = any(cell.endswith(" !") for row in cells for cell in row)  # a speedup shown is marked
    table = Table(title="speedup over PyTorch FP32 (all columns: matrix.md, report.html)", title_justify="left",
                  caption=UNSTABLE_LEGEND if flagged else None, caption_justify="left")
    for _, header in columns:
        table.add_column(header, overflow="fold")
    for row in cells:
        table.add_row(*row)
    return table


def _short(line: dict[str, Any], key: str) -> str:
    value = line.get(key)
    if key.startswith("speedup_b") and isinstance(value, float):
        return f"{value:.2f}x" + (" !" if line.get("unstable") else "")
    if key == "executed_precision" and value is not None:
        return str(value).split(" (")[0]
    if key.startswith("end_to_end_b") and value is not None:
        return f"{value:.1f}"
    return cell(line, key)
