"""OpenVINO: each artifact computes in the precision its name promises (export/openvino.py's EXECUTION_HINTS),
read back from the compiled model.

The IR has a dynamic batch; like ``benchmark_app -shape`` and a fixed-batch deployment,
the runner compiles one static-shape model per batch size it meets (the first call at a
new size pays for that compile, which warm-up absorbs).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from yolo_optimize.evaluate.runners.base import Runner
from yolo_optimize.export.openvino import EXECUTION_HINTS

OV_PRECISIONS = {"f32": "fp32", "f16": "fp16", "bf16": "bf16"}


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
        return OV_PRECISIONS.get(precision, precision)

    @property
    def precision_note(self) -> str:
        if self.file_precision == "bf16" and self.compute_precision != "bf16":
            return "no native bf16 on this CPU"
        return "fp16 weights" if self.file_precision == "fp16" else ""

    def infer(self, images: np.ndarray) -> np.ndarray:
        """The output is a view of the request's buffer, valid until the next call at this batch size."""
        return self._request(len(images)).infer({0: images}, share_inputs=True, share_outputs=True)[0]

    def deactivate(self) -> None:
        self.requests, self.compiled, self.model = {}, None, None
