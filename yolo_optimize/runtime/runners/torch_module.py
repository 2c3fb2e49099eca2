"""What the two PyTorch runners share once their module is loaded: inference, per-layer profiling, weight bytes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from yolo_optimize.runtime.layers import LayerProfile
from yolo_optimize.runtime.runners.base import Runner
from yolo_optimize.runtime.runners.cuda_phases import CudaPhases
from yolo_optimize.runtime.runners.torch_profile import torch_layer_profile


class TorchModuleRunner(Runner):
    """A runner whose ``activate`` sets ``module`` (eager or TorchScript) and the input ``dtype`` it takes, then
    calls ``prepare_device``."""

    module: Any = None
    dtype: Any = None  # torch.float32, or torch.float16 for an FP16 TorchScript file, torch.uint8 for a uint8 input
    computes_with_torch = True

    def input_dtype(self) -> Any:
        """The torch dtype of the artifact's input, from its metadata (float32 when it says nothing: the baseline)."""
        import torch

        return getattr(torch, self.metadata.takes.dtype)

    def prepare_device(self) -> None:
        """On CUDA: FP32 means FP32 (PyTorch lets cuDNN round FP32 convolutions to TF32 by default, which TensorRT
        engines here may not), and each call's copies and compute are split by CUDA events."""
        import torch

        if self.device == "cuda":
            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cuda.matmul.allow_tf32 = False
            self.phases = CudaPhases()

    def infer(self, images: np.ndarray) -> np.ndarray:
        import torch

        with torch.inference_mode():
            if not self.phases:
                return self.module(torch.from_numpy(images).to(self.device, self.dtype)).float().cpu().numpy()
            self.phases.start()
            batch = torch.from_numpy(images).to(self.device, self.dtype)
            self.phases.mark()
            output = self.module(batch)
            self.phases.mark()
            found = output.float().cpu().numpy()
            self.phases.finish()
            return found

    def profile_layers(self, images: np.ndarray, runs: int, trace: Path) -> LayerProfile:
        import torch

        batch = torch.from_numpy(images).to(self.device, self.dtype)

        def forward() -> Any:
            with torch.inference_mode():
                return self.module(batch)

        return torch_layer_profile(forward, runs, trace, self.compute_precision)

    @property
    def weight_bytes(self) -> int:
        """Parameters and buffers at their stored types (eager and TorchScript alike)."""
        return sum(tensor.numel() * tensor.element_size() for tensor in self.module.state_dict().values())

    def deactivate(self) -> None:
        self.module = None
