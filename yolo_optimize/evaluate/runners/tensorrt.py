"""TensorRT engines, run through torch CUDA buffers."""

from __future__ import annotations

import numpy as np

from yolo_optimize.evaluate.runners.base import Runner
from yolo_optimize.export.tensorrt import TensorRTSession


class TensorRTRunner(Runner):
    session: TensorRTSession | None = None

    def activate(self) -> None:
        self.session = TensorRTSession(self.entry)

    def infer(self, images: np.ndarray) -> np.ndarray:
        assert self.session is not None
        return self.session.infer(images)

    def deactivate(self) -> None:
        if self.session is not None:
            self.session.close()
        self.session = None
