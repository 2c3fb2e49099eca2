"""AOTInductor packages (export/aoti.py): ``torch._inductor.aoti_load_package`` on the CPU, no Python model code.

What runs is read back from the package itself: the C++ AOTInductor generated names every
convolution it calls (oneDNN's int8 ``qconv`` or float ``mkldnn`` convolutions) and the buffers it
allocates in bfloat16. A package runs only on a CPU with the instruction sets it was compiled for
(``-march=native``); on another, activation fails with the reason instead of an illegal instruction.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

from yolo_optimize.host.cpu import cpu_flags
from yolo_optimize.runtime.layers import LayerProfile
from yolo_optimize.runtime.runners.torch_module import TorchModuleRunner

if TYPE_CHECKING:
    import numpy as np

INT8_CONVOLUTION = "_qconv_pointwise"
FLOAT_CONVOLUTION = "mkldnn__convolution_pointwise"


class AotiRunner(TorchModuleRunner):
    def activate(self) -> None:
        import torch

        missing = _missing_isa(self.manifest.info.get("built_on_cpu", {}).get("isa", []))
        if missing:
            raise RuntimeError(f"compiled for CPUs with {', '.join(missing)}, which this CPU lacks: build it here")
        torch.set_num_threads(self.threads)
        self.module = torch._inductor.aoti_load_package(str(self.entry))
        self.dtype = self.input_dtype()
        self.prepare_device()
        self.kernels = generated_kernels(self.entry)

    @property
    def compute_precision(self) -> str:
        """bf16 where the generated code computes in bfloat16 (a BF16 package, its float module aside), else fp32
        (an INT8 package's float convolutions)."""
        return "bf16" if self.kernels["bf16"] else "fp32"

    @property
    def executed_precision(self) -> str:
        integer, total = self.kernels["int8"], self.kernels["int8"] + self.kernels["float"]
        if not integer:
            return self.compute_precision + (" (int8 file, no int8 convolution generated)"
                                             if self.file_precision == "int8" else "")
        label = f"int8+{self.compute_precision}"
        return label if integer == total else f"{label} ({integer} of {total} convolutions in int8)"

    def profile_layers(self, images: np.ndarray, runs: int, trace: Path) -> LayerProfile:
        raise NotImplementedError("an AOTInductor package runs compiled C++ whose kernels PyTorch's profiler does not "
                                  "name as layers (the convolutions' count and precision are in 'runs in')")

    @property
    def weight_bytes(self) -> int | None:
        return None  # the package's constants are not exposed as tensors by the loader


def generated_kernels(package: Path) -> dict[str, int]:
    """Convolutions the package's generated wrapper calls, int8 and float, and its bfloat16 buffers."""
    with zipfile.ZipFile(package) as archive:
        source = "".join(archive.read(name).decode() for name in archive.namelist() if name.endswith("wrapper.cpp"))
    return {"int8": len(re.findall(INT8_CONVOLUTION, source)), "float": len(re.findall(FLOAT_CONVOLUTION, source)),
            "bf16": source.count("bfloat16")}


def _missing_isa(isa: list[str]) -> list[str]:
    return [flag for flag in isa if flag not in cpu_flags()]
