"""OpenVINO: the fp32 IR runs in f32 (set explicitly: CPUs with bf16 would otherwise use it).

The IR has a dynamic batch; like ``benchmark_app -shape`` and a fixed-batch deployment,
the runner compiles one static-shape model per batch size it meets (the first call at a
new size pays for that compile, which warm-up absorbs).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from yolo_optimize.evaluate.runners.base import Runner

# fp32 and int8 (its float parts, the Detect decode among them) run in f32, bf16 in bf16; fp16 keeps the
# device's default. The precision actually used is read back from the compiled model.
EXECUTION_HINTS = {"fp32": "f32", "int8": "f32", "bf16": "bf16"}


class OpenVinoRunner(Runner):
    compiled: Any = None

    def activate(self) -> None:
        import openvino as ov

        self.core = ov.Core()
        self.config: dict[str, Any] = {"INFERENCE_NUM_THREADS": self.threads, "PERFORMANCE_HINT": "LATENCY"}
        hint = EXECUTION_HINTS.get(self.manifest.precision or "fp32")
        if hint:
            self.config["INFERENCE_PRECISION_HINT"] = hint
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
    def executed_precision(self) -> str:
        precision = self.compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name()
        executed = {"f32": "fp32", "f16": "fp16", "bf16": "bf16"}.get(precision, precision)
        return f"int8+{executed}" if self.manifest.precision == "int8" else executed

    def infer(self, images: np.ndarray) -> np.ndarray:
        """The output is a view of the request's buffer, valid until the next call at this batch size."""
        return self._request(len(images)).infer({0: images}, share_inputs=True, share_outputs=True)[0]

    def deactivate(self) -> None:
        self.requests, self.compiled, self.model = {}, None, None
