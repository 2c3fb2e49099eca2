"""The report's figures on hand-made results."""

from __future__ import annotations

import warnings

from tests.evaluate.handmade import SETTINGS, at_batch, row
from yolo_optimize.evaluate.plots import speedup_heatmap
from yolo_optimize.evaluate.report import build_report


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
    figure = speedup_heatmap(build_report(rows, {**SETTINGS, "batch_sizes": [1, 2]}))
    assert [text.get_text() for text in figure.axes[0].texts] == ["1.00x", "1.00x", "2.50x", "n/a"]
