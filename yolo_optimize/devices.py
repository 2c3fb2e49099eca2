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
