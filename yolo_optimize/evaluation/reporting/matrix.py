"""The speedup matrix: one typed line per row (results.MatrixRow, its figures per batch size in BatchCells), and the
columns it takes in the flat files, matrix.csv, matrix.md, report.html and the console's summary.

The column names (``speedup_b8``, ``throughput_b8_ips``...) are those of matrix.csv and of
report.html's ``data-key``, which users' scripts read; they are made here and nowhere else
(BATCH_COLUMNS), from the typed lines.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from operator import attrgetter
from typing import Any

from yolo_optimize.evaluation.reporting.roofline import roofline_cells
from yolo_optimize.evaluation.results import END_TO_END, BatchCells, EvalSettings, MatrixRow, Report, Row, is_baseline
from yolo_optimize.formats import formats
from yolo_optimize.limits.peaks import MachineLimits
from yolo_optimize.runtime.runners.cuda_phases import PHASES

UNSTABLE_SPREAD = 0.15  # repeats of one row disagreeing by more than this are flagged


def matrix_of(rows: list[Row], settings: EvalSettings, limits: MachineLimits | None) -> list[MatrixRow]:
    """A line per row; with this machine's measured ``limits`` on a CPU evaluation, each row's roofline too."""
    baselines = {r.model: r for r in rows if is_baseline(r.target, r.precision)}
    cpu_limits = limits if settings.device == "cpu" else None  # CPU peaks say nothing of a GPU row
    lines = [matrix_row(r, baselines.get(r.model), settings.batch_sizes) for r in rows]
    return [roofline_cells(row, line, cpu_limits) if line.status == "ok" else line for row, line in zip(rows, lines)]


def matrix_row(row: Row, baseline: Row | None, batch_sizes: Sequence[int]) -> MatrixRow:
    """One line of the matrix: per-batch speedups in the host's fast state and the row's other figures.

    Speedup = the row's throughput over the baseline's, each from the median of its runs in the
    host's fast state over all its processes (``Row.fast_state``; ``fast_runs``: runs kept of
    all); throughput and latency columns are the same figures, so a speedup is exactly their
    ratio. ``speedup_range`` is the spread of the per-round ratios over all runs (a round is
    one process of the row and one of the baseline), slow state included, to show how much a
    single process pair could be off.
    """
    line = MatrixRow(row.model, row.name, row.precision, row.task, _note(row), "ok")
    if row.skipped:
        return replace(line, status=f"skipped: {row.skipped}")
    if row.error or not row.measurements:
        return replace(line, status=f"failed: {row.error or 'not measured'}")
    fast_b1, accuracy = row.fast_state(1), row.accuracy
    base_accuracy = baseline.accuracy if baseline else None
    delta = (accuracy.map50_95 - base_accuracy.map50_95
             if accuracy and base_accuracy and accuracy.map50_95 is not None and base_accuracy.map50_95 is not None
             else None)
    weight_bytes = row.measurements[0].weight_bytes
    return replace(
        line, batches={batch: batch_cells(row, baseline, batch) for batch in batch_sizes},
        executed_precision=row.measurements[0].executed_precision,
        latency_b1_p50_ms=fast_b1.latency.p50_ms if fast_b1 else None,
        peak_rss_mb=round(row.median_memory_mb(), 1), gpu_mb=row.median_gpu_memory_mb(), file_mb=row.file_mb,
        weights_mb=round(weight_bytes / 2**20, 3) if weight_bytes else None,
        map50_95=accuracy.map50_95 if accuracy else None, map50=accuracy.map50 if accuracy else None,
        map50_95_delta=round(delta, 4) if delta is not None else None,
        top1_agreement=accuracy.top1_agreement if accuracy else None, top1=accuracy.top1 if accuracy else None,
        accuracy_note=accuracy.note if accuracy else "not measured", cpu_note=row.cpu_note,
        repeats=len(row.measurements), unstable=_unstable(row, batch_sizes), busy_host=row.busy_host())


def batch_cells(row: Row, baseline: Row | None, batch: int) -> BatchCells:
    """The row's figures at ``batch`` (matrix_row), how it ran there and, where measured, the pipelined end-to-end
    path in the host's fast state: images/s and its share of the inference-only rate."""
    mine = row.fast_state(batch)
    if mine is None:
        return BatchCells(error=_batch_error(row, batch))
    theirs = baseline.fast_state(batch) if baseline else None
    ratios = row.round_ratios(baseline, batch) if baseline else []
    execution, path = row.execution(batch), row.fast_state(batch, END_TO_END)
    return BatchCells(
        speedup=round(mine.throughput_ips / theirs.throughput_ips, 3) if theirs else None,
        speedup_range=(round(min(ratios), 3), round(max(ratios), 3)) if ratios else None,
        throughput_ips=mine.throughput_ips, mode=execution["label"] if execution else None,
        fast_runs=(mine.runs_kept, mine.runs), end_to_end_ips=path.throughput_ips if path else None,
        end_to_end_share=round(path.throughput_ips / mine.throughput_ips, 3) if path else None,
        gpu_ms=row.median_phases(batch))


