"""TensorRT: skipped with its reason where there is no CUDA device or no TensorRT."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import brief, build_args, optimize
from yolo_optimize.tensorrt_api import tensorrt_unavailable_reason

REASON = tensorrt_unavailable_reason()


def test_build_reports_why_tensorrt_is_skipped(tmp_path: Path) -> None:
    if REASON is None:
        pytest.skip("TensorRT is usable here; the engine test below covers it")
    result = optimize(*build_args(tmp_path, "--targets", "trt", "--precisions", "fp32", "--imgsz", "320"))
    assert result.returncode == 0, brief(result)
    assert "skipped" in result.stdout and ("CUDA" in result.stdout or "TensorRT" in result.stdout)


@pytest.mark.skipif(REASON is not None, reason=f"TensorRT unavailable: {REASON}")
def test_engine_builds_and_passes_parity(tmp_path: Path) -> None:
    result = optimize(*build_args(tmp_path, "--targets", "trt", "--precisions", "fp32,fp16", "--imgsz", "320"))
    assert result.returncode == 0, brief(result)
    assert (tmp_path / "yolov5n" / "tensorrt-fp32" / "yolov5n.engine").is_file()
