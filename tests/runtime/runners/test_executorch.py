"""The ExecuTorch runner: XNNPACK's thread pool sized to the row's threads, not to every CPU; measured in an
evaluation image by image, scored as PyTorch scores."""

from __future__ import annotations

from pathlib import Path

from yolo_optimize.artifact import Manifest
from yolo_optimize.evaluate.results import Report
from yolo_optimize.runtime.runners import open_runner


def test_the_thread_pool_takes_the_rows_threads(built_edge: Path) -> None:
    from executorch.extension.pybindings import portable_lib

    folder = built_edge / "executorch-fp32"
    for threads in (1, 2):
        with open_runner(folder, Manifest.read(folder), threads=threads):
            assert portable_lib._threadpool_get_thread_count() == threads


def test_executorch_rows_are_measured_image_by_image_and_score_what_pytorch_scores(edge_evaluated: Report) -> None:
    rows = {row.name: row for row in edge_evaluated.rows}
    row, baseline = rows["executorch-fp32"], rows["pytorch-fp32"]
    assert not row.error and row.accuracy and baseline.accuracy
    assert abs(row.accuracy.map50_95 - baseline.accuracy.map50_95) < 0.001
    executions = {batch.batch: batch.execution for batch in row.measurements[0].batches}
    assert "takes one image: a batch runs image by image" in executions[2]["note"]
    assert row.measurements[0].executed_precision.startswith("fp32")
    half = rows["executorch-fp16"]
    assert not half.error and half.accuracy and abs(half.accuracy.map50_95 - baseline.accuracy.map50_95) < 0.005
