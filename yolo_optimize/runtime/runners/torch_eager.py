"""The baseline: PyTorch eager, from the very checkpoint the artifacts were built from. FP32 everywhere; on a GPU also
FP16 (the model cast with ``.half()``, as GPU users run it: the row they compare compiled artifacts against)."""

from __future__ import annotations

from yolo_optimize.checkpoint import recorded_source
from yolo_optimize.runtime.runners.torch_module import TorchModuleRunner


class TorchEagerRunner(TorchModuleRunner):
    def activate(self) -> None:
        import torch

        from yolo_optimize.checkpoint import load_model

        torch.set_num_threads(self.threads)
        self.module = load_model(recorded_source(self.manifest)).to(self.device)
        self.dtype = torch.float16 if self.file_precision == "fp16" else torch.float32
        self.module = self.module.to(self.dtype)
        self.prepare_device()
