"""The report of an evaluation and its files: results.json, matrix.csv, matrix.md, report.html (the matrix's lines
and columns: matrix.py)."""

from __future__ import annotations

import csv
import os
import platform
from dataclasses import asdict
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from rich.table import Table

from yolo_optimize.errors import UserError
from yolo_optimize.evaluation.reporting.compare import Comparison
from yolo_optimize.evaluation.reporting.html_report import write_page
from yolo_optimize.evaluation.reporting.matrix import (
    BUSY_MARK,
    UNSTABLE_MARK,
    UNSTABLE_SPREAD,
    Column,
    console_columns,
    matrix_columns,
    matrix_of,
)
from yolo_optimize.evaluation.results import SCHEMA_VERSION, EvalSettings, Report, Row
from yolo_optimize.evaluation.results_json import from_json, read_results, zero_runs
from yolo_optimize.evaluation.run_statistics import BLOCK_S, FAST_STATE_SPAN, REFERENCE_QUANTILE
from yolo_optimize.formats import formats
from yolo_optimize.host.busy import HostBefore
from yolo_optimize.host.cpu import cpu_facts, cpu_model, usable_cpus
from yolo_optimize.host.processes import allocator_settings
from yolo_optimize.limits.peaks import MachineLimits

UNSTABLE_LEGEND = (f"! = the row's processes differ by more than {UNSTABLE_SPREAD:.0%} (the host slowed some of "
                   "them); its speedup is from the runs in the host's fast state (matrix.md: how many were kept)")
BUSY_LEGEND = ("* = other processes used the CPUs while the row measured (its note says how much): its figures are "
               "not to be trusted; evaluate again on a quiet host")
# besides the format table's runtimes (formats.Runtime): what loads the models, exports them and scores them
PACKAGES = ("yolo-optimize", "onnx", "yolov5", "yolov7-package", "ultralytics", "torchvision", "numpy",
            "faster-coco-eval")


def build_report(rows: list[Row], settings: EvalSettings, limits: MachineLimits | None = None,
                 host_before: HostBefore | None = None) -> Report:
    """The matrix of every row; with this machine's measured ``limits``, each CPU row's utilization too; with
    ``host_before``, what else ran on the CPUs before measuring, in the environment."""
    env = environment(settings.threads)
    if host_before:
        env["host_before"] = host_before.record()
    return Report(SCHEMA_VERSION, env, settings, rows, matrix_of(rows, settings, limits),
                  asdict(limits) if limits else None)


def load_report(folder: Path) -> Report:
    """An eval's results.json (``folder`` or the file itself) as the typed report it was written from, every field
    checked (``results_json.from_json``: one line naming a missing or mistyped field), the matrix computed again from
    its rows so that every line shown is one this version wrote. That is also why a version-7 file loads: its rows and
    settings are this version's, only its matrix was untyped; the report read is of this version's schema."""
    data = read_results(folder)
    try:
        report = from_json(Report, {**data, "schema_version": SCHEMA_VERSION, "matrix": []}, "results")
        sizes = report.settings.batch_sizes
        if any(size < 1 for size in sizes) or not sizes:
            raise UserError(f"results.settings.batch_sizes: expected positive batch sizes, got {list(sizes)}")
        limits = from_json(MachineLimits | None, report.machine_limits, "results.machine_limits")
        if zeros := zero_runs(report.rows):
            raise UserError(f"results.{zeros}: timed runs of 0 ms are not a measurement: evaluate again")
    except UserError as err:
        raise UserError(f"{folder / 'results.json' if folder.is_dir() else folder}: {err}") from None
    report.matrix = matrix_of(report.rows, report.settings, limits)
    return report


