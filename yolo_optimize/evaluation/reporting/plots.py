"""The report's figures, drawn with matplotlib from the report alone (every point is a number of results.json):
the speedup heatmap, latency against batch size with its p50-p99 band, accuracy against throughput with the
Pareto front, memory and size bars, the roofline and the per-layer-type time of profiled rows.

Each figure is saved as SVG and PNG beside the page; the page inlines the SVG (no network needed).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from yolo_optimize.evaluation.reporting.roofline import roofline_figure
from yolo_optimize.evaluation.results import MatrixRow, Report
from yolo_optimize.limits.peaks import MachineLimits

ACCURACY_KEYS = {"detect": ("map50_95", "mAP50-95"), "classify": ("top1_agreement", "top-1 agreement with FP32")}
KINDS_SHOWN = 6  # layer types drawn apart in the time-per-type bars; the rest is "other"


def report_figures(report: Report) -> dict[str, Any]:
    """name -> matplotlib Figure, for every figure the report has data for (in page order)."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display, whatever the host has
    makers: dict[str, Callable[[Report], Any]] = {
        "heatmap": speedup_heatmap, "latency": latency_bands, "pareto": accuracy_throughput,
        "memory": memory_bars, "roofline": _roofline, "layer_types": layer_type_bars,
    }
    figures = {name: make(report) for name, make in makers.items()}
    return {name: figure for name, figure in figures.items() if figure is not None}


def save_figure(figure: Any, out: Path, name: str) -> list[Path]:
    """``name``.svg and ``name``.png in ``out``; the figure is closed."""
    from matplotlib import pyplot

    files = [out / f"{name}.svg", out / f"{name}.png"]
    for path in files:
        figure.savefig(path, dpi=110, bbox_inches="tight")
    pyplot.close(figure)
    return files


def _ok(report: Report) -> list[MatrixRow]:
    return [line for line in report.matrix if line.status == "ok"]


def _label(line: MatrixRow, report: Report) -> str:
    models = {entry.model for entry in report.matrix}
    return line.artifact if len(models) == 1 else f"{line.model} {line.artifact}"


def speedup_heatmap(report: Report) -> Any:
    """Artifact x batch size, coloured by speedup over PyTorch FP32 (1 = as fast), each cell annotated."""
    from matplotlib import pyplot
    from matplotlib.colors import TwoSlopeNorm

    lines, sizes = _ok(report), report.settings.batch_sizes
    if not lines:
        return None
    values = np.array([[line.at(b).speedup or np.nan for b in sizes] for line in lines], dtype=float)
    figure, axes = pyplot.subplots(figsize=(2.2 + 1.1 * len(sizes), 0.9 + 0.38 * len(lines)))
    measured = np.isfinite(values).any()  # none without a baseline (external files without --checkpoint)
    top = max(float(np.nanmax(values)) if measured else 2.0, 1.01)
    bottom = min(0.5, float(np.nanmin(values))) if measured else 0.5
    image = axes.imshow(values, cmap="RdYlGn", norm=TwoSlopeNorm(1.0, bottom, top), aspect="auto")
    for (i, j), value in np.ndenumerate(values):
        axes.text(j, i, "n/a" if np.isnan(value) else f"{value:.2f}x", ha="center", va="center", fontsize=8)
    axes.set_xticks(range(len(sizes)), [f"batch {b}" for b in sizes])
    axes.set_yticks(range(len(lines)), [_label(line, report) for line in lines])
    axes.set_title("speedup over PyTorch FP32 eager (host's fast state)", fontsize=9)
    figure.colorbar(image, ax=axes, shrink=0.8)
    return figure


