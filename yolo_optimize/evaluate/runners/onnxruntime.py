"""ONNX Runtime: CPU execution provider, CUDA/TensorRT providers when present and asked for."""

from __future__ import annotations

from typing import Any

import numpy as np

from yolo_optimize.evaluate.runners.base import Runner


class OnnxRuntimeRunner(Runner):
    session: Any = None

    def activate(self) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(str(self.entry), options, providers=self._providers(ort))
        self.input_name = self.session.get_inputs()[0].name

    def _providers(self, ort: Any) -> list[str]:
        available = ort.get_available_providers()
        wanted = ["CUDAExecutionProvider"] if self.device == "cuda" else []
        return [p for p in wanted if p in available] + ["CPUExecutionProvider"]

    def infer(self, images: np.ndarray) -> np.ndarray:
        return self.session.run(None, {self.input_name: images})[0]

    def deactivate(self) -> None:
        self.session = None
