"""The build's checks on an emulated core: a sound FP32 file passes parity there, an INT8 file with one scale wrong
fails it with the core named, and a build with --check-on records parity, "runs in" and the INT8 gate from the core
beside this machine's. Needs the ARM side (``sudo optimize arm-setup``; CI makes it)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import CHECKED_ON, arm_side_missing, one_weight_scale_times_8, parity_context
from yolo_optimize.arm.cores import CORES
from yolo_optimize.artifact import Manifest
from yolo_optimize.building.arm_checks import parity_on_arm
from yolo_optimize.building.node_worker import checked_on_arm

pytestmark = pytest.mark.skipif(bool(arm_side_missing()), reason=f"the ARM side is not ready here: "
                                                                   f"{arm_side_missing()} (sudo optimize arm-setup)")


def test_an_fp32_file_passes_parity_on_the_pi_4_core(built: Path) -> None:
    folder = built / "onnx-fp32"
    parity = parity_on_arm(folder, Manifest.read(folder), parity_context(built, folder), CORES["cortex-a72"])
    assert parity["passed"] and parity["core"] == "cortex-a72" and parity["emulated"] is True
    assert parity["executed_precision"] == "fp32" and parity["tolerance"]["precision"] == "fp32"
    assert parity["max_abs_diff_scores"] < 1e-3 and parity["images"] == 4 and parity["seconds"] > 0
    assert not parity["features"]["asimddp"] and parity["letterbox"]["max_abs_diff_levels"] >= 0


def test_an_int8_file_with_one_scale_wrong_fails_parity_naming_the_core(built_int8: Path, tmp_path: Path) -> None:
    broken = tmp_path / "onnx-int8"
    shutil.copytree(built_int8 / "onnx-int8", broken)
    one_weight_scale_times_8(broken / "yolov5n.onnx")
    with pytest.raises(RuntimeError) as failure:
        parity_on_arm(broken, Manifest.read(broken), parity_context(built_int8, broken), CORES["cortex-a76"])
    message = str(failure.value)
    assert message.startswith("parity failed on cortex-a76 (emulated) (runs in int8+fp32") and "\n" not in message


def test_a_build_checked_on_a_core_records_parity_runs_in_and_the_gate_from_it(built_edge_int8: Path) -> None:
    ncnn = Manifest.read(built_edge_int8 / "ncnn-int8")
    assert ncnn.parity is not None
    on_arm = ncnn.parity["on_arm"][CHECKED_ON]
    assert on_arm["passed"] and on_arm["emulated"] and on_arm["features"]["asimddp"]
    assert on_arm["executed_precision"] == "int8+fp32 (57 of 60 convolutions in int8)"
    gate = ncnn.info["gate"]
    arm_gate = gate["on_arm"][CHECKED_ON]
    assert arm_gate["passed"] and arm_gate["route"] == f"on {CHECKED_ON}" and arm_gate["emulated"]
    assert arm_gate["fp32_score"] == gate["fp32_score"] and abs(arm_gate["score"] - gate["score"]) < 0.05
    assert re.fullmatch(rf"parity and gate passed on {CHECKED_ON} \(emulated, \d+ s\)", checked_on_arm(ncnn))
    executorch = Manifest.read(built_edge_int8 / "executorch-int8")
    assert executorch.parity and executorch.parity["on_arm"][CHECKED_ON] == {
        "checked": False, "why": "not checked: executorch has no aarch64 wheel the ARM side runs"}
    assert checked_on_arm(executorch) == ""
