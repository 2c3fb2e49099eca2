"""The report's figures on hand-made results."""

from __future__ import annotations

import warnings

from tests.evaluate.handmade import SETTINGS, row
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
