"""Measured machine limits: peak GEMM/convolution rates per runtime and precision, and memory bandwidth.

Never a number computed from clock x vector lanes: each kernel runs through the runtime
that artifacts use (ONNX Runtime, OpenVINO, PyTorch), at the thread count used, in its
own process; five interleaved rounds of processes (a process on these hosts runs in a fast
or a 1.4-1.65x slower mode), each kernel's rate from its 10th-percentile call, and the
fastest round is the peak, since a peak is what the machine can do. A runtime's peak for a
precision is the highest rate of its kernels (one GEMM, two convolutions). Cached per machine,
thread count and tool versions.
"""

from __future__ import annotations

import hashlib
import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from importlib import import_module
from pathlib import Path
from typing import Any

import numpy as np

from yolo_optimize.files import write_atomically
from yolo_optimize.formats import formats
from yolo_optimize.host.cpu import cpu_facts, cpu_flags
from yolo_optimize.host.environment import user_cache_dir
from yolo_optimize.host.processes import in_own_process
from yolo_optimize.limits.kernels import SHAPES
from yolo_optimize.versions import tool_versions

# bump when what is measured or how changes: cached limits of another schema are measured again
SCHEMA = 4  # 3: five rounds; 4: PyTorch bf16 and int8 kernels (AOTInductor packages)
PRECISIONS = ("fp32", "bf16", "int8")
ROUNDS = 5  # spread over a minute or two: three could all fall in a slower stretch of the host (peaks read low)
PEAK_QUANTILE = 10  # a kernel's rate: its 10th-percentile call time (a peak is what the machine can do)
MIN_TIME_S, MIN_CALLS, WARMUP_CALLS = 0.3, 5, 3
TRIAD_ELEMENTS = 1 << 25  # float64: 256 MiB per array, far beyond any cache
TRIAD_BYTES_PER_ELEMENT = 5 * 8  # np.multiply reads c and writes a, np.add reads a and b and writes a
TRIAD_METHOD = ("a = b + s*c over 3 float64 arrays of 256 MiB, split across the threads, as np.multiply then "
                "np.add (5 x 8 bytes moved per element, write-allocate not counted); best of 5 passes")


@dataclass(frozen=True)
class Peak:
    """One kernel's rate on this machine; ``gops`` None when it was not measured (``skipped`` says why)."""

    runtime: str
    operation: str
    precision: str
    gops: float | None = None  # 1e9 operations (2 per multiply-add) per second: the fastest round's rate
    executed: str | None = None  # the precision the runtime reports it executed in
    rounds_gops: list[float] = field(default_factory=list)
    skipped: str = ""


@dataclass(frozen=True)
class MachineLimits:
    schema: int
    measured_at: str
    threads: int
    cpu: dict[str, Any]
    tools: dict[str, str]
    peaks: list[Peak]
    bandwidth_gb_s: float
    bandwidth_rounds_gb_s: list[float]
    bandwidth_method: str

    def peak_gops(self, runtime: str, precision: str) -> float | None:
        """The highest measured rate of ``runtime`` kernels that executed in ``precision`` (GEMM or convolution)."""
        rates = [p.gops for p in self.peaks if p.runtime == runtime and p.executed == precision and p.gops]
        return max(rates) if rates else None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MachineLimits:
        return cls(**{**data, "peaks": [Peak(**p) for p in data["peaks"]]})


def machine_limits(threads: int, *, refresh: bool = False, rounds: int = ROUNDS) -> MachineLimits:
    """This machine's limits at ``threads``: from the cache when measured before with the same tools, else measured
    in ``rounds`` rounds (fewer: quicker, but more likely to read a slow stretch of the host as its peak)."""
    cached = None if refresh else cached_limits(threads)
    if cached is not None:
        return cached
    limits = measure_limits(threads, rounds)
    write_atomically(_cache_path(threads), json.dumps(asdict(limits), indent=2))
    return limits


def cached_limits(threads: int) -> MachineLimits | None:
    """This machine's limits at ``threads`` as measured before with the same tools, else None (nothing measured)."""
    try:
        cached = json.loads(_cache_path(threads).read_text())
    except (OSError, ValueError):
        return None
    return MachineLimits.from_json(cached) if cached.get("schema") == SCHEMA else None


