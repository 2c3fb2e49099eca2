"""The baseline: PyTorch FP32 eager, from the very checkpoint the artifacts were built from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from yolo_optimize.evaluate.discover import recorded_source
from yolo_optimize.evaluate.layers import LayerProfile
from yolo_optimize.evaluate.runners.base import Runner
from yolo_optimize.evaluate.runners.torch_profile import (
    state_bytes,
    torch_layer_profile,
)


class TorchEagerRunner(Runner):
    model: Any = None

    def activate(self) -> None:
        import torch

        from yolo_optimize.checkpoint import load_model

        torch.set_num_threads(self.threads)
        self.model = load_model(recorded_source(self.manifest)).to(self.device)

    def infer(self, images: np.ndarray) -> np.ndarray:
        import torch

        with torch.inference_mode():
            return self.model(torch.from_numpy(images).to(self.device)).cpu().numpy()

    def profile_layers(self, images: np.ndarray, runs: int, trace: Path) -> LayerProfile:
        import torch

        batch = torch.from_numpy(images).to(self.device)

        def forward() -> Any:
            with torch.inference_mode():
                return self.model(batch)

        return torch_layer_profile(forward, runs, trace, self.compute_precision)

    @property
    def weight_bytes(self) -> int:
        return state_bytes(self.model)

    def deactivate(self) -> None:
        self.model = None