def _note(row: Row) -> str:
    """What to know before trusting the row: an experimental format, a model file this tool did not build, the
    baseline's threads or the runtime's variant chosen by measurement, other processes on its CPUs."""
    row_format = formats().get(row.target)
    notes = [row_format.experimental] if row_format and row_format.experimental else []
    if row.external:
        notes.append(f"external: {row.external['path']} (sha256 {row.external['sha256'][:12]}...)")
    if row.threads_choice:
        notes.append(row.threads_choice.describe())
    if row.variant_choice:
        notes.append(row.variant_choice.describe())
    busy, calibrated = row.busy_host(), row.calibration_note()
    return "; ".join([*notes, *([busy] if busy else []), *([calibrated] if calibrated else [])])


def _batch_error(row: Row, batch: int) -> str:
    errors = [b.error for m in row.measurements for b in m.batches if b.batch == batch and b.error]
    return errors[0] if errors else "n/a"


def _unstable(row: Row, batch_sizes: Sequence[int]) -> bool:
    """The row's processes disagree by more than UNSTABLE_SPREAD at some batch size (a slow-mode process)."""
    return any(len(values) > 1 and max(values) / min(values) - 1 > UNSTABLE_SPREAD
               for values in (list(row.round_throughputs(batch).values()) for batch in batch_sizes))


Show = Callable[[MatrixRow, Any], str]  # how a column shows a line's value


def _plain(line: MatrixRow, value: Any) -> str:
    return "" if value is None else str(value)


@dataclass(frozen=True)
class Column:
    """A column of the flat files: ``key`` names it in matrix.csv and report.html (``data-key``), ``header`` in
    matrix.md, report.html and the console; ``value`` is the figure of a line it holds, ``show`` its text."""

    key: str
    header: str
    value: Callable[[MatrixRow], Any]
    show: Show = _plain

    def raw(self, line: MatrixRow) -> str:
        """The value as matrix.csv and report.html's ``data-value`` hold it (JSON for a pair or a mapping)."""
        value = self.value(line)
        return "" if value is None else json.dumps(value) if isinstance(value, tuple | dict) else str(value)

    def text(self, line: MatrixRow) -> str:
        return self.show(line, self.value(line))


BATCH_COLUMNS = {  # BatchCells field -> (key, header) of its column at batch size {b}
    "speedup": ("speedup_b{b}", "b{b} speedup"), "mode": ("mode_b{b}", "b{b} mode"),
    "throughput_ips": ("throughput_b{b}_ips", "b{b} img/s"),
    "end_to_end_ips": ("end_to_end_b{b}_ips", "b{b} e2e img/s"),
    "utilization": ("utilization_b{b}", "b{b} util."), "gpu_ms": ("gpu_b{b}_ms", "b{b} GPU ms in/compute/out"),
    "fast_runs": ("fast_runs_b{b}", "b{b} fast runs"),
}


