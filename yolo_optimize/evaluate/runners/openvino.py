"""OpenVINO: the fp32 IR runs in f32 (set explicitly: CPUs with bf16 would otherwise use it)."""

from __future__ import annotations

from typing import Any

import numpy as np

from yolo_optimize.evaluate.runners.base import Runner

EXECUTION_HINTS = {"fp32": "f32"}  # other precisions keep the device's default and report it


class OpenVinoRunner(Runner):
    compiled: Any = None

    def activate(self) -> None:
        import openvino as ov

        core = ov.Core()
        config: dict[str, Any] = {"INFERENCE_NUM_THREADS": self.threads, "PERFORMANCE_HINT": "LATENCY"}
        hint = EXECUTION_HINTS.get(self.manifest.precision or "fp32")
        if hint:
            config["INFERENCE_PRECISION_HINT"] = hint
        device = "GPU" if self.device == "cuda" and "GPU" in core.available_devices else "CPU"
        self.compiled = core.compile_model(core.read_model(str(self.entry)), device, config)
        self.request = self.compiled.create_infer_request()

    @property
    def executed_precision(self) -> str:
        precision = self.compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name()
        return {"f32": "fp32", "f16": "fp16", "bf16": "bf16"}.get(precision, precision)

    def infer(self, images: np.ndarray) -> np.ndarray:
        return self.request.infer({0: images}, share_inputs=True)[0].copy()

    def deactivate(self) -> None:
        self.request = self.compiled = None
