"""ONNX Runtime: CPU execution provider, CUDA/TensorRT providers when present and asked for."""

from __future__ import annotations

import platform
from typing import Any

import numpy as np

from yolo_optimize.evaluate.runners.base import Runner


X86 = ("x86_64", "AMD64", "i686")


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

    @property
    def executed_precision(self) -> str:
        """x86 CPU kernels have no FP16 convolutions: ORT inserts casts and computes FP16 graphs in FP32."""
        precision = self.manifest.precision or "fp32"
        on_x86_cpu = self.session.get_providers()[0] == "CPUExecutionProvider" and platform.machine() in X86
        if precision == "fp16" and on_x86_cpu:
            return "fp32 (fp16 cast up)"
        return "int8+fp32" if precision == "int8" else precision

    def infer(self, images: np.ndarray) -> np.ndarray:
        return self.session.run(None, {self.input_name: images})[0]

    def deactivate(self) -> None:
        self.session = None
