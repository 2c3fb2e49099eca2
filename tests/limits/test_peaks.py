"""``optimize info``: this machine's limits measured through the runtimes the artifacts use, cached, honest per CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import LIMIT_ROUNDS, brief, optimize
from yolo_optimize.host.cpu import has_native_bf16, has_vnni


@pytest.fixture(scope="module")
def limits(machine_cache: dict[str, str]) -> dict:
    result = optimize("info", "--json", env=machine_cache)
    assert result.returncode == 0, brief(result)
    return json.loads(result.stdout)


def peak(limits: dict, runtime: str, precision: str) -> float:
    return max(p["gops"] for p in limits["peaks"] if p["runtime"] == runtime and p["executed"] == precision)


def test_every_runtime_has_positive_peaks_in_the_precisions_it_executes(limits: dict) -> None:
    assert limits["cpu"]["model"] and limits["threads"] >= 1 and limits["bandwidth_gb_s"] > 1
    measured = {(p["runtime"], p["precision"]) for p in limits["peaks"] if p["gops"]}
    assert {("onnxruntime", "fp32"), ("onnxruntime", "int8"), ("openvino", "fp32"), ("openvino", "int8"),
            ("torch", "fp32"), ("torch", "int8")} <= measured
    for entry in limits["peaks"]:
        if entry["gops"]:
            assert entry["executed"] == entry["precision"], entry  # read back: an int8 kernel really ran in int8
            assert len(entry["rounds_gops"]) == LIMIT_ROUNDS and entry["gops"] == max(entry["rounds_gops"])
        else:
            assert entry["skipped"], entry


def test_bf16_is_measured_exactly_where_the_cpu_has_it(limits: dict) -> None:
    """OpenVINO and PyTorch (AOTInductor's BF16 packages) both, where the CPU computes bf16 natively."""
    bf16 = [p for p in limits["peaks"] if p["runtime"] in ("openvino", "torch") and p["precision"] == "bf16"]
    assert {p["runtime"] for p in bf16} == {"openvino", "torch"}
    if has_native_bf16():
        assert all(p["gops"] and p["executed"] == "bf16" for p in bf16)
    else:
        assert all(p["gops"] is None and "no native bf16" in p["skipped"] for p in bf16)


def test_int8_peak_is_above_the_fp32_peak_on_a_vnni_cpu(limits: dict) -> None:
    if not has_vnni():
        pytest.skip("this CPU has no VNNI: its INT8 kernels need not beat FP32 "
                    f"(measured here: onnxruntime int8 {peak(limits, 'onnxruntime', 'int8'):.0f} vs fp32 "
                    f"{peak(limits, 'onnxruntime', 'fp32'):.0f} GOP/s)")
    for runtime in ("onnxruntime", "openvino", "torch"):
        assert peak(limits, runtime, "int8") > peak(limits, runtime, "fp32"), runtime


def test_limits_are_cached_per_machine_and_shown_as_tables(limits: dict, machine_cache: dict[str, str]) -> None:
    cached = list((Path(machine_cache["XDG_CACHE_HOME"]) / "yolo-optimize" / "machine").glob("limits-*.json"))
    assert len(cached) == 1 and json.loads(cached[0].read_text())["measured_at"] == limits["measured_at"]
    result = optimize("info", env=machine_cache, timeout=60)  # cached: no measuring
    assert result.returncode == 0, brief(result)
    assert "peak rates" in result.stdout and "memory bandwidth" in result.stdout
    assert limits["measured_at"] in result.stdout
