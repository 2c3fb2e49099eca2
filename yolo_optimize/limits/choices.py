"""Which float precision pays on this CPU, decided from its measured peaks (``optimize info``), not from its flags.

Why: a CPU's ``avx512_bf16`` flag says bf16 is computed natively, not that it is fast. On the
2-core Zen 4 VM OpenVINO's and PyTorch's bf16 kernels run at about twice their fp32 rate; on an
Intel Xeon with AVX-512 BF16 but no AMX exposed, at about half (issue 31: openvino conv 174 vs
324 GOP/s). So a choice made for speed compares the two measured rates of the runtime that will
run the artifact; flags still decide what is correct (no native bf16: bf16 is emulated, never
chosen; VNNI: the INT8 ranges, optimize/int8_onnx.py and int8_aoti.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from yolo_optimize.limits.peaks import MachineLimits

BF16_MARGIN = 1.1  # bf16 is chosen unasked only when it measures at least this much faster than fp32
BF16_RUNTIMES = {"openvino": ("openvino-bf16",), "torch": ("aoti-bf16",)}  # runtime -> the bf16 artifacts it runs


@dataclass(frozen=True)
class Bf16Evidence:
    """A runtime's measured peak rates in bf16 and fp32 on the building CPU (GEMM or convolution, the highest)."""

    runtime: str
    bf16_gops: float | None  # None: no kernel of it executed in bf16 (no native bf16), or not measured
    fp32_gops: float | None

    @property
    def ratio(self) -> float | None:
        return round(self.bf16_gops / self.fp32_gops, 2) if self.bf16_gops and self.fp32_gops else None

    @property
    def faster(self) -> bool:
        return self.ratio is not None and self.ratio >= BF16_MARGIN

    @property
    def slower(self) -> bool:
        return self.ratio is not None and self.ratio < 1

    def describe(self) -> str:
        if self.ratio is None:
            return f"{self.runtime}: no bf16 kernel measured in bf16"
        return f"{self.runtime} bf16 {self.bf16_gops:.0f} vs fp32 {self.fp32_gops:.0f} GOP/s ({self.ratio:.2f}x)"

    def record(self) -> dict[str, Any]:
        return {**asdict(self), "ratio": self.ratio, "margin": BF16_MARGIN}


def bf16_evidence(limits: MachineLimits | None, runtime: str) -> Bf16Evidence:
    if limits is None:
        return Bf16Evidence(runtime, None, None)
    return Bf16Evidence(runtime, limits.peak_gops(runtime, "bf16"), limits.peak_gops(runtime, "fp32"))


def float_parts_precision(evidence: Bf16Evidence) -> str:
    """What OpenVINO INT8's float parts compute in: bf16 only where it measures BF16_MARGIN faster than fp32."""
    return "bf16" if evidence.faster else "fp32"


def slower_than_fp32_note(evidence: list[Bf16Evidence], built: list[str]) -> str | None:
    """One line for the build when asked-for bf16 artifacts (``built``) run on runtimes where bf16 measures slower
    than fp32 here; None when none does."""
    slow = [e for e in evidence if e.slower and any(a in built for a in BF16_RUNTIMES[e.runtime])]
    if not slow:
        return None
    artifacts = [a for e in slow for a in BF16_RUNTIMES[e.runtime] if a in built]
    return (f"note: bf16 measures slower than fp32 on this CPU ({'; '.join(e.describe() for e in slow)}): "
            f"{', '.join(artifacts)} built as asked; recommend prefers a faster row of equal accuracy")


def evidence_here(runtime: str) -> dict[str, Any]:
    """The evidence a build decided ``runtime``'s bf16 by on this machine, as its cached limits hold it (the build
    measured them first): recorded in the artifact beside the choice. Without native bf16 the flags decided."""
    from yolo_optimize.host.cpu import has_native_bf16, usable_cpus
    from yolo_optimize.limits.peaks import cached_limits

    if not has_native_bf16():
        return {"runtime": runtime, "decided_by": "the CPU's flags: no native bf16 (emulated bf16 is never faster)"}
    return {**bf16_evidence(cached_limits(usable_cpus()), runtime).record(), "decided_by": "measured rates"}


def bf16_matters(precisions: tuple[str, ...]) -> bool:
    """Whether a build of ``precisions`` decides anything by this CPU's bf16 rate: it has native bf16 (else the flags
    decide) and the build makes bf16 artifacts or INT8 OpenVINO float parts."""
    from yolo_optimize.host.cpu import has_native_bf16

    return has_native_bf16() and bool({"int8", "bf16"} & set(precisions))


def needs_measuring(precisions: tuple[str, ...]) -> bool:
    """Whether a build of ``precisions`` must measure this machine's limits first (about a minute, once)."""
    from yolo_optimize.host.cpu import usable_cpus
    from yolo_optimize.limits.peaks import cached_limits

    return bf16_matters(precisions) and cached_limits(usable_cpus()) is None
