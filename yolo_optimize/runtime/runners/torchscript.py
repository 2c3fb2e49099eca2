"""TorchScript: ``torch.jit.load`` on CPU or CUDA, input dtype from the embedded metadata."""

from __future__ import annotations

from yolo_optimize.runtime.runners.torch_module import TorchModuleRunner


class TorchScriptRunner(TorchModuleRunner):
    def activate(self) -> None:
        import torch

        torch.set_num_threads(self.threads)
        self.module = torch.jit.load(str(self.entry), map_location=self.device).eval()
        self.dtype = self.input_dtype()
        self.prepare_device()
