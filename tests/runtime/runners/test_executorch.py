"""The ExecuTorch runner: XNNPACK's thread pool sized to the row's threads, not to every CPU; measured in an
evaluation image by image, scored as PyTorch scores; its per-layer times from ExecuTorch's own ETDump."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from yolo_optimize.artifact import Manifest
from yolo_optimize.evaluation.results import Report
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


@pytest.mark.slow  # its fixtures are taken by name in the test, where conftest's marking does not see them
@pytest.mark.alone  # the operators' times must sum to no more than the pass they were timed in
@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_etdump_times_each_xnnpack_operator_and_says_what_it_ran_in(request: pytest.FixtureRequest, tmp_path: Path,
                                                                   precision: str) -> None:
    """yolov5n's 60 convolutions (XNNPACK's 1x1 ones are Fully Connected), each an XNNPACK operator whose data types
    say its precision: none in int8 in the
    FP32 program, all but the Detect head's 3 in the INT8 one (as its build counted them in the converted graph); the
    operators left to the portable kernels timed too; the layers within the passes they were timed in."""
    folder = request.getfixturevalue("built_edge" if precision == "fp32" else "built_edge_int8") / \
        f"executorch-{precision}"
    with open_runner(folder, Manifest.read(folder), threads=2) as runner:
        side = runner.metadata.side
        images = runner.input_of(np.zeros((2, side, side, 3), np.uint8))
        profile = runner.profile_layers(images, 3, tmp_path / "trace.json")
    convolutions = [layer for layer in profile.layers if layer.kind in ("Convolution", "Fully Connected")]  # 1x1
    assert len(convolutions) == 60 and all(layer.kernel.startswith("XNNPACK (") for layer in convolutions)
    assert len({layer.name for layer in profile.layers}) == len(profile.layers), "each layer named once"
    assert sum(layer.executed == "int8" for layer in convolutions) == (57 if precision == "int8" else 0)
    assert any(layer.kernel == "portable" for layer in profile.layers), "the operators outside XNNPACK"
    assert 0.75 <= sum(layer.ms for layer in profile.layers) / profile.pass_ms <= 1, profile.passes_ms
    events = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    assert len(events) == 3 * 2 * len(profile.layers), "every operator of every timed call"
