"""ONNX Runtime: CPU execution provider, CUDA/TensorRT providers when present and asked for.

For an INT8 file, what ONNX Runtime executes is read back from the graph it optimized: it
computes a convolution in int8 only where it could fuse ``DequantizeLinear -> Conv ->
QuantizeLinear`` into an integer kernel; elsewhere it dequantizes and convolves in float.
"""

from __future__ import annotations

import json
import platform
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from yolo_optimize.evaluate.layers import (
    WEIGHT_INPUT,
    LayerProfile,
    LayerTime,
    weighted_gflops,
)
from yolo_optimize.evaluate.runners.base import Runner

X86 = ("x86_64", "AMD64", "i686")
INTEGER_OPS = ("QLinearConv", "ConvInteger", "MatMulInteger", "QLinearMatMul", "MatMulIntegerToFloat",
               "DynamicQuantizeLinear", "QLinearAdd", "QLinearMul", "QLinearConcat", "QLinearSigmoid")


class OnnxRuntimeRunner(Runner):
    session: Any = None

    def activate(self) -> None:
        import onnxruntime as ort

        options = self._options(ort)
        with tempfile.TemporaryDirectory(prefix="yolo-optimize-ort-") as work:
            if self.file_precision == "int8":
                options.optimized_model_filepath = str(Path(work) / "optimized.onnx")
                options.log_severity_level = 3  # its warning that the copy is hardware-specific: it is only read here
            self.session = ort.InferenceSession(str(self.entry), options, providers=self._providers(ort))
            self.convolutions = _convolution_kernels(options.optimized_model_filepath)
        self.input_name = self.session.get_inputs()[0].name

    def _options(self, ort: Any) -> Any:
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        return options

    def profile_layers(self, images: np.ndarray, runs: int, trace: Path) -> LayerProfile:
        """ONNX Runtime's own profiler: its JSON is a Chrome trace; node times over the last ``runs`` model runs."""
        import onnxruntime as ort

        options = self._options(ort)
        with tempfile.TemporaryDirectory(prefix="yolo-optimize-ort-profile-") as work:
            options.enable_profiling = True
            options.profile_file_prefix = str(Path(work) / "ort")
            session = ort.InferenceSession(str(self.entry), options, providers=self._providers(ort))
            for _ in range(2 + runs):
                session.run(None, {self.input_name: images})
            shutil.copy(session.end_profiling(), trace)
        return LayerProfile(_node_times(json.loads(trace.read_text()), runs, self.compute_precision), runs,
                            "ONNX Runtime's own profile: every node of every run, warm-up runs included")

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

    @property
    def weight_bytes(self) -> int:
        """The ONNX file's initializers (where ONNX keeps weights), at their stored types."""
        import onnx
        from onnx import numpy_helper

        graph = onnx.load(str(self.entry)).graph
        return sum(numpy_helper.to_array(tensor).nbytes for tensor in graph.initializer)

    def deactivate(self) -> None:
        self.session = None


def _node_times(events: list[dict[str, Any]], runs: int, float_precision: str) -> list[LayerTime]:
    """Mean time per run of every node, over the last ``runs`` ``model_run`` spans of ONNX Runtime's profile."""
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("name") == "model_run")[-runs:]
    totals: dict[str, list[Any]] = {}
    for event in events:
        name = event.get("name", "")
        if event.get("cat") != "Node" or not name.endswith("_kernel_time"):
            continue
        if any(start <= event["ts"] <= end for start, end in spans):
            args = event.get("args", {})
            entry = totals.setdefault(name.removesuffix("_kernel_time"), [args.get("op_name", ""), 0.0,
                                                                          args.get("provider", ""), _gflops(args)])
            entry[1] += event["dur"]
    return [LayerTime(name, op, round(us / runs / 1e3, 4), "int8" if op in INTEGER_OPS else float_precision, provider,
                      gflops) for name, (op, us, provider, gflops) in totals.items()]


def _gflops(args: dict[str, Any]) -> float | None:
    """A weighted node's operations from the shapes ONNX Runtime's profile records (``[{"float": [...]}]``)."""
    index = WEIGHT_INPUT.get(args.get("op_name", ""))
    inputs, outputs = args.get("input_type_shape", []), args.get("output_type_shape", [])
    if index is None or len(inputs) <= index or not outputs:
        return None
    return weighted_gflops(next(iter(inputs[index].values())), next(iter(outputs[0].values())))


def _convolution_kernels(optimized: str) -> tuple[int, int]:
    """(integer, all) convolution kernels in the graph ONNX Runtime wrote after optimizing; (0, 0) if none."""
    if not optimized:
        return 0, 0
    import onnx

    kinds = [node.op_type for node in onnx.load(optimized, load_external_data=False).graph.node if "Conv" in node.op_type]
    return sum(kind in ("QLinearConv", "ConvInteger") for kind in kinds), len(kinds)
