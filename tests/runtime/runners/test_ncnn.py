"""The NCNN runner in an evaluation: measured beside the baseline image by image, scored as PyTorch scores, its
settings in the snippet; its threads set on the running net."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from yolo_optimize.artifact import Manifest
from yolo_optimize.evaluate.results import Report
from yolo_optimize.runtime.runners import open_runner


def test_ncnn_rows_are_measured_image_by_image_and_score_what_pytorch_scores(edge_evaluated: Report) -> None:
    rows = {row.name: row for row in edge_evaluated.rows}
    baseline = rows["pytorch-fp32"].accuracy
    for name in ("ncnn-fp32", "ncnn-fp16"):
        row = rows[name]
        assert not row.error and row.accuracy and baseline, name
        assert abs(row.accuracy.map50_95 - baseline.map50_95) < (0.001 if name == "ncnn-fp32" else 0.01), name
        executions = {batch.batch: batch.execution for batch in row.measurements[0].batches}
        assert executions[1]["note"] == "" and "takes one image: a batch runs image by image" in executions[2]["note"]
        assert executions[2]["settings"] == {"num_threads": edge_evaluated.settings["threads"],
                                          **dict.fromkeys(("use_fp16_storage", "use_fp16_packed",
                                                           "use_fp16_arithmetic"), name == "ncnn-fp16")}


def test_the_threads_are_set_on_the_running_net(built_edge: Path) -> None:
    folder = built_edge / "ncnn-fp32"
    images = np.zeros((2, 3, 320, 320), np.float32)
    with open_runner(folder, Manifest.read(folder), threads=2) as runner:
        before = runner.infer(images)
        runner.set_threads(1)
        assert runner.net.opt.num_threads == 1 and runner.execution(1).settings["num_threads"] == 1
        np.testing.assert_array_equal(runner.infer(images), before)
