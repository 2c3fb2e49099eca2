"""The statistics of timed runs: a batch size's latency percentiles, and the runs a row took in the host's fast state.

Apart from the result types (results.py) because the measuring processes (interleave.py, profiling.py), the reports
(matrix.py, recommend.py) and the bench scripts judge runs with the same blocks, spans and margins.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import numpy as np

BLOCK_S = 0.2  # a process's consecutive runs are judged in blocks of at least this many seconds
FAST_STATE_SPAN = 1.1  # blocks slower than this times the row's reference block ran in the host's slow state
REFERENCE_QUANTILE = 0.1  # the reference block: this quantile of the row's block medians (not its single fastest)
TIE_MARGIN = 0.03  # a median gap below 3% is never called a win (a recommendation's, the baseline's thread choice)


@dataclass
class LatencyStats:
    """Per-batch latency of timed runs, in milliseconds; ``samples`` are the raw runs."""

    samples_ms: list[float]
    mean_ms: float
    std_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float

    @classmethod
    def of(cls, seconds: list[float]) -> LatencyStats:
        ms = np.asarray(seconds) * 1e3
        p50, p90, p99 = np.percentile(ms, [50, 90, 99])
        return cls([round(float(s), 4) for s in ms], round(float(ms.mean()), 4), round(float(ms.std()), 4),
                   round(float(p50), 4), round(float(p90), 4), round(float(p99), 4))


@dataclass(frozen=True)
class FastState:
    """A row's runs at one batch size that ran in the host's fast state (``Row.fast_state``)."""

    latency: LatencyStats
    throughput_ips: float  # images per second, from the median latency of the kept runs
    runs_kept: int
    runs: int  # all timed runs of the row at this batch size, in every process


def blocks(samples_ms: list[float]) -> list[list[float]]:
    """One process's runs in time order, cut into consecutive blocks of at least BLOCK_S (a last shorter one too)."""
    found: list[list[float]] = [[]]
    for sample in samples_ms:
        if sum(found[-1]) >= BLOCK_S * 1e3:
            found.append([])
        found[-1].append(sample)
    return [block for block in found if block]


def fast_state(processes: list[list[float]], batch: int) -> FastState | None:
    """The runs of the blocks within FAST_STATE_SPAN of the reference block, over all of a row's processes.

    Why: some hosts switch for seconds at a time into a state where every multi-threaded runtime
    slows down, by a factor that depends on the runtime (a 2-vCPU Zen 4 VM: PyTorch 1.3x, ONNX
    Runtime at batch 1 1.7x; single-threaded code not at all, README "Reproducibility"). A
    speedup taken over all runs then depends on how much of each row's time fell in that state,
    and moves from one evaluation to the next. The fast state is the host's own speed, so the
    speedup compares rows there; every run stays in results.json and the matrix says how many
    were kept. The reference is a low quantile of the block medians rather than the fastest
    block, so one lucky block does not decide which runs count.
    """
    cut = [block for samples in processes for block in blocks(samples)]
    if not cut:
        return None
    medians = sorted(statistics.median(block) for block in cut)
    reference = medians[int(REFERENCE_QUANTILE * (len(medians) - 1))]
    kept = [sample for block in cut if statistics.median(block) <= FAST_STATE_SPAN * reference for sample in block]
    latency = LatencyStats.of([ms / 1e3 for ms in kept])
    if latency.p50_ms <= 0:  # runs of 0 ms (a file load_report refuses, ``zero_runs``): no rate can be read
        return None
    return FastState(latency, round(batch / (latency.p50_ms / 1e3), 3), len(kept), sum(map(len, cut)))