def _field(name: str, header: str, show: Show = _plain) -> Column:
    """The column of a line's own figure ``name``, which is also its key."""
    return Column(name, header, attrgetter(name), show)


def _at(batch: int, figure: str, show: Show = _plain) -> Column:
    """The column of ``figure`` at ``batch``; the speedup column shows why a row has none there."""
    key, header = BATCH_COLUMNS[figure]
    read = BatchCells.speedup_or_error if figure == "speedup" else attrgetter(figure)
    return Column(key.format(b=batch), header.format(b=batch), lambda line: read(line.at(batch)), show)


def _speedup(batch: int, line: MatrixRow, value: Any) -> str:
    """The speedup, its per-round range when it differs and '!' where the row's processes disagree."""
    if not isinstance(value, float):
        return _plain(line, value)
    low, high = line.at(batch).speedup_range or (value, value)
    text = f"{value:.2f}x" + (f" ({low:.2f}-{high:.2f})" if high - low >= 0.01 else "")
    return text + marks(line)


UNSTABLE_MARK, BUSY_MARK = " !", " *"  # what a speedup carries when its row is not to be trusted


def marks(line: MatrixRow) -> str:
    """UNSTABLE_MARK: the row's processes disagree by more than UNSTABLE_SPREAD; BUSY_MARK: other processes shared
    its CPUs."""
    return (UNSTABLE_MARK if line.unstable else "") + (BUSY_MARK if line.busy_host else "")


def _end_to_end(batch: int, line: MatrixRow, value: Any) -> str:
    return "" if value is None else f"{value:g} ({line.at(batch).end_to_end_share:.0%})"


def _utilization(line: MatrixRow, value: Any) -> str:
    return f"{value:.0%} of {line.peak_gops:.0f}" if isinstance(value, float) else _plain(line, value)


def _gpu_ms(line: MatrixRow, value: Any) -> str:
    return " / ".join(f"{value[phase]:.2f}" for phase in PHASES) if isinstance(value, dict) else _plain(line, value)


def _fast_runs(line: MatrixRow, value: Any) -> str:
    return f"{value[0]}/{value[1]}" if isinstance(value, tuple) else _plain(line, value)


def _percent(line: MatrixRow, value: Any) -> str:
    return f"{value:.1%}" if isinstance(value, float) else _plain(line, value)


def _signed(line: MatrixRow, value: Any) -> str:
    return f"{value:+.4f}" if isinstance(value, float) else _plain(line, value)


def _or_note(task: str, show: Show, line: MatrixRow, value: Any) -> str:
    """A task's first accuracy column: the row's accuracy note where it has no figure."""
    if value is None:
        return line.accuracy_note if line.task == task else ""
    return show(line, value)


ACCURACY_COLUMNS = {  # per task: (field, header, text) of its accuracy columns; the first shows the note when empty
    "detect": [("map50_95", "mAP50-95", _plain), ("map50_95_delta", "ΔmAP", _signed)],
    "classify": [("top1_agreement", "top-1 agr.", _percent), ("top1", "top-1", _percent)],
}


def _accuracy_columns(report: Report, first_only: bool = False) -> list[Column]:
    """The accuracy columns of the tasks of the rows present, the first of each showing the row's note if empty."""
    tasks = {line.task for line in report.matrix}
    return [_field(name, header, partial(_or_note, task, show) if index == 0 else show)
            for task, columns in ACCURACY_COLUMNS.items() if task in tasks
            for index, (name, header, show) in enumerate(columns[:1] if first_only else columns)]


def _any(report: Report, batch: int, figure: str) -> bool:
    """Some line has ``figure`` at ``batch``."""
    return any(getattr(line.at(batch), figure) is not None for line in report.matrix)


