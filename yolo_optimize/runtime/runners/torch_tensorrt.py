"""torch-tensorrt ExportedPrograms (export/torch_tensorrt.py): loaded by ``torch_tensorrt.load`` and run on CUDA like
any PyTorch module, only on the TensorRT version and GPU that compiled them."""

from __future__ import annotations

from yolo_optimize.runtime.runners.torch_module import TorchModuleRunner
from yolo_optimize.runtime.tensorrt_api import engine_refused_here, torch_tensorrt_unavailable_reason


class TorchTensorRTRunner(TorchModuleRunner):
    @classmethod
    def unavailable_reason(cls, device: str) -> str | None:
        """Its engines run on CUDA only: on another device the row is skipped, never measured against a CPU
        baseline."""
        if device != "cuda":
            return f"torch-tensorrt programs run on a CUDA GPU; this evaluation runs on {device} (--device cuda)"
        return torch_tensorrt_unavailable_reason()

    def activate(self) -> None:
        reason = self.unavailable_reason(self.device) or engine_refused_here(self.manifest.info)
        if reason:
            raise RuntimeError(reason)
        import torch_tensorrt

        self.module = torch_tensorrt.load(str(self.entry)).module()
        self.dtype = self.input_dtype()
        self.prepare_device()
