"""Device discovery that does not import torch (the cached path must stay fast)."""

from __future__ import annotations

import glob
import os

from yolo_optimize.errors import UserError

DEVICES = ("auto", "cpu", "cuda")


def cuda_present() -> bool:
    """A quick look for an NVIDIA driver and visible device; torch confirms in the worker."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    return bool(glob.glob("/dev/nvidia[0-9]*"))


def resolve_device(device: str) -> str:
    """'auto' becomes 'cuda' where a GPU is present, else 'cpu'; asking for absent CUDA is an error."""
    if device not in DEVICES:
        raise UserError(f"unknown device {device!r}; choose from {', '.join(DEVICES)}")
    if device == "auto":
        return "cuda" if cuda_present() else "cpu"
    if device == "cuda" and not cuda_present():
        raise UserError("--device cuda: no CUDA device is visible on this machine")
    return device


def gpu_process_mb(device_index: int = 0) -> float | None:
    """This process's memory on the GPU as the driver counts it (NVML): the CUDA context, PyTorch's allocator and
    TensorRT's weights and context memory alike, which ``torch.cuda.max_memory_allocated`` misses. None where
    NVML does not list this process (e.g. another PID namespace)."""
    import pynvml

    pynvml.nvmlInit()
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(device_index)
        used = [p.usedGpuMemory for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle) if p.pid == os.getpid()]
    finally:
        pynvml.nvmlShutdown()
    return round(used[0] / 2**20, 1) if used and used[0] is not None else None

