"""The report's figures on hand-made results."""

from __future__ import annotations

import warnings
from dataclasses import replace

import pytest
from matplotlib.text import Text

from tests.evaluation.handmade import SETTINGS, at_batch, report, row
from yolo_optimize.evaluation.reporting.plots import accuracy_throughput, latency_bands, speedup_heatmap
from yolo_optimize.evaluation.reporting.report import build_report


def test_a_matrix_without_a_baseline_draws_its_heatmap_as_not_available_without_warnings() -> None:
    """External files measured without --checkpoint have no speedups: every cell reads n/a, and numpy is not asked for
    the minimum of nothing (its RuntimeWarning would reach the user's console)."""
    made = build_report([row("onnx-fp32", [50, 51, 49], 0.34)], SETTINGS)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        figure = speedup_heatmap(made)
    assert [text.get_text() for text in figure.axes[0].texts] == ["n/a"]


def test_a_batch_size_a_row_could_not_run_draws_as_not_available_in_the_heatmap() -> None:
    """The matrix shows why (the speedup column holds the error); the heatmap, which takes the typed speedup, draws
    n/a there instead of failing on the error's text."""
    rows = [at_batch(row("pytorch-fp32", [100, 101, 99], 0.343), 2),
            at_batch(row("openvino-int8", [40, 41, 39], 0.339), 2, "the model's input is fixed at batch 1")]
    figure = speedup_heatmap(build_report(rows, replace(SETTINGS, batch_sizes=(1, 2))))
    assert [text.get_text() for text in figure.axes[0].texts] == ["1.00x", "1.00x", "2.50x", "n/a"]


def test_the_latency_plot_draws_the_matrix_p50_and_plain_tick_labels() -> None:
    """Two of the ONNX row's three processes ran in the slow state: the line sits at the matrix's fast-state p50,
    not at the median process's; no tick reads like 2x10^1."""
    made = report(row("onnx-fp32", [60, 90, 90], 0.343))
    figure = latency_bands(made)
    figure.canvas.draw()
    axes = figure.axes[0]
    drawn = {line.get_label(): line.get_ydata()[0] for line in axes.get_lines()}
    for line in made.matrix:
        assert drawn[line.artifact] == pytest.approx(line.latency_b1_p50_ms), line.artifact
    assert drawn["onnx-fp32"] == pytest.approx(60, rel=0.03)
    labels = [label.get_text() for axis in (axes.xaxis, axes.yaxis) for minor in (False, True)
              for label in axis.get_ticklabels(minor=minor)]
    assert labels and not any("times" in text or "^" in text for text in labels), labels


def test_the_pareto_labels_of_points_close_together_do_not_overlap() -> None:
    """FP32 and FP16 files of two runtimes at nearly the same speed and accuracy."""
    made = report(*(row(name, [ms] * 3, accuracy) for name, ms, accuracy in (
        ("onnx-fp32", 50.0, 0.3430), ("onnx-fp16", 50.3, 0.3431), ("openvino-fp32", 49.8, 0.3429),
        ("openvino-fp16", 50.1, 0.3430), ("torchscript-fp32", 51.0, 0.3430))))
    figure = accuracy_throughput(made)
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    boxes = [Text.get_window_extent(text, renderer) for text in figure.axes[0].texts]  # the words, not the leader
    assert len(boxes) == 6
    overlapping = [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:] if a.overlaps(b)]
    assert overlapping == []
    panel = figure.axes[0].get_window_extent(renderer)
    assert all(box.y1 <= panel.y1 + 1 for box in boxes), "a label above its panel"


def test_a_batch_size_no_row_was_measured_at_draws_an_empty_pareto_panel() -> None:
    """Every row failed at batch 2: that panel has no points, and no labels to place."""
    rows = [at_batch(row(name, [ms] * 3, 0.34), 2, "the model's input is fixed at batch 1")
            for name, ms in (("pytorch-fp32", 100.0), ("onnx-fp32", 50.0), ("openvino-fp32", 45.0))]
    figure = accuracy_throughput(build_report(rows, replace(SETTINGS, batch_sizes=(1, 2))))
    assert [len(axes.texts) for axes in figure.axes] == [3, 0]
