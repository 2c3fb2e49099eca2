"""The PyTorch profiler's per-layer times, eager and TorchScript: each op a pass calls is one layer, once."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from yolo_optimize.runtime.runners.torch_profile import CONVOLUTIONS, torch_layer_profile

RUNS = 4


@pytest.mark.parametrize("scripted", [False, True], ids=["eager", "torchscript"])
def test_a_pass_gives_each_of_its_ops_once_and_they_add_up_to_no_more_than_the_pass(tmp_path: Path,
                                                                                     scripted: bool) -> None:
    """TorchScript wraps its ops in a ``forward`` scope of its own: looked through, never a layer of its own, so the
    layers' sum stays within the pass they were taken in."""
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.SiLU(),
                                torch.nn.Conv2d(16, 16, 3, padding=1)).eval()
    module = torch.jit.script(model) if scripted else model
    batch = torch.rand(1, 3, 96, 96)

    def forward() -> torch.Tensor:
        with torch.inference_mode():
            return module(batch)

    profile = torch_layer_profile(forward, RUNS, tmp_path / "trace.json", "fp32")
    kinds = [layer.kind for layer in profile.layers]
    assert sum(kind in CONVOLUTIONS for kind in kinds) == 2 and sum("silu" in kind for kind in kinds) == 1, kinds
    assert all("::" in kind for kind in kinds), kinds
    assert len(profile.passes_ms) == RUNS and 0 < sum(layer.ms for layer in profile.layers) <= profile.pass_ms
    assert [layer.gflops for layer in profile.layers if layer.kind in CONVOLUTIONS] == pytest.approx(
        [2 * 3 * 9 * 16 * 96 * 96 / 1e9, 2 * 16 * 9 * 16 * 96 * 96 / 1e9], rel=0.01)