def measure_limits(threads: int, rounds: int = ROUNDS) -> MachineLimits:
    """Every runtime's kernels in their own processes, rounds interleaved; then the memory bandwidth."""
    measured: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    bandwidth = []
    for _ in range(rounds):
        for runtime, module in measured_runtimes().items():
            for result in in_own_process(_measure_runtime, runtime, module, threads):
                measured.setdefault((runtime, result["operation"], result["precision"]), []).append(result)
        bandwidth.append(in_own_process(_triad_gb_s, threads))
    peaks = [_peak(key, results) for key, results in measured.items()]
    return MachineLimits(SCHEMA, datetime.now(timezone.utc).isoformat(timespec="seconds"), threads, cpu_facts(),
                         _tools(), peaks, max(bandwidth), [round(b, 2) for b in bandwidth], TRIAD_METHOD)


def _peak(key: tuple[str, str, str], results: list[dict[str, Any]]) -> Peak:
    runtime, operation, precision = key
    if results[0]["skipped"]:
        return Peak(runtime, operation, precision, skipped=results[0]["skipped"])
    rates = [round(r["gops"], 2) for r in results]
    return Peak(runtime, operation, precision, max(rates), results[0]["executed"], rates)


def measured_runtimes() -> dict[str, str]:
    """The runtimes whose peaks are measured, each with its kernels module: from the format table (formats.Runtime),
    so a registered format's runtime with kernels of its own is measured too."""
    return {row.runtime.package: row.runtime.kernels for row in formats().values() if row.runtime.kernels}


def _measure_runtime(runtime: str, module: str, threads: int) -> list[dict[str, Any]]:
    """Worker: every kernel of one runtime (in ``module``), each timed for MIN_TIME_S after warm-up (rate:
    PEAK_QUANTILE)."""
    kernels = import_module(module)
    results = []
    for shape in SHAPES:
        for precision in PRECISIONS:
            entry: dict[str, Any] = {"operation": shape.name, "precision": precision, "skipped": "", "gops": None,
                                     "executed": None}
            if reason := kernels.unavailable_reason(precision):
                results.append({**entry, "skipped": reason})
                continue
            kernel = kernels.kernel(shape, precision, threads)
            seconds = float(np.percentile(_call_times(kernel.call), PEAK_QUANTILE))
            results.append({**entry, "gops": shape.operations / seconds / 1e9, "executed": kernel.executed})
    return results


def _call_times(call: Any) -> list[float]:
    for _ in range(WARMUP_CALLS):
        call()
    samples: list[float] = []
    deadline = time.perf_counter() + MIN_TIME_S
    while len(samples) < MIN_CALLS or time.perf_counter() < deadline:
        started = time.perf_counter()
        call()
        samples.append(time.perf_counter() - started)
    return samples


def _triad_gb_s(threads: int) -> float:
    """Worker: STREAM-like triad bandwidth in GB/s (TRIAD_METHOD)."""
    a, b, c = np.empty(TRIAD_ELEMENTS), np.ones(TRIAD_ELEMENTS), np.full(TRIAD_ELEMENTS, 2.0)
    bounds = np.linspace(0, TRIAD_ELEMENTS, threads + 1, dtype=int)
    parts = [slice(start, end) for start, end in zip(bounds[:-1], bounds[1:])]

    def triad(part: slice) -> None:
        np.multiply(c[part], 3.0, out=a[part])
        np.add(a[part], b[part], out=a[part])

    best = float("inf")
    with ThreadPoolExecutor(threads) as pool:
        for _ in range(5):
            started = time.perf_counter()
            list(pool.map(triad, parts))
            best = min(best, time.perf_counter() - started)
    return TRIAD_ELEMENTS * TRIAD_BYTES_PER_ELEMENT / best / 1e9


def _tools() -> dict[str, str]:
    return tool_versions(("onnxruntime", "openvino", "torch", "numpy"))


def _cache_path(threads: int) -> Path:
    identity = json.dumps({"schema": SCHEMA, "cpu": cpu_facts()["model"], "flags": sorted(cpu_flags()),
                           "threads": threads, "tools": _tools()}, sort_keys=True)
    return user_cache_dir() / "machine" / f"limits-{hashlib.sha256(identity.encode()).hexdigest()[:16]}.json"