def matrix_columns(report: Report) -> list[Column]:
    """The columns of matrix.csv, matrix.md and report.html, in display order; the rates of the batch sizes some row
    was measured at, utilization when the machine's limits were measured, GPU phases where split, accuracy
    columns for the tasks of the rows present."""
    sizes = report.settings.batch_sizes
    rates = [column for b in sizes for column in (
        *([_at(b, "mode"), _at(b, "throughput_ips")] if _any(report, b, "throughput_ips") else []),
        *([_at(b, "end_to_end_ips", partial(_end_to_end, b))] if _any(report, b, "end_to_end_ips") else []))]
    explained = [_at(b, "utilization", _utilization) for b in sizes] if report.machine_limits else []
    explained += [_at(b, "gpu_ms", _gpu_ms) for b in sizes if _any(report, b, "gpu_ms")]
    return [_field("model", "model"), _field("artifact", "artifact"), _field("executed_precision", "runs in"),
            *[_at(b, "speedup", partial(_speedup, b)) for b in sizes], *rates,
            _field("latency_b1_p50_ms", "b1 p50 ms"),
            *([_field("gpu_mb", "GPU MB")] if any(line.gpu_mb is not None for line in report.matrix) else []),
            _field("peak_rss_mb", "peak MB"), _field("file_mb", "file MB"),
            _field("weights_mb", "weights MB"), _field("gflops_per_image", "GFLOPs"), *explained,
            *_accuracy_columns(report), *[_at(b, "fast_runs", _fast_runs) for b in sizes],
            _field("status", "status"), _field("cpu_note", "CPU note"), _field("note", "note")]


def _short_speedup(line: MatrixRow, value: Any) -> str:
    return f"{value:.2f}x" + marks(line) if isinstance(value, float) else _plain(line, value)


def _short_precision(line: MatrixRow, value: Any) -> str:
    return "" if value is None else str(value).split(" (")[0]


def _one_decimal(line: MatrixRow, value: Any) -> str:
    return "" if value is None else f"{value:.1f}"


def console_columns(report: Report) -> list[Column]:
    """The console's summary: the columns that decide (speedup, latency, accuracy, status), short enough for a
    120-column terminal."""
    sizes = report.settings.batch_sizes
    return [_field("model", "model"), _field("artifact", "artifact"),
            _field("executed_precision", "runs in", _short_precision),
            *[replace(_at(b, "speedup", _short_speedup), header=f"b{b}") for b in sizes],
            *[_at(b, "end_to_end_ips", _one_decimal) for b in sizes if _any(report, b, "end_to_end_ips")],
            _field("latency_b1_p50_ms", "b1 p50 ms"), *_accuracy_columns(report, first_only=True),
            _field("status", "status")]


def report_warnings(report: Report) -> list[str]:
    """The lines the console and the page open with: a busy host (``busy_warning``), accuracy measured on
    calibration images (``calibration_warning``)."""
    return [warning for warning in (busy_warning(report), calibration_warning(report)) if warning]


def calibration_warning(report: Report) -> str:
    """One line naming the rows whose accuracy was measured on images they were calibrated on (``Row.
    calibration_note``), else ""."""
    seen = [f"{row.model} {row.name} ({row.calibration_overlap} images)" for row in report.rows
            if row.calibration_overlap]
    if not seen:
        return ""
    return (f"warning: accuracy measured on images the artifact was calibrated on: {', '.join(seen)}: not evidence "
            "of its accuracy, and recommend does not count it within an accuracy budget; evaluate on images held "
            "out of calibration")


def busy_warning(report: Report) -> str:
    """One line when other processes shared the CPUs before or while measuring (``host/busy.py``), else ""."""
    before = report.environment.get("host_before") or {}
    busy = [line.artifact for line in report.matrix if line.busy_host]
    doubted_before = before.get("busy") or before.get("unknown")
    if not busy and not doubted_before:
        return ""
    during = f"while {len(busy)} of {len(report.matrix)} rows measured ({', '.join(busy)})" if busy else ""
    ahead = f"before measuring ({before['describe']})" if doubted_before else ""
    state = "of unknown load (its CPU times could not be read)" if before.get("unknown") else "busy"
    return (f"warning: the host was {state} {' and '.join(part for part in (ahead, during) if part)}: other "
            "processes may have shared the CPUs, so these speedups and rankings are not to be trusted (rows marked "
            "*); evaluate again on a quiet host")
