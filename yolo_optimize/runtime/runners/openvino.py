"""OpenVINO: each artifact computes in the precision its metadata's ``compile_config`` asks for (the hint the build
chose, export/openvino.py), read back from the compiled model.

The IR has a dynamic batch; like ``benchmark_app -shape`` and a fixed-batch deployment,
the runner compiles one static-shape model per batch size it meets (the first call at a
new size pays for that compile, which warm-up absorbs). In the latency configuration a call
is one request on every thread (the LATENCY hint); in the throughput configuration the model
is compiled for one image with the THROUGHPUT hint, OpenVINO chooses its streams and the
number of requests that keeps them busy, and a call's images are spread over those requests,
each writing its output straight into the call's output array.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from yolo_optimize.metadata import ArtifactMetadata
from yolo_optimize.runtime.layers import (
    WEIGHT_INPUT,
    LayerProfile,
    LayerTime,
    timed_ms,
    weighted_gflops,
)
from yolo_optimize.runtime.runners.base import LATENCY, THROUGHPUT, Execution, Runner, wanted_mode

OV_PRECISIONS = {"f32": "fp32", "fp32": "fp32", "f16": "fp16", "fp16": "fp16", "bf16": "bf16", "i8": "int8",
                 "u8": "int8"}  # OpenVINO's element type names (and its exec types' suffixes), lowercased -> ours
# What each artifact means on CPU, whatever the CPU: fp32 computes in f32 (set explicitly, since OpenVINO
# would use bf16 on CPUs that have it); fp16 is the FP16-compressed IR computed in f32 (half the file, FP32
# arithmetic: pinned, so that it is never silently the same thing as bf16); bf16 computes in bf16 where
# the CPU has it natively (f32 elsewhere, and the runner says so); int8's float parts, the Detect head
# among them, follow the IR's own compile_config (bf16 when built on a CPU with native bf16, else f32:
# optimize/int8_openvino.py). OpenVINO's CPU plugin does not read this hint from the IR (its rt_info
# "runtime_options" carry only KV-cache and dynamic-quantization keys), so the metadata tells a deployer
# to pass it to compile_model, as the runner does.
EXECUTION_HINTS = {"fp32": "f32", "fp16": "f32", "int8": "f32", "bf16": "bf16"}


def compile_config(metadata: ArtifactMetadata) -> dict[str, Any]:
    """What to pass to ``compile_model`` for the artifact to compute as it was built and checked: its metadata's
    ``compile_config`` (INT8 IRs built on a CPU with native bf16 run their float parts in bf16), else its
    precision's hint."""
    return dict(metadata.compile_config or
                {"INFERENCE_PRECISION_HINT": EXECUTION_HINTS[metadata.precision or "fp32"]})