def latency_bands(report: Report) -> Any:
    """Latency per image against batch size, one line per row: the p50 in the host's fast state (the matrix's
    figure, ``Row.fast_state``), with a band up to the p99 over all runs (median over processes; the slow state is
    part of the tail)."""
    from matplotlib import pyplot
    from matplotlib.ticker import LogFormatter, NullLocator

    rows = [row for row in report.rows if row.measurements and not row.error]
    sizes = report.settings.batch_sizes
    if not rows:
        return None
    figure, axes = pyplot.subplots(figsize=(8, 4.5))
    for row in rows:
        points = [(b, fast.latency.p50_ms / b, max(fast.latency.p50_ms, row.median_latency(b, "p99_ms") or 0) / b)
                  for b in sizes if (fast := row.fast_state(b))]
        if not points:
            continue
        x, p50, p99 = (np.array(column) for column in zip(*points))
        (line,) = axes.plot(x, p50, marker="o", label=f"{row.model} {row.name}" if _many_models(report) else row.name)
        axes.fill_between(x, p50, p99, color=line.get_color(), alpha=0.15)
    axes.set(xscale="log", yscale="log", xticks=sizes, xlabel="batch size",
             ylabel="ms per image (p50, fast state; band to p99)",
             title="latency against batch size")
    axes.set_xticklabels([str(b) for b in sizes])
    axes.xaxis.set_minor_locator(NullLocator())  # the batch sizes are the ticks
    axes.yaxis.set_major_formatter(LogFormatter())  # 20, 30, 50 rather than 2x10^1...
    axes.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False))
    axes.grid(True, linewidth=0.3)
    axes.legend(fontsize=7, ncol=1 + len(rows) // 24, loc="upper left", bbox_to_anchor=(1.01, 1))  # beside the lines
    return figure


def accuracy_throughput(report: Report) -> Any:
    """Accuracy against throughput per model and batch size; the Pareto front (no row both faster and more
    accurate) is drawn as a step line through its rows."""
    from matplotlib import pyplot

    panels = [(model, key, name, b) for model, (key, name) in _accuracy_models(report)
              for b in report.settings.batch_sizes]
    if not panels:
        return None
    columns = len(report.settings.batch_sizes)
    rows = len(panels) // columns
    figure, grid = pyplot.subplots(rows, columns, figsize=(4.2 * columns, 3.6 * rows), squeeze=False)
    labels = []
    for axes, (model, key, name, batch) in zip(grid.flat, panels):
        points = [(throughput, getattr(line, key), line.artifact) for line in _ok(report)
                  if line.model == model and getattr(line, key) is not None
                  and (throughput := line.at(batch).throughput_ips)]
        front = pareto_front([(x, y) for x, y, _ in points])
        for x, y, _ in points:
            on_front = (x, y) in front
            axes.scatter(x, y, s=50 if on_front else 20, edgecolors="black" if on_front else "none")
        labels.append((axes, points))
        if front:
            axes.step(*zip(*sorted(front)), where="post", linestyle="--", linewidth=1, color="black",
                      label="Pareto front")
            axes.legend(fontsize=7)
        axes.set(xlabel="images/s", ylabel=name, title=f"{model}, batch {batch}")
        axes.title.set_fontsize(9)
        axes.grid(True, linewidth=0.3)
    figure.tight_layout()
    for axes, points in labels:  # once the panels have their final size: labels are placed as drawn
        _labelled(axes, points)
    return figure


LABEL_POINTS = 6  # the Pareto panels' label font size, in points
LABEL_TRIES = 3  # placements tried, each after making room above the panel for labels pushed over its top


def _labelled(axes: Any, points: list[tuple[float, float, str]]) -> None:
    """Each point's label beside it, moved up past the labels already placed where it would overlap one (points
    close in both accuracy and speed are common: an FP16 file and its FP32 sibling), with a leader line when
    moved; from the bottom label up, measured as the renderer draws them. Labels pushed over the panel's top get
    room there, and are placed again."""
    if not points:  # a batch size no row was measured at
        return
    renderer = axes.figure.canvas.get_renderer()
    for _ in range(LABEL_TRIES):
        for text in list(axes.texts):
            text.remove()
        axes.autoscale_view()
        boxes: list[Any] = []
        for x, y, label in sorted(points, key=lambda point: (point[1], point[0])):
            boxes.append(_placed(axes, x, y, label, renderer, boxes))
        over = max(box.y1 for box in boxes) - axes.get_window_extent(renderer).y1
        if over <= 0:
            return
        low, high = axes.get_ylim()
        axes.set_ylim(low, high + (high - low) * (over + 2) / axes.get_window_extent(renderer).height)


def _placed(axes: Any, x: float, y: float, label: str, renderer: Any, taken: list[Any]) -> Any:
    """``label`` annotated at (x, y), one line higher at a time until it overlaps none of ``taken`` (a leader line
    to its point when raised); its box."""
    rise = 3.0
    while True:
        text = axes.annotate(label, (x, y), fontsize=LABEL_POINTS, xytext=(3, rise), textcoords="offset points")
        box = text.get_window_extent(renderer)
        if not any(box.overlaps(other) for other in taken):
            break
        text.remove()
        rise += LABEL_POINTS * 1.2
    if rise > 3:
        text.remove()
        text = axes.annotate(label, (x, y), fontsize=LABEL_POINTS, xytext=(3, rise), textcoords="offset points",
                             arrowprops={"arrowstyle": "-", "linewidth": 0.4, "color": "0.5"})
    return box


def pareto_front(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points no other point beats on both (higher is better on both axes)."""
    return [p for p in points if not any(q[0] >= p[0] and q[1] >= p[1] and q != p for q in points)]


def memory_bars(report: Report) -> Any:
    """Peak resident memory, file size and loaded weights per row, side by side."""
    from matplotlib import pyplot

    lines = _ok(report)
    if not lines:
        return None
    figure, axes = pyplot.subplots(figsize=(8, 0.8 + 0.42 * len(lines)))
    y = np.arange(len(lines))
    for offset, (key, name) in zip((-0.27, 0, 0.27), (("peak_rss_mb", "peak resident MB"), ("file_mb", "file MB"),
                                                      ("weights_mb", "weights MB (as loaded)"))):
        axes.barh(y + offset, [getattr(line, key) or 0 for line in lines], height=0.26, label=name)
    axes.set_yticks(y, [_label(line, report) for line in lines])
    axes.invert_yaxis()
    axes.set(xlabel="MB", title="memory and size")
    axes.legend(fontsize=7)
    axes.grid(True, axis="x", linewidth=0.3)
    return figure


def layer_type_bars(report: Report) -> Any:
    """Share of the per-layer time in each layer type, per profiled row (eval --profile)."""
    from matplotlib import pyplot

    profiled = [row for row in report.rows if row.profile and row.profile.get("by_kind_ms")]
    if not profiled:
        return None
    figure, axes = pyplot.subplots(figsize=(8, 0.9 + 0.42 * len(profiled)))
    for index, row in enumerate(profiled):
        by_kind = (row.profile or {})["by_kind_ms"]
        total = sum(by_kind.values()) or 1.0
        left = 0.0
        kinds = list(by_kind.items())
        shown = kinds[:KINDS_SHOWN] + [("other", sum(ms for _, ms in kinds[KINDS_SHOWN:]))]
        for kind, ms in shown:
            share = ms / total
            axes.barh(index, share, left=left)
            if share > 0.06:
                axes.text(left + share / 2, index, kind, ha="center", va="center", fontsize=6)
            left += share
    axes.set_yticks(range(len(profiled)), [f"{row.model} {row.name}" for row in profiled])
    axes.invert_yaxis()
    axes.set(xlabel="share of the per-layer time (runtime's profiler, batch 1)", xlim=(0, 1),
             title="where the time goes, by layer type")
    return figure


def _roofline(report: Report) -> Any:
    if not report.machine_limits:
        return None
    return roofline_figure(report.matrix, MachineLimits.from_json(report.machine_limits),
                           report.settings.batch_sizes)


def _accuracy_models(report: Report) -> list[tuple[str, tuple[str, str]]]:
    """(model, (accuracy key, axis name)) for the models whose rows have a measured accuracy."""
    found = []
    for model in dict.fromkeys(line.model for line in report.matrix):
        lines = [line for line in _ok(report) if line.model == model]
        task = next((line.task for line in lines), "")
        key = ACCURACY_KEYS.get(task)
        if key and sum(getattr(line, key[0]) is not None for line in lines) >= 2:
            found.append((model, key))
    return found


def _many_models(report: Report) -> bool:
    return len({row.model for row in report.rows}) > 1
