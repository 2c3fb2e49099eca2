"""NCNN (export/ncnn.py): ``ncnn.Net`` on the CPU, one extractor per image.

An NCNN graph takes one image (its blobs have no batch axis), so a batch is its images one after the other, each on
every thread: what a phone does with a stream of camera frames. ``ncnn-fp32`` runs with FP16 storage, packing and
arithmetic off; ``ncnn-fp16`` with NCNN's defaults, whose FP16 arithmetic exists on ARM CPUs with half-precision
vector instructions only: on x86 NCNN stores in FP16 and computes in FP32, and "runs in" says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from yolo_optimize.runtime.runners.base import Runner


class NcnnRunner(Runner):
    takes_one_image = True

    def activate(self) -> None:
        import ncnn

        self.net = ncnn.Net()
        for option, value in self.runtime_settings.items():
            setattr(self.net.opt, option, value)
        self.net.load_param(str(self.entry))
        self.net.load_model(str(self.weights))
        self.input_name, self.output_name = self.net.input_names()[0], self.net.output_names()[0]
        self.fp16_arithmetic = self.file_precision == "fp16" and bool(ncnn.cpu_support_arm_asimdhp())

    @property
    def weights(self) -> Path:
        """The .bin beside the .param (pnnx and Ultralytics name them alike)."""
        return self.entry.with_suffix(".bin")

    def infer(self, images: np.ndarray) -> np.ndarray:
        return np.stack([self._one(image) for image in images])

    def _one(self, image: np.ndarray) -> np.ndarray:
        import ncnn

        with self.net.create_extractor() as extractor:
            extractor.input(self.input_name, ncnn.Mat(np.ascontiguousarray(image)).clone())
            _, output = extractor.extract(self.output_name)
            return np.array(output)

    @property
    def runtime_settings(self) -> dict[str, Any]:
        half = self.file_precision == "fp16"
        return {"num_threads": self.threads, "use_fp16_storage": half, "use_fp16_packed": half,
                "use_fp16_arithmetic": half}

    def set_threads(self, threads: int) -> None:
        self.threads = self.net.opt.num_threads = threads

    @property
    def compute_precision(self) -> str:
        return "fp16" if self.fp16_arithmetic else "fp32"

    @property
    def precision_note(self) -> str:
        if self.file_precision == "fp16" and not self.fp16_arithmetic:
            return "fp16 storage: NCNN computes in fp32 on a CPU without fp16 arithmetic"
        return ""

    @property
    def weight_bytes(self) -> int:
        return self.weights.stat().st_size

    def deactivate(self) -> None:
        self.net.clear()
