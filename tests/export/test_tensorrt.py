"""TensorRT: what can be checked without a GPU (the profile plan, the facts an engine is bound to, the skip paths),
and the engine build itself where TensorRT and a GPU are present."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import brief, build_args, optimize, statuses
from yolo_optimize.export.tensorrt import (
    ProfileShape,
    profile_plan,
    timing_cache_path,
)
from yolo_optimize.runtime.tensorrt_api import (
    engine_facts,
    engine_mismatch,
    profile_for,
    tensorrt_unavailable_reason,
)

REASON = tensorrt_unavailable_reason()


def test_build_reports_why_tensorrt_and_torch_tensorrt_are_skipped(tmp_path: Path) -> None:
    if REASON is None:
        pytest.skip("TensorRT is usable here; the engine test below covers it")
    result = optimize(*build_args(tmp_path, "--targets", "trt,torch-tensorrt", "--precisions", "fp32", "--imgsz",
                                  "320"))
    assert result.returncode == 0, brief(result)
    assert statuses(result)["tensorrt-fp32"] == statuses(result)["torch-tensorrt-fp32"] == "skipped"
    lines = result.stdout.splitlines()  # the build picks the CPU on a host without CUDA (REASON says none is usable)
    assert "tensorrt-fp32: skipped TensorRT needs a CUDA device; this build runs on cpu" in lines
    assert "torch-tensorrt-fp32: skipped torch-tensorrt needs a CUDA device; this build runs on cpu" in lines
    assert not (tmp_path / "yolov5n" / "tensorrt-fp32").exists()
    assert not (tmp_path / "yolov5n" / "torch-tensorrt-fp32").exists()


@pytest.mark.skipif(REASON is not None, reason=f"TensorRT unavailable: {REASON}")
def test_engine_builds_and_passes_parity(tmp_path: Path) -> None:
    result = optimize(*build_args(tmp_path, "--targets", "trt", "--precisions", "fp32,fp16", "--imgsz", "320"))
    assert result.returncode == 0, brief(result)
    assert (tmp_path / "yolov5n" / "tensorrt-fp32" / "yolov5n.engine").is_file()


def test_each_requested_batch_size_gets_a_profile_tuned_for_it_and_every_batch_is_served() -> None:
    plan = profile_plan((32, 1, 8), 640)
    assert plan == [ProfileShape(1, 1, 1, 640), ProfileShape(2, 8, 8, 640), ProfileShape(9, 32, 32, 640)]
    assert plan[1].shapes() == ((2, 3, 640, 640), (8, 3, 640, 640), (8, 3, 640, 640))
    recorded = [{"min_batch": p.min_batch, "opt_batch": p.opt_batch, "max_batch": p.max_batch} for p in plan]
    assert [profile_for(recorded, batch) for batch in (1, 2, 8, 9, 32)] == [0, 1, 1, 2, 2]
    with pytest.raises(ValueError, match="batch 33 is outside the engine's profiles"):
        profile_for(recorded, 33)


def test_an_engine_is_refused_on_another_gpu_or_tensorrt_and_keeps_its_own_timing_cache(tmp_path: Path) -> None:
    built = engine_facts("10.16.0", "NVIDIA H100 80GB HBM3", (9, 0))
    assert built == {"tensorrt": "10.16.0", "gpu": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0"}
    assert engine_mismatch(built, dict(built)) is None
    other_gpu = engine_facts("10.16.0", "NVIDIA L4", (8, 9))
    assert engine_mismatch(built, other_gpu) == (
        "the engine was built for another TensorRT or GPU: gpu NVIDIA H100 80GB HBM3 (here NVIDIA L4), "
        "compute_capability 9.0 (here 8.9); rebuild it here with 'optimize build --targets trt'")
    assert "tensorrt unrecorded (here 10.16.0)" in engine_mismatch({}, built)  # type: ignore[operator]  # None only where no engine was built
    assert timing_cache_path(tmp_path, built) != timing_cache_path(tmp_path, other_gpu)
    assert timing_cache_path(tmp_path, built) == timing_cache_path(tmp_path, dict(built))
