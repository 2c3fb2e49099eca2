"""Which code does this host's slow state slow down? One thread on each CPU against two threads together.

    python -m bench.archive.measurement_noise.thread_state [--seconds 120] [--threads 2]

Why: on the Zen 4 VM every runtime slows for seconds at a time, each by its own factor
(bench/archive/measurement_noise/host_speed.py). This times the same small float32 matrix product (OpenBLAS through
numpy) alternately with one thread pinned to each CPU and with ``--threads`` threads, about 20 times a second, and
counts for each how often a reading is over 1.3x its 10th percentile. If only the multi-threaded readings slow down, the
state is the cost of the threads' synchronization, not the cores' speed, and a speedup measured across it compares two
different machines (README, "Reproducibility, Zen 4"). Saves every reading.
"""

from __future__ import annotations

import os
import time

import numpy as np
from threadpoolctl import threadpool_limits

from bench.harness import save, timing_parser

SLOW = 1.3  # a reading this much over its 10th percentile counts as slow
MATRIX = np.random.default_rng(1).random((192, 192), dtype=np.float32)


def reading() -> float:
    """Milliseconds of 20 products, the fastest of 3 tries."""
    times = []
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(20):
            MATRIX @ MATRIX
        times.append(time.perf_counter() - started)
    return min(times) * 1e3


def readings(seconds: float, threads: int) -> dict[str, list[float]]:
    cpus = sorted(os.sched_getaffinity(0))
    found: dict[str, list[float]] = {**{f"cpu{cpu}": [] for cpu in cpus}, f"{threads} threads": []}
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        with threadpool_limits(1):
            for cpu in cpus:
                os.sched_setaffinity(0, {cpu})
                found[f"cpu{cpu}"].append(round(reading(), 4))
        os.sched_setaffinity(0, set(cpus))
        with threadpool_limits(threads):
            found[f"{threads} threads"].append(round(reading(), 4))
        time.sleep(0.05)
    return found


def main() -> None:
    args = timing_parser(__doc__, "thread_state", 120.0).parse_args()
    found = readings(args.seconds, args.threads)
    summary = {}
    for name, values in found.items():
        reference = float(np.percentile(values, 10))
        summary[name] = {"p10_ms": round(reference, 3), "median_ms": round(float(np.median(values)), 3),
                         "p95_ms": round(float(np.percentile(values, 95)), 3),
                         "slow_share": round(float(np.mean(np.asarray(values) > SLOW * reference)), 3)}
        print(f"{name:10} p10 {summary[name]['p10_ms']:.2f} ms, median {summary[name]['median_ms']:.2f}, "
              f"p95 {summary[name]['p95_ms']:.2f}, slow share {summary[name]['slow_share']:.1%}")
    save(args.save, "thread_state", {"settings": {"seconds": args.seconds, "threads": args.threads},
                                     "summary": summary, "readings_ms": found}, args.threads)


if __name__ == "__main__":
    main()
