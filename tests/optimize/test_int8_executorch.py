"""INT8 ExecuTorch programs: XNNPACK's quantizer with the Detect head kept in float (though the quantizer's
concatenation annotator ignores its filter), gated like every INT8 artifact, run in int8 by XNNPACK."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from tests.conftest import CALIB_DATA, EDGE_SIZE, VAL_DATA, WEIGHTS, assert_gated_yolov5n_int8
from yolo_optimize.artifact import Manifest
from yolo_optimize.building.loading import warmed_up
from yolo_optimize.checkpoint import resolve_source
from yolo_optimize.evaluation.results import Report
from yolo_optimize.families import family_named
from yolo_optimize.images import list_images
from yolo_optimize.metadata import FLOAT_INPUT
from yolo_optimize.optimize.calibration import calibration_inputs
from yolo_optimize.optimize.int8_executorch import quantized

pytest.importorskip("executorch", reason="the executorch target needs executorch: pip install 'yolo-optimize[edge]'")

YOLOV5 = family_named("yolov5")


def test_the_head_is_left_in_float_and_the_scores_stay_close_to_float() -> None:
    """Through the quantizer's filter alone, the head's last concatenation (boxes in pixels beside scores in 0..1)
    was quantized on one scale: scores off by 0.5 at the 99.9th percentile, 17.8 points of mAP lost. Here the scores
    of two validation images stay within INT8 noise."""
    module, example = warmed_up(resolve_source(str(WEIGHTS)), FLOAT_INPUT, EDGE_SIZE)
    kept = YOLOV5.float_module(module)
    assert kept == "model.model.24"
    images = calibration_inputs(YOLOV5, tuple(list_images(CALIB_DATA)[:4]), EDGE_SIZE)
    program, convolutions = quantized(module, example, kept, images)
    assert convolutions == [57, 60]
    tests = calibration_inputs(YOLOV5, tuple(list_images(VAL_DATA)[:2]), EDGE_SIZE)
    with torch.no_grad():
        got = np.concatenate([program.module()(torch.from_numpy(x)).numpy() for x in tests])
        want = np.concatenate([module(torch.from_numpy(x)).numpy() for x in tests])
    assert float(np.quantile(np.abs(got[..., 4:] - want[..., 4:]), 0.999)) < 0.15


@pytest.mark.slow
def test_an_int8_program_passes_its_gate_and_runs_its_convolutions_in_int8(built_edge_int8: Path) -> None:
    manifest = Manifest.read(built_edge_int8 / "executorch-int8")
    assert_gated_yolov5n_int8(manifest)
    program = next((built_edge_int8 / "executorch-int8").glob("*.pte")).stat().st_size
    assert program < 0.4 * next((built_edge_int8 / "executorch-fp32").glob("*.pte")).stat().st_size


@pytest.mark.slow
def test_the_int8_row_scores_close_to_pytorch_in_an_evaluation(edge_int8_evaluated: Report) -> None:
    """The drop recomputed by the evaluator on 32 coco_val128 images, apart from the build's gate: within 5 points
    (the gate allowed 3 on its own 24 images; the head quantized on one scale lost 17.8)."""
    rows = {row.name: row for row in edge_int8_evaluated.rows}
    row, baseline = rows["executorch-int8"], rows["pytorch-fp32"]
    assert not row.error and row.accuracy and baseline.accuracy
    assert baseline.accuracy.map50_95 - row.accuracy.map50_95 < 0.05
    assert row.measurements[0].executed_precision == "int8+fp32 (57 of 60 convolutions in int8)"


def lowered_outside(program: torch.export.ExportedProgram) -> list[str]:
    """The modules whose int8-weight operators XNNPACK left outside it, after the program was written (it fails on
    any quantize or dequantize left outside)."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    from yolo_optimize.export.executorch import quantized_fallback

    edge = to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()])
    left = quantized_fallback(edge.exported_program().graph_module)
    if not left:
        edge.to_executorch()
    return left


class ConcatHead(torch.nn.Module):
    """Ends in a concatenation, which XNNPACK's quantizer annotates whatever its filter says."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, x.sigmoid()], 1)


class Detector(torch.nn.Module):
    """Three convolutions, then ``head``, kept in float, then a flatten outside it."""

    def __init__(self, head: torch.nn.Module) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.body = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                                        torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 6, 1))
        self.head = head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x)).flatten(1)


class Encoder(torch.nn.Module):
    """Self-attention whose values differ from its queries and keys (RT-DETR's encoder): nn.MultiheadAttention then
    splits its packed projection weight into three in the graph."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.attention = torch.nn.MultiheadAttention(16, 2, batch_first=True)
        self.out = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.conv(x).flatten(2).transpose(1, 2)
        query = tokens + 0.5
        return self.out(self.attention(query, query, tokens)[0])


class ClassIndex(torch.nn.Module):
    """The top scores' classes as RT-DETR's decoder computes them from flat indices, in integer arithmetic."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 10, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scores = self.conv(x).mean((2, 3)).flatten()
        index = scores.topk(4).indices
        return torch.cat([scores[index], index.to(torch.float32), (index - index // 5 * 5).to(torch.float32)])


IMAGES = [np.random.default_rng(seed).random((1, 3, 32, 32), np.float32) for seed in range(4)]
EXAMPLE = torch.from_numpy(IMAGES[0])


@pytest.mark.parametrize(("model", "kept", "convolutions"), [
    (Detector(ConcatHead()), "head", [3, 3]),  # the flatten after it shared the removed cat's scale: KeyError
    (Encoder(), None, [1, 1]),  # the attention's three projections from one packed weight
])
def test_what_the_quantizer_leaves_unrunnable_is_mended_so_xnnpack_takes_every_int8_weight(
        model: torch.nn.Module, kept: str | None, convolutions: list[int]) -> None:
    """RT-DETR's prepare and its encoder's attention, on small modules of the same shape: every int8 weight ends in
    XNNPACK and the program is written."""
    program, counted = quantized(model.eval(), EXAMPLE, kept, IMAGES)
    assert counted == convolutions
    assert lowered_outside(program) == []


def test_integer_arithmetic_keeps_its_integer_scalars() -> None:
    """XNNPACK's quantizer turns every scalar of an add or a multiplication into a float tensor: RT-DETR's class
    index became a float that its export's dtype check refused. The program computes the classes of its indices."""
    program, _ = quantized(ClassIndex().eval(), EXAMPLE, None, IMAGES)
    with torch.no_grad():
        _, index, classes = program.module()(EXAMPLE).round().split(4)  # the values of a quantized concatenation
    assert torch.equal(classes, index % 5)


def test_weights_upstream_of_a_head_that_writes_in_place_are_int8_constants() -> None:
    """YOLOv7-tiny's head writes its boxes into its output (``y[..., 0:2] = ...``): torchao's folder took the six
    convolutions before it for producers of a mutable tensor and left their weights float, quantized at run time,
    which XNNPACK does not take. At 64 pixels (the graph is the same at any size), every weight is an int8
    constant."""
    source = resolve_source("yolov7-tiny", random_weights=True)
    module, example = warmed_up(source, FLOAT_INPUT, 64)
    family = family_named(source.family)
    images = calibration_inputs(family, tuple(list_images(CALIB_DATA)[:2]), 64)
    program, convolutions = quantized(module, example, family.float_module(module), images)
    assert convolutions == [55, 58]
    quantized_at_run_time = [node.name for node in program.graph.nodes if "quantize_per_channel" in str(node.target)
                             and not str(node.target).startswith("quantized_decomposed.dequantize")]
    assert quantized_at_run_time == []
