"""The baseline: PyTorch FP32 eager, from the very checkpoint the artifacts were built from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from yolo_optimize.checkpoint import ModelSource, file_sha256
from yolo_optimize.evaluate.runners.base import Runner


class TorchEagerRunner(Runner):
    model: Any = None

    def activate(self) -> None:
        import torch

        from yolo_optimize.checkpoint import load_model

        torch.set_num_threads(self.threads)
        self.model = load_model(self._source()).to(self.device)

    def _source(self) -> ModelSource:
        """The source recorded by the build's load node, checked to be the same bytes."""
        if "source" not in self.manifest.info:
            raise RuntimeError("the build record has no source checkpoint; rebuild with 'optimize build --force'")
        recorded = dict(self.manifest.info["source"])
        checkpoint = Path(recorded["checkpoint"]) if recorded["checkpoint"] else None
        if checkpoint is not None and (not checkpoint.is_file() or file_sha256(checkpoint) != recorded["identity"]):
            raise RuntimeError(f"the checkpoint the artifacts were built from is gone or changed: {checkpoint}")
        return ModelSource(**{**recorded, "checkpoint": checkpoint})

    def infer(self, images: np.ndarray) -> np.ndarray:
        import torch

        with torch.inference_mode():
            return self.model(torch.from_numpy(images).to(self.device)).cpu().numpy()

    def deactivate(self) -> None:
        self.model = None
