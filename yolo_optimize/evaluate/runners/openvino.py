"""OpenVINO: the fp32 IR runs in f32 (set explicitly: CPUs with bf16 would otherwise use it).

Batch 1 runs one synchronous request compiled with the LATENCY hint at a static shape, as
``benchmark_app -shape`` and a fixed-batch deployment do. A larger batch is what the
THROUGHPUT hint is for: one stream per thread, each image its own asynchronous request
(OpenVINO's recommended way to fill the streams), outputs gathered in order. Measured on
2 cores with the INT8 IR at batch 8: 213-228 ms per batch against 233-259 ms for one
synchronous batch-8 request (bench/openvino_streams.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from yolo_optimize.evaluate.runners.base import Runner

# fp32 and int8 (its float parts, the Detect decode among them) run in f32, bf16 in bf16; fp16 keeps the
# device's default. The precision actually used is read back from the compiled model.
EXECUTION_HINTS = {"fp32": "f32", "int8": "f32", "bf16": "bf16"}


class OpenVinoRunner(Runner):
    latency: Any = None

    def activate(self) -> None:
        import openvino as ov

        self.core = ov.Core()
        self.config: dict[str, Any] = {"INFERENCE_NUM_THREADS": self.threads}
        hint = EXECUTION_HINTS.get(self.manifest.precision or "fp32")
        if hint:
            self.config["INFERENCE_PRECISION_HINT"] = hint
        self.target = "GPU" if self.device == "cuda" and "GPU" in self.core.available_devices else "CPU"
        model = self.core.read_model(str(self.entry))
        model.reshape({0: [1, *model.input(0).partial_shape[1:].to_shape()]})
        self.model = model
        self.latency = self.core.compile_model(model, self.target, {**self.config, "PERFORMANCE_HINT": "LATENCY"})
        self.request = self.latency.create_infer_request()
        self.queue: Any = None

    def _throughput_queue(self) -> Any:
        """Compiled on first use, so batch-1-only runs never pay for it."""
        if self.queue is None:
            import openvino as ov

            compiled = self.core.compile_model(self.model, self.target, {
                **self.config, "PERFORMANCE_HINT": "THROUGHPUT", "NUM_STREAMS": self.threads})
            self.queue = ov.AsyncInferQueue(compiled, compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
            self.queue.set_callback(lambda request, slot: slot.append(request.get_output_tensor(0).data.copy()))
        return self.queue

    @property
    def executed_precision(self) -> str:
        precision = self.latency.get_property("INFERENCE_PRECISION_HINT").get_type_name()
        executed = {"f32": "fp32", "f16": "fp16", "bf16": "bf16"}.get(precision, precision)
        return f"int8+{executed}" if self.manifest.precision == "int8" else executed

    def infer(self, images: np.ndarray) -> np.ndarray:
        """At batch 1 the output is a view of the request's buffer, valid until the next call."""
        if len(images) == 1:
            return self.request.infer({0: images}, share_inputs=True, share_outputs=True)[0]
        queue = self._throughput_queue()
        slots: list[list[np.ndarray]] = [[] for _ in images]
        for image, slot in zip(images, slots):
            queue.start_async({0: image[None]}, userdata=slot)
        queue.wait_all()
        return np.concatenate([slot[0] for slot in slots])

    def deactivate(self) -> None:
        self.queue, self.request, self.latency, self.model = None, None, None, None
