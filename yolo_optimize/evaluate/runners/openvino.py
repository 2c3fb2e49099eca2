"""OpenVINO: each artifact computes in the precision its name promises (export/openvino.py's EXECUTION_HINTS),
read back from the compiled model.

The IR has a dynamic batch; like ``benchmark_app -shape`` and a fixed-batch deployment,
the runner compiles one static-shape model per batch size it meets (the first call at a
new size pays for that compile, which warm-up absorbs).
"""

from __future__ import annotations

import json
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
from yolo_optimize.export.openvino import EXECUTION_HINTS

OV_PRECISIONS = {"f32": "fp32", "fp32": "fp32", "f16": "fp16", "fp16": "fp16", "bf16": "bf16", "i8": "int8",
                 "u8": "int8"}  # OpenVINO's element type names (and its exec types' suffixes), lowercased -> ours


class OpenVinoRunner(Runner):
    compiled: Any = None

    def activate(self) -> None:
        import openvino as ov

        self.core = ov.Core()
        self.config: dict[str, Any] = {"INFERENCE_NUM_THREADS": self.threads, "PERFORMANCE_HINT": "LATENCY",
                                       "INFERENCE_PRECISION_HINT": EXECUTION_HINTS[self.file_precision]}
        self.target = "GPU" if self.device == "cuda" and "GPU" in self.core.available_devices else "CPU"
        self.model = self.core.read_model(str(self.entry))
        self.requests: dict[int, Any] = {}
        self._request(1)

    def _request(self, batch: int) -> Any:
        if batch not in self.requests:
            model = self.model.clone()
            model.reshape({0: [batch, *self.model.input(0).partial_shape[1:].to_shape()]})
            self.compiled = self.core.compile_model(model, self.target, self.config)
            self.requests[batch] = self.compiled.create_infer_request()
        return self.requests[batch]

    @property
    def compute_precision(self) -> str:
        precision = self.compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name()
        return ov_precision(precision)

    @property
    def precision_note(self) -> str:
        if self.file_precision == "bf16" and self.compute_precision != "bf16":
            return "no native bf16 on this CPU"
        return "fp16 weights" if self.file_precision == "fp16" else ""

    def infer(self, images: np.ndarray) -> np.ndarray:
        """The output is a view of the request's buffer, valid until the next call at this batch size."""
        return self._request(len(images)).infer({0: images}, share_inputs=True, share_outputs=True)[0]

    def profile_layers(self, images: np.ndarray, runs: int, trace: Path) -> LayerProfile:
        """OpenVINO's per-layer performance counters (``PERF_COUNT``), summed over ``runs`` inferences.

        OpenVINO keeps no timeline, so the trace lays each inference's executed layers end to end in
        execution order with their measured durations (its metadata says so).
        """
        model = self.model.clone()
        model.reshape({0: list(images.shape)})
        compiled = self.core.compile_model(model, self.target, {**self.config, "PERF_COUNT": True})
        request = compiled.create_infer_request()
        for _ in range(2):
            request.infer({0: images})
        totals: dict[str, list[Any]] = {}
        events: list[dict[str, Any]] = []
        clock = 0.0
        for run in range(runs):
            request.infer({0: images})
            for info in request.get_profiling_info():
                if info.status != info.Status.EXECUTED:
                    continue
                us = info.real_time.total_seconds() * 1e6
                entry = totals.setdefault(info.node_name, [info.node_type, 0.0, info.exec_type])
                entry[1] += us
                events.append({"name": info.node_name, "cat": info.node_type, "ph": "X", "ts": clock, "dur": us,
                               "pid": 0, "tid": 0, "args": {"exec_type": info.exec_type, "run": run}})
                clock += us
        trace.write_text(json.dumps({"traceEvents": events, "otherData": {
            "source": "OpenVINO per-layer performance counters, laid end to end per inference (not a timeline)"}}))
        operations = _layer_gflops(compiled.get_runtime_model())
        layers = [LayerTime(name, kind, round(us / runs / 1e3, 4), _exec_precision(kernel), kernel,
                            operations.get(name)) for name, (kind, us, kernel) in totals.items()]
        return LayerProfile(layers, runs, "OpenVINO's per-layer counters laid end to end in execution order")

    @property
    def weight_bytes(self) -> int:
        """The IR's constants (its weights, and the scales of an INT8 IR), at their stored types."""
        return sum(op.get_byte_size() for op in self.model.get_ops() if op.get_type_name() == "Constant")

    def deactivate(self) -> None:
        self.requests, self.compiled, self.model = {}, None, None


def _layer_gflops(runtime_model: Any) -> dict[str, float]:
    """Each weighted layer's operations from the static shapes of the graph the CPU plugin executes (its layer
    names are the performance counters' names)."""
    operations = {}
    for op in runtime_model.get_ordered_ops():
        index = WEIGHT_INPUT.get(str(op.get_rt_info()["layerType"].astype(str)))
        if index is not None and op.get_input_size() > index:
            weight, output = op.input(index).get_partial_shape(), op.output(0).get_partial_shape()
            if weight.is_static and output.is_static:
                operations[op.get_friendly_name()] = weighted_gflops(weight.to_shape(), output.to_shape())
    return operations


def _exec_precision(exec_type: str) -> str:
    """``jit_avx2_FP32`` -> fp32, ``brgconv_avx512_I8`` -> int8: OpenVINO names the precision last."""
    return ov_precision(exec_type.rsplit("_", 1)[-1])


def ov_precision(name: str) -> str:
    """An OpenVINO precision name (``f32``, ``I8``, ``bf16``...) in this project's terms."""
    return OV_PRECISIONS.get(name.lower(), name.lower())
