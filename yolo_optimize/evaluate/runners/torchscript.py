"""TorchScript: ``torch.jit.load`` on CPU or CUDA, input dtype from the embedded metadata."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from yolo_optimize.evaluate.layers import LayerProfile
from yolo_optimize.evaluate.runners.base import Runner
from yolo_optimize.evaluate.runners.torch_profile import (
    state_bytes,
    torch_layer_profile,
)


class TorchScriptRunner(Runner):
    module: Any = None

    def activate(self) -> None:
        import torch

        torch.set_num_threads(self.threads)
        self.module = torch.jit.load(str(self.entry), map_location=self.device).eval()
        self.dtype = torch.float16 if self.manifest.precision == "fp16" else torch.float32

    def infer(self, images: np.ndarray) -> np.ndarray:
        import torch

        with torch.inference_mode():
            batch = torch.from_numpy(images).to(self.device, self.dtype)
            return self.module(batch).float().cpu().numpy()

    def profile_layers(self, images: np.ndarray, runs: int, trace: Path) -> LayerProfile:
        import torch

        batch = torch.from_numpy(images).to(self.device, self.dtype)

        def forward() -> Any:
            with torch.inference_mode():
                return self.module(batch)

        return torch_layer_profile(forward, runs, trace, self.compute_precision)

    @property
    def weight_bytes(self) -> int:
        return state_bytes(self.module)

    def deactivate(self) -> None:
        self.module = None
