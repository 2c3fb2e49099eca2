"""TorchScript: metadata in _extra_files, plain torch.jit.load at batch 1 and 8."""

from __future__ import annotations

import json
from pathlib import Path

import torch


def test_plain_torch_jit_load_reads_metadata_and_runs(built: Path) -> None:
    extra = {"config.txt": ""}
    module = torch.jit.load(str(built / "torchscript-fp32" / "yolov5n.torchscript"), _extra_files=extra)
    metadata = json.loads(extra["config.txt"])
    assert metadata["names"][0] == "person" and metadata["precision"] == "fp32" and metadata["stride"] == 32
    with torch.no_grad():
        for batch in (1, 8):
            assert module(torch.zeros(batch, 3, 640, 640))[0].shape == (batch, 25200, 85)


def test_fp16_is_skipped_with_its_reason_on_cpu(built: Path) -> None:
    if torch.cuda.is_available():
        assert (built / "torchscript-fp16" / "manifest.json").is_file()
    else:
        assert not (built / "torchscript-fp16").exists()
