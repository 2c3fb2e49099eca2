"""The baseline: PyTorch FP32 eager, from the very checkpoint the artifacts were built from."""

from __future__ import annotations

from yolo_optimize.checkpoint import recorded_source
from yolo_optimize.runtime.runners.torch_module import TorchModuleRunner


class TorchEagerRunner(TorchModuleRunner):
    def activate(self) -> None:
        import torch

        from yolo_optimize.checkpoint import load_model

        torch.set_num_threads(self.threads)
        self.module = load_model(recorded_source(self.manifest)).to(self.device)
        self.dtype = torch.float32
        self.prepare_device()
