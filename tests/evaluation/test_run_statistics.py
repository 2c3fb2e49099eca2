"""The fast-state statistic that speedups are taken from, on runs whose answer is known."""

from __future__ import annotations

import numpy as np
import pytest

from yolo_optimize.evaluation.run_statistics import BLOCK_S, blocks, fast_state


def runs(ms: float, seconds: float, seed: int) -> list[float]:
    """Back-to-back runs around ``ms`` (1% noise) for ``seconds``."""
    count = max(1, int(seconds * 1e3 / ms))
    return list(ms * (1 + 0.01 * np.random.default_rng(seed).standard_normal(count)))


def test_blocks_keep_every_run_in_order_and_last_at_least_the_block_time() -> None:
    samples = runs(30.0, 2.0, 0)
    cut = blocks(samples)
    assert [s for block in cut for s in block] == samples
    assert all(sum(block) >= BLOCK_S * 1e3 for block in cut[:-1]) and len(cut) >= 8
    assert blocks([500.0, 510.0]) == [[500.0], [510.0]]  # a run longer than a block is its own block


def test_runs_in_the_slow_state_are_set_aside_and_counted_whichever_process_they_fell_in() -> None:
    """Two processes of a runtime slowed 1.65x for part of their time: the fast-state latency is the fast runs'
    median, wherever they fell, and the count says how many were set aside."""
    first = runs(26.0, 1.0, 1) + runs(43.0, 2.0, 2)
    second = runs(43.0, 1.0, 3) + runs(26.0, 1.0, 4)
    found = fast_state([first, second], batch=1)
    assert found is not None
    assert found.latency.p50_ms == pytest.approx(26.0, rel=0.02)
    assert found.throughput_ips == pytest.approx(1e3 / found.latency.p50_ms, rel=1e-3)
    assert found.runs == len(first) + len(second)
    assert found.runs_kept == pytest.approx(len(runs(26.0, 1.0, 0)) * 2, abs=2)


def test_a_steady_host_keeps_every_run_and_the_ordinary_median() -> None:
    steady = [runs(40.0, 1.0, seed) for seed in range(3)]
    found = fast_state(steady, batch=8)
    assert found is not None and found.runs_kept == found.runs == sum(map(len, steady))
    assert found.latency.p50_ms == pytest.approx(float(np.median(np.concatenate(steady))), abs=1e-3)
    assert found.throughput_ips == pytest.approx(8e3 / found.latency.p50_ms, rel=1e-3)


def test_one_lucky_block_does_not_decide_which_runs_count() -> None:
    """The reference is a low quantile of the blocks, not the fastest one: a single block 20% fast (a clock
    hiccup) leaves the ordinary runs kept."""
    processes = [runs(40.0, 2.0, seed) for seed in range(3)]
    processes[0][:6] = [32.0] * 6
    found = fast_state(processes, batch=1)
    assert found is not None and found.runs_kept >= found.runs - 6
    assert found.latency.p50_ms == pytest.approx(40.0, rel=0.02)


def test_no_runs_no_fast_state() -> None:
    assert fast_state([], batch=1) is None
