"""ExecuTorch programs (export/executorch.py): ``executorch.runtime`` on the CPU, the XNNPACK delegate's thread
pool sized to the row's threads.

The pool is set explicitly: left alone it takes every CPU it sees, which on large hosts ran hundreds of times
slower (executorch#9196), and here it would not be the row's threads. The program takes one image (the export's
docstring), so a batch is its images one after the other."""

from __future__ import annotations

from typing import Any

import numpy as np

from yolo_optimize.cpu import has_fp16_arithmetic
from yolo_optimize.runtime.runners.base import Runner

FP16_STORAGE = "fp16 storage, each operator accumulating in fp32"


class ExecuTorchRunner(Runner):
    takes_one_image = True
    method: Any = None

    def activate(self) -> None:
        from executorch.extension.pybindings import portable_lib
        from executorch.runtime import Runtime

        portable_lib._unsafe_reset_threadpool(self.threads)
        self.method = Runtime.get().load_program(str(self.entry)).load_method("forward")

    def infer(self, images: np.ndarray) -> np.ndarray:
        import torch

        return np.stack([self.method.execute([torch.from_numpy(np.ascontiguousarray(image[None]))])[0].numpy()[0]
                         for image in images])

    def set_threads(self, threads: int) -> None:
        from executorch.extension.pybindings import portable_lib

        portable_lib._unsafe_reset_threadpool(threads)
        self.threads = threads

    @property
    def precision_note(self) -> str:
        """How a float16 program computes here, and what of the program XNNPACK does not run (the build's record of
        its operators left to portable kernels)."""
        notes = [FP16_STORAGE] if self.file_precision == "fp16" and self.compute_precision == "fp32" else []
        fallback = self.manifest.info.get("fallback") or {}
        if nodes := sum(fallback.values()):
            names = sorted({name.split(".")[1] if "." in name else name for name in fallback})
            notes.append(f"{nodes} ops outside XNNPACK: {', '.join(names)}")
        return "; ".join(notes)

    @property
    def compute_precision(self) -> str:
        """XNNPACK's float arithmetic: fp16 for a float16 program on a CPU with fp16 arithmetic (AVX512-FP16, ARM's
        half-precision SIMD), else fp32 (its x86 float16 kernels without it, ``f16_f32acc``, convert to fp32 and round
        each result)."""
        return "fp16" if self.file_precision == "fp16" and has_fp16_arithmetic() else "fp32"

    @property
    def executed_precision(self) -> str:
        """An INT8 program's label with the share of its convolutions quantized, as its build counted them in the
        converted graph (``info.int8_convolutions``): XNNPACK's compiled graph is not readable back from the
        runtime."""
        integer, total = self.manifest.info.get("int8_convolutions") or (0, 0)
        label = super().executed_precision
        return label if integer == total else f"{label} ({integer} of {total} convolutions in int8)"

    def deactivate(self) -> None:
        self.method = None
