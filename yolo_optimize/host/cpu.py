"""This CPU's instruction-set facts that change how an artifact computes (read from /proc/cpuinfo, no imports), and the
CPUs and memory this process may use.

Precision decisions depend on them: OpenVINO runs FP32 IRs in bf16 by default where
the CPU has native bf16; ONNX Runtime's u8 x s8 INT8 kernels are exact only with VNNI
(without it they can saturate in 16-bit intermediate sums).
"""

from __future__ import annotations

import math
import os
import platform
from functools import cache
from pathlib import Path

VNNI_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")
BF16_FLAGS = ("avx512_bf16", "amx_bf16")
FP16_ARITHMETIC_FLAGS = ("avx512_fp16", "asimdhp")
REPORTED_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "avx512_fp16", "amx_bf16",
                  "amx_int8")


@cache
def cpu_flags() -> frozenset[str]:
    """The kernel's flag list for the first CPU (x86's ``flags``, ARM's ``Features``; empty where /proc/cpuinfo is not
    readable)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return frozenset()
    return frozenset(next((line.split(":", 1)[1].split() for line in lines
                           if line.startswith(("flags", "Features"))), []))


def has_vnni() -> bool:
    return any(flag in cpu_flags() for flag in VNNI_FLAGS)


def has_native_bf16() -> bool:
    return any(flag in cpu_flags() for flag in BF16_FLAGS)


def has_fp16_arithmetic() -> bool:
    """Vector arithmetic in float16 (AVX512-FP16; ARM's half-precision SIMD), which XNNPACK's float16 kernels use."""
    return any(flag in cpu_flags() for flag in FP16_ARITHMETIC_FLAGS)


def cpu_model() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor() or "unknown"
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "unknown")


def reported_isa() -> list[str]:
    """The instruction sets of REPORTED_FLAGS this CPU has."""
    return [flag for flag in REPORTED_FLAGS if flag in cpu_flags()]


def cpu_facts() -> dict[str, object]:
    """What manifests and reports record about the CPU that built or measured an artifact."""
    return {"model": cpu_model(), "machine": platform.machine(), "isa": reported_isa(),
            "vnni": has_vnni(), "native_bf16": has_native_bf16()}


def usable_cpus() -> int:
    """The CPUs this process may use: its affinity mask, bounded by a cgroup CPU quota (a container's ``--cpus``);
    ``os.cpu_count()`` counts the machine's and ignores both."""
    allowed = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(allowed, _cgroup_quota() or allowed))


def _cgroup_quota(root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """cgroup v2's ``cpu.max`` (``quota period``, or ``max``) as whole CPUs, rounded up; None without a quota."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        return None
    return None if quota == "max" else max(1, math.ceil(int(quota) / int(period)))


def usable_memory(root: Path = Path("/sys/fs/cgroup")) -> int:
    """Bytes of memory this process may use: the machine's, bounded by a cgroup v2 limit (``memory.max``)."""
    machine = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        limit = (root / "memory.max").read_text().strip()
    except OSError:
        return machine
    return min(machine, int(limit)) if limit.isdigit() else machine
