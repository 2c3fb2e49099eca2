"""TorchScript: ``torch.jit.load`` on CPU or CUDA, input dtype from the embedded metadata."""

from __future__ import annotations

from typing import Any

import numpy as np

from yolo_optimize.evaluate.runners.base import Runner


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

    def deactivate(self) -> None:
        self.module = None
