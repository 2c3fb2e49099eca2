"""Parity: recorded for every artifact, tight for FP32, and a broken export is caught."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from tests.conftest import brief, build_args, one_weight_scale_times_8, optimize, parity_context, statuses
from yolo_optimize.artifact import Manifest
from yolo_optimize.building.parity import TOLERANCES, check_parity, tolerance_for


@pytest.mark.parametrize("node", ["torchscript-fp32", "onnx-fp32", "openvino-fp32"])
def test_fp32_exports_match_pytorch(built: Path, node: str) -> None:
    parity = Manifest.read(built / node).parity
    assert parity and parity["passed"] and parity["batch_sizes"] == [1, 8]
    assert parity["max_abs_diff_scores"] < 1e-3 and parity["agreement"] >= 0.95
    assert parity["executed_precision"] == "fp32" and parity["tolerance"]["precision"] == "fp32"


def test_broken_export_fails_parity_in_one_readable_line(built: Path, tmp_path: Path) -> None:
    broken = tmp_path / "onnx-fp32"
    shutil.copytree(built / "onnx-fp32", broken)
    model = onnx.load(str(broken / "yolov5n.onnx"))
    head_bias = next(i for i in model.graph.initializer if list(i.dims) == [255])  # a Detect conv's bias
    head_bias.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(head_bias) + np.float32(3), head_bias.name))
    onnx.save(model, str(broken / "yolov5n.onnx"))
    with pytest.raises(RuntimeError) as failure:
        check_parity(broken, Manifest.read(broken), parity_context(built, broken))
    message = str(failure.value)
    assert message.startswith("parity failed (runs in fp32, fp32 tolerance): score diff ") and "\n" not in message
    assert "(at most 0.001)" in message and "Tolerance(" not in message


def test_an_int8_file_with_one_scale_wrong_fails_parity_on_its_scores_and_its_agreement(built_int8: Path,
                                                                                         tmp_path: Path) -> None:
    """onnx-int8 with the weight scale of its middle quantized convolution multiplied by 8, as a faulty quantizer
    could leave it: refused by the check every artifact passes before it is published, on the 99.9th percentile of
    its score differences and on its agreement, each far outside what sound INT8 files show
    (bench/archive/int8_recipes/README.md, "INT8 parity"). The sound file passes the same check."""
    sound = Manifest.read(built_int8 / "onnx-int8").parity
    assert sound and sound["passed"] and sound["p99.9_abs_diff_scores"] <= TOLERANCES["int8"].quantile_limit
    broken = tmp_path / "onnx-int8"
    shutil.copytree(built_int8 / "onnx-int8", broken)
    one_weight_scale_times_8(broken / "yolov5n.onnx")
    with pytest.raises(RuntimeError) as failure:
        check_parity(broken, Manifest.read(broken), parity_context(built_int8, broken))
    found = re.search(r"its 99.9th percentile ([\d.]+) \(at most ([\d.]+)\), agreement of .+ ([\d.]+) "
                      r"\(at least ([\d.]+)\)", str(failure.value))
    message = str(failure.value)
    assert message.startswith("parity failed (runs in int8+fp32") and "int8 tolerance): " in message and found, message
    quantile, limit, agreement, floor = map(float, found.groups())
    assert quantile > limit and agreement < floor


@pytest.mark.parametrize(("file", "compute", "expected"), [
    ("fp32", "fp32", "fp32"), ("fp32", "bf16", "bf16"), ("fp16", "fp32", "fp16"), ("fp16", "bf16", "bf16"),
    ("bf16", "fp32", "bf16"), ("int8", "fp32", "int8"), ("int8", "bf16", "int8"),
])
def test_the_tolerance_follows_the_looser_of_the_file_and_the_arithmetic(file: str, compute: str,
                                                                         expected: str) -> None:
    """An FP32 or FP16 IR that OpenVINO runs in bf16 (its default on BF16 CPUs) is held to bf16's tolerance."""
    assert tolerance_for(file, compute) == TOLERANCES[expected]


@pytest.mark.parametrize(("imgsz", "floor"), [(160, 0.45), (320, 0.45), (416, 0.45), (640, 0.60), (1280, 0.60)])
def test_int8_agreement_floor_is_the_one_measured_for_the_input_size(imgsz: int, floor: float) -> None:
    """Sound INT8 yolov5n files agreed on 0.57 of 4 images' detections at 320 (fewer detections, each weighing more)
    and on 0.78 at 640; one with a weight scale x8 on 0.13 at both (bench/results/xeon-amx/int8_parity/): a 320 file
    is held to 320's floor, never refused by 640's. The other precisions' floors do not depend on the size."""
    assert tolerance_for("int8", "fp32", imgsz).min_agreement == floor
    assert tolerance_for("int8", "fp32", imgsz).quantile_limit == TOLERANCES["int8"].quantile_limit
    assert tolerance_for("fp16", "fp32", imgsz) == TOLERANCES["fp16"]


@pytest.mark.slow
def test_final_detections_that_both_sides_left_empty_are_no_evidence_and_fail_parity(tmp_path: Path) -> None:
    """NMS inside the graph keeping only scores of 0.99 or more: neither PyTorch nor the file keeps a detection on
    the parity images, so their outputs agree only in being empty; the file is not published as checked."""
    result = optimize(*build_args(tmp_path, "--targets", "onnx", "--precisions", "fp32", "--nms", "--nms-conf", "0.99",
                                  "--imgsz", "320", "--batch-sizes", "1"))
    assert result.returncode == 1 and statuses(result)["onnx-fp32"] == "failed", brief(result)
    said = " ".join(result.stdout.split())
    assert "parity has no evidence: neither PyTorch nor the artifact kept a detection" in said
    assert not (tmp_path / "yolov5n-nms" / "onnx-fp32").exists()