class OpenVinoRunner(Runner):
    has_throughput_mode = True
    compiled: Any = None  # the batch-1 latency model: what the precision is read back from

    @classmethod
    def unavailable_reason(cls, device: str) -> str | None:
        """OpenVINO computes on CPUs (and Intel GPUs, which are not this tool's --device cuda): on a CUDA evaluation
        its CPU speed would be set against a GPU baseline."""
        if device == "cuda":
            return "OpenVINO runs on the CPU, not on a CUDA GPU: evaluate it with --device cpu"
        return None

    def activate(self) -> None:
        import openvino as ov

        self.core = ov.Core()
        self.config: dict[str, Any] = {"INFERENCE_NUM_THREADS": self.threads, **compile_config(self.metadata)}
        self.model = self.core.read_model(str(self.entry))
        self.models: dict[tuple[str, int], Any] = {}
        self.requests: dict[tuple[str, int], list[Any]] = {}
        self.outputs: dict[int, np.ndarray] = {}
        self.compiled = self._compiled(LATENCY, 1)

    def _compiled(self, mode: str, batch: int) -> Any:
        """The model compiled for ``batch`` images per request with ``mode``'s performance hint (once)."""
        if (mode, batch) not in self.models:
            model = self.model.clone()
            model.reshape({0: [batch, *self.model.input(0).partial_shape[1:].to_shape()]})
            compiled = self.core.compile_model(model, "CPU", {**self.config, "PERFORMANCE_HINT": mode.upper()})
            requests = 1 if mode == LATENCY else compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")
            self.models[(mode, batch)] = compiled
            self.requests[(mode, batch)] = [compiled.create_infer_request() for _ in range(requests)]
        return self.models[(mode, batch)]

    def execution(self, batch: int) -> Execution:
        mode = wanted_mode(self.mode, batch)
        request_batch = batch if mode == LATENCY else self.throughput_request_batch
        compiled = self._compiled(mode, request_batch)
        streams = int(compiled.get_property("NUM_STREAMS"))  # the hint's choice, read back
        return Execution(mode, streams, max(1, self.threads // streams), request_batch,
                         len(self.requests[(mode, request_batch)]), {**self.config, "PERFORMANCE_HINT": mode.upper()})

    @property
    def compute_precision(self) -> str:
        precision = self.compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name()
        return ov_precision(precision)

    @property
    def precision_note(self) -> str:
        asked = ov_precision(str(self.config.get("INFERENCE_PRECISION_HINT", "f32")))
        if asked == "bf16" and self.compute_precision != "bf16":
            return "no native bf16 on this CPU"
        return "fp16 weights" if self.file_precision == "fp16" else ""

    def infer(self, images: np.ndarray) -> np.ndarray:
        """The output is a view of a buffer this runner reuses: valid until the next call at this batch size."""
        if wanted_mode(self.mode, len(images)) == THROUGHPUT:
            return self._infer_spread(images)
        self._compiled(LATENCY, len(images))
        request = self.requests[(LATENCY, len(images))][0]
        return request.infer({0: images}, share_inputs=True, share_outputs=True)[0]

    def _infer_spread(self, images: np.ndarray) -> np.ndarray:
        """The images spread over the throughput model's requests in turn, each computing one request's images into
        its slice of the output (no copy), then all awaited."""
        import openvino as ov

        size = self.throughput_request_batch
        compiled = self._compiled(THROUGHPUT, size)
        requests = self.requests[(THROUGHPUT, size)]
        output = self._output(len(images), compiled)
        for index, start in enumerate(range(0, len(images), size)):
            request = requests[index % len(requests)]
            if index >= len(requests):
                request.wait()
            end = start + size
            request.set_input_tensor(ov.Tensor(np.ascontiguousarray(images[start:end]), shared_memory=True))
            request.set_output_tensor(ov.Tensor(output[start:end], shared_memory=True))
            request.start_async()
        for request in requests:
            request.wait()
        return output

    def _output(self, batch: int, compiled: Any) -> np.ndarray:
        if batch not in self.outputs:
            port = compiled.output(0)
            self.outputs[batch] = np.empty([batch, *port.get_shape()[1:]], port.get_element_type().to_dtype())
        return self.outputs[batch]

    def profile_layers(self, images: np.ndarray, runs: int, trace: Path) -> LayerProfile:
        """OpenVINO's per-layer performance counters (``PERF_COUNT``), summed over ``runs`` inferences.

        OpenVINO keeps no timeline, so the trace lays each inference's executed layers end to end in
        execution order with their measured durations (its metadata says so).
        """
        model = self.model.clone()
        model.reshape({0: list(images.shape)})
        compiled = self.core.compile_model(model, "CPU", {**self.config, "PERFORMANCE_HINT": "LATENCY",
                                                                "PERF_COUNT": True})
        request = compiled.create_infer_request()
        for _ in range(2):
            request.infer({0: images})
        totals: dict[str, list[Any]] = {}
        events: list[dict[str, Any]] = []
        clock = 0.0
        passes = []
        for run in range(runs):
            passes.append(timed_ms(lambda: request.infer({0: images})))
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
        return LayerProfile(layers, runs, "OpenVINO's per-layer counters laid end to end in execution order", passes)

    @property
    def weight_bytes(self) -> int:
        """The IR's constants (its weights, and the scales of an INT8 IR), at their stored types."""
        return sum(op.get_byte_size() for op in self.model.get_ops() if op.get_type_name() == "Constant")

    def deactivate(self) -> None:
        self.requests, self.models, self.outputs, self.compiled, self.model = {}, {}, {}, None, None


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
