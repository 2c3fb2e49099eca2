"""ONNX Runtime: CPU execution provider, CUDA/TensorRT providers when present and asked for.

For an INT8 file, what ONNX Runtime executes is read back from the graph it optimized: it
computes a convolution in int8 only where it could fuse ``DequantizeLinear -> Conv ->
QuantizeLinear`` into an integer kernel; elsewhere it dequantizes and convolves in float.
"""

from __future__ import annotations

import platform
import tempfile
from pathlib import Path
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
        with tempfile.TemporaryDirectory(prefix="yolo-optimize-ort-") as work:
            if self.file_precision == "int8":
                options.optimized_model_filepath = str(Path(work) / "optimized.onnx")
                options.log_severity_level = 3  # its warning that the copy is hardware-specific: it is only read here
            self.session = ort.InferenceSession(str(self.entry), options, providers=self._providers(ort))
            self.convolutions = _convolution_kernels(options.optimized_model_filepath)
        self.input_name = self.session.get_inputs()[0].name

    def _providers(self, ort: Any) -> list[str]:
        available = ort.get_available_providers()
        wanted = ["CUDAExecutionProvider"] if self.device == "cuda" else []
        return [p for p in wanted if p in available] + ["CPUExecutionProvider"]

    @property
    def compute_precision(self) -> str:
        """x86 CPU kernels have no FP16 convolutions: ORT inserts casts and computes FP16 graphs in FP32."""
        if self.file_precision == "int8" or (self.file_precision == "fp16" and self._on_x86_cpu):
            return "fp32"
        return self.file_precision

    @property
    def executed_precision(self) -> str:
        if self.file_precision != "int8":
            return super().executed_precision
        integer, total = self.convolutions
        if integer == 0:
            return "fp32 (int8 file, convolutions dequantized to float)"
        return "int8+fp32" if integer == total else f"int8+fp32 ({integer} of {total} convolutions in int8)"

    @property
    def precision_note(self) -> str:
        return "fp16 cast up" if self.file_precision == "fp16" and self.compute_precision == "fp32" else ""

    @property
    def _on_x86_cpu(self) -> bool:
        return self.session.get_providers()[0] == "CPUExecutionProvider" and platform.machine() in X86

    def infer(self, images: np.ndarray) -> np.ndarray:
        return self.session.run(None, {self.input_name: images})[0]

    def deactivate(self) -> None:
        self.session = None


def _convolution_kernels(optimized: str) -> tuple[int, int]:
    """(integer, all) convolution kernels in the graph ONNX Runtime wrote after optimizing; (0, 0) if none."""
    if not optimized:
        return 0, 0
    import onnx

    kinds = [node.op_type for node in onnx.load(optimized, load_external_data=False).graph.node if "Conv" in node.op_type]
    return sum(kind in ("QLinearConv", "ConvInteger") for kind in kinds), len(kinds)
