"""TorchScript: metadata in _extra_files, plain torch.jit.load at batch 1 and 8."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from tests.conftest import brief, build_args, optimize, statuses


def test_plain_torch_jit_load_reads_metadata_and_runs(built: Path) -> None:
    extra = {"config.txt": ""}
    module = torch.jit.load(str(built / "torchscript-fp32" / "yolov5n.torchscript"), _extra_files=extra)
    metadata = json.loads(extra["config.txt"])
    assert metadata["names"][0] == "person" and metadata["precision"] == "fp32" and metadata["stride"] == 32
    with torch.no_grad():
        for batch in (1, 8):
            assert module(torch.zeros(batch, 3, 640, 640)).shape == (batch, 25200, 85)  # one tensor, not a tuple


def test_fp16_needs_cuda_and_says_so_without_building_anything_for_it(tmp_path: Path) -> None:
    result = optimize(*build_args(tmp_path, "--targets", "torchscript", "--precisions", "fp16"))
    assert result.returncode == 0, brief(result)
    if torch.cuda.is_available():
        assert statuses(result)["torchscript-fp16"] == "built"
    else:
        assert statuses(result)["torchscript-fp16"] == "skipped"
        assert "FP16 TorchScript needs a CUDA device" in result.stdout
        assert not (tmp_path / "yolov5n" / ".store").exists(), "nothing is built for a node that cannot run"