def environment(threads: int) -> dict[str, Any]:
    return {
        "cpu": cpu_model(), "cpu_facts": cpu_facts(), "cores": os.cpu_count(), "usable_cpus": usable_cpus(),
        "threads": threads, "os": platform.platform(),
        "python": platform.python_version(), "packages": {p: _version(p) for p in _packages()},
        "allocator": allocator_settings(),  # the measurement processes' malloc
        "load_average": list(os.getloadavg()),  # at the end (the measurement's own threads included)
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def _packages() -> list[str]:
    """PACKAGES with every format's runtime after yolo-optimize, each once."""
    runtimes = [row.runtime.package for row in formats().values()]
    return list(dict.fromkeys([PACKAGES[0], *runtimes, *PACKAGES[1:]]))


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
    files[0].write_text(report.to_json())
    with open(files[1], "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(column.key for column in columns)
        writer.writerows([column.raw(line) for column in columns] for line in report.matrix)
    files[2].write_text(markdown(report, columns))
    return files + write_page(report, out, columns, _legend(report), comparison)


def markdown(report: Report, columns: list[Column]) -> str:
    """matrix.md: the columns of matrix.csv under their headers, shown as the page shows them, then the legend."""
    lines = ["| " + " | ".join(column.header for column in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(column.text(line) for column in columns) + " |" for line in report.matrix]
    return "\n".join([*lines, "", _legend(report), ""])


def _legend(report: Report) -> str:
    env = report.environment
    return (f"Speedup = throughput over PyTorch FP32 eager at the same batch size, both in the host's fast "
            f"state: each row's runs from its {report.settings.repeats} processes (interleaved rounds, the "
            f"baseline first in each) are judged in blocks of {BLOCK_S:g} s, and the blocks within "
            f"{FAST_STATE_SPAN - 1:.0%} of the row's {REFERENCE_QUANTILE:.0%}-quantile block are kept (fast runs: "
            f"kept/all; every run is in results.json): some hosts slow every multi-threaded runtime for seconds "
            f"at a time, each by its own factor. Throughput (batch / median kept latency) and b1 p50 are the same "
            f"kept runs, so a speedup is exactly their ratio. In brackets: the range of the per-round ratios over "
            f"all runs (! = a row's processes differ by more than {UNSTABLE_SPREAD:.0%}).{_busy_legend(report)} "
            f"'runs in' is the precision the runtime reported computing in. GFLOPs per image count 2 per "
            f"multiply-add (thop, at the row's input size). {_modes_legend(report)}{_utilization_legend(report)}"
            f"{_gpu_legend(report)} "
            f"{env['cpu']} "
            f"({', '.join(env['cpu_facts']['isa']) or 'no AVX2'}), {env['threads']} threads, {env['date']}.")


def _busy_legend(report: Report) -> str:
    return f" {BUSY_LEGEND}." if any(line.busy_host for line in report.matrix) else ""


def _modes_legend(report: Report) -> str:
    text = ("mode: how each batch size ran, streams x threads per stream: 'latency' is one request on every thread, "
            "'throughput' the batch spread over concurrent one-image requests (OpenVINO's THROUGHPUT hint and its "
            "requests, ONNX Runtime requests on a one-thread session; PyTorch runs as it is); every setting is in "
            "results.json (rows' batches' execution).")
    if any(cells.end_to_end_ips is not None for line in report.matrix for cells in line.batches.values()):
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
    if report.settings.device != "cuda":
        return ""
    return (" On CUDA, latency is the host's clock around each call, copies to and from the GPU included; PyTorch "
            "rows are called as a GPU deployment runs them (the prepared uint8 batch in pinned memory, preprocessing "
            "and the forward replayed from a CUDA graph, NMS on the GPU, the detections copied back: their 'out' "
            "includes the NMS). GPU ms in/compute/out splits the same runs by CUDA events (medians).")


def rich_table(report: Report) -> Table:
    """The console's summary of the matrix (matrix.console_columns); matrix.md and report.html have every column."""
    columns = console_columns(report)
    cells = [[column.text(line) for column in columns] for line in report.matrix]
    shown = [cell for row in cells for cell in row]  # a legend only for a mark a speedup shown carries
    legends = [legend for endings, legend in (((UNSTABLE_MARK, UNSTABLE_MARK + BUSY_MARK), UNSTABLE_LEGEND),
                                              ((BUSY_MARK,), BUSY_LEGEND))
               if any(cell.endswith(endings) for cell in shown)]
    table = Table(title="speedup over PyTorch FP32 (all columns: matrix.md, report.html)", title_justify="left",
                  caption="\n".join(legends) or None, caption_justify="left")
    for column in columns:
        table.add_column(column.header, overflow="fold")
    for row in cells:
        table.add_row(*row)
    return table

