"""The one interface every runtime implements; nothing else in the evaluator is format-specific."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from types import TracebackType

import numpy as np

from yolo_optimize.artifact import Manifest
from yolo_optimize.evaluate.layers import LayerProfile
from yolo_optimize.evaluate.runners.cuda_phases import CudaPhases


class Runner(ABC):
    """``activate`` loads, ``infer`` maps float32 NCHW [0, 1] images to [B, anchors, 5 + nc], ``deactivate`` frees."""

    phases: CudaPhases | None = None  # set by a runner on CUDA: each call's copies and compute (cuda_phases.py)

    @classmethod
    def unavailable_reason(cls, device: str) -> str | None:
        """Why this runtime cannot run on ``device`` here (checked before any process starts); None if it can."""
        return None

    def __init__(self, folder: Path, manifest: Manifest, *, device: str = "cpu", threads: int = 1) -> None:
        self.folder, self.manifest, self.device, self.threads = folder, manifest, device, threads

    @property
    def entry(self) -> Path:
        assert self.manifest.entry, f"{self.manifest.node} has no entry file"
        return self.folder / self.manifest.entry

    @property
    def file_precision(self) -> str:
        return self.manifest.precision or "fp32"

    @property
    def compute_precision(self) -> str:
        """The precision of the float arithmetic as the runtime reports it (for INT8 files: their float parts)."""
        return self.file_precision

    @property
    def precision_note(self) -> str:
        """Why the compute precision differs from the file's, when it does."""
        return ""

    @property
    def executed_precision(self) -> str:
        """The label shown everywhere: ``int8+fp32``, ``bf16``, ``fp32 (fp16 cast up)``..."""
        if self.file_precision == "int8":
            return f"int8+{self.compute_precision}"
        return f"{self.compute_precision} ({self.precision_note})" if self.precision_note else self.compute_precision

    @property
    def weight_bytes(self) -> int | None:
        """Bytes of the weights the runtime loaded, in the file's own precision (int8 weights are one byte each):
        what a deployment holds, apart from the file's size. None where the runtime cannot tell."""
        return None

    @abstractmethod
    def activate(self) -> None: ...

    @abstractmethod
    def infer(self, images: np.ndarray) -> np.ndarray: ...

    @abstractmethod
    def deactivate(self) -> None: ...

    def profile_layers(self, images: np.ndarray, runs: int, trace: Path) -> LayerProfile:
        """Per-layer time of ``runs`` forward passes of ``images`` (after warm-up) by the runtime's own profiler,
        and a Chrome-trace file at ``trace``. Runtimes without a per-layer profiler say so."""
        raise NotImplementedError(f"no per-layer profiler for {self.manifest.target}")

    def __enter__(self) -> Runner:
        self.activate()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.deactivate()
