"""ExecuTorch programs (export/executorch.py): ``executorch.runtime`` on the CPU, the XNNPACK delegate's thread
pool sized to the row's threads.

The pool is set explicitly: left alone it takes every CPU it sees, which on large hosts ran hundreds of times
slower (executorch#9196), and here it would not be the row's threads. The program takes one image (the export's
docstring), so a batch is its images one after the other."""

from __future__ import annotations

from typing import Any

import numpy as np

from yolo_optimize.runtime.runners.base import Runner


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
        """What of the program XNNPACK does not run (the build's record of its operators left to portable kernels)."""
        fallback = self.manifest.info.get("fallback") or {}
        nodes = sum(fallback.values())
        names = sorted({name.split(".")[1] if "." in name else name for name in fallback})
        return f"{nodes} ops outside XNNPACK: {', '.join(names)}" if nodes else ""

    @property
    def compute_precision(self) -> str:
        """XNNPACK's float operators run in fp32 on x86 (its fp16 kernels need ARM's fp16 arithmetic)."""
        return "fp32"

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
