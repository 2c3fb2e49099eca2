"""Would time-adjacent pairs make speedups reproducible on a host whose speed changes every few seconds?

    python bench/paired_slices.py artifacts/ [--pairs 5] [--slice 0.4] [--rounds 1] [--runs 2]

A measurement protocol tried on the Zen 4 host and not adopted (README, "Reproducibility"): the evaluator then
took each speedup as the median over rounds of the ratio to the baseline of the same round, whose two
measurements lie tens of seconds apart; it now compares rows in the host's fast state
(``results.fast_state``), which this study's saved slices led to. Here the baseline and the artifact run in
two live processes at once and take turns in short slices (``--slice`` seconds, the first inference of each
slice discarded as its warm-up), so both sides of every ratio see the same host state; the speedup is the
median over ``--pairs`` slice pairs (with ``--rounds`` above 1, the median of that over as many fresh pairs of
processes). Runs the whole comparison ``--runs`` times and reports, like bench/reproducibility.py, whether the
runs rank the artifacts alike and how far apart their speedups are. Every slice's samples are saved.
"""

from __future__ import annotations

import argparse
import statistics
import time
from multiprocessing import get_context
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np
from common import save
from reproducibility import agreement

from yolo_optimize.evaluation.measuring.discover import Candidate, discover
from yolo_optimize.evaluation.results import BASELINE_TARGET
from yolo_optimize.images import to_input
from yolo_optimize.metadata import ArtifactMetadata
from yolo_optimize.runtime.runners import open_runner


def serve(candidate: Candidate, batch_sizes: tuple[int, ...], threads: int, conn: Connection) -> None:
    """A worker: holds one activated runner; each request (batch, seconds) answers with one slice's latencies."""
    imgsz = ArtifactMetadata.of(candidate.manifest).side
    pixels = np.random.default_rng(0).integers(0, 256, (max(batch_sizes), imgsz, imgsz, 3), dtype=np.uint8)
    inputs = {batch: to_input(pixels[:batch]) for batch in batch_sizes}
    with open_runner(candidate.folder, candidate.manifest, threads=threads) as runner:
        for batch in batch_sizes:
            runner.infer(inputs[batch])
        conn.send("ready")
        while (request := conn.recv()) is not None:
            batch, seconds = request
            runner.infer(inputs[batch])  # warm-up: the other process just had the cores and the caches
            samples, end = [], time.perf_counter() + seconds
            while len(samples) < 2 or time.perf_counter() < end:
                started = time.perf_counter()
                runner.infer(inputs[batch])
                samples.append(time.perf_counter() - started)
            conn.send(samples)


class Worker:
    """One candidate's runner in its own spawned process, driven slice by slice."""

    def __init__(self, candidate: Candidate, args: argparse.Namespace) -> None:
        context = get_context("spawn")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=serve, args=(candidate, args.batch_sizes, args.threads, child))
        self.process.start()
        assert self.conn.recv() == "ready"

    def slice(self, batch: int, seconds: float) -> list[float]:
        self.conn.send((batch, seconds))
        return self.conn.recv()

    def close(self) -> None:
        self.conn.send(None)
        self.process.join()


def compare(baseline: Worker, candidate: Candidate, args: argparse.Namespace) -> dict[int, dict[str, Any]]:
    """Per batch size: slice pairs, the order within a pair alternating; each pair's ratio of medians and their
    median, the speedup."""
    worker = Worker(candidate, args)
    found: dict[int, dict[str, Any]] = {}
    try:
        for batch in args.batch_sizes:
            ratios, slices = [], []
            for pair in range(args.pairs):
                order = [("baseline", baseline), ("artifact", worker)][:: 1 if pair % 2 == 0 else -1]
                taken = {side: run.slice(batch, args.slice) for side, run in order}
                ratios.append(statistics.median(taken["baseline"]) / statistics.median(taken["artifact"]))
                slices.append(taken)
            found[batch] = {"speedup": round(statistics.median(ratios), 3), "ratios": [round(r, 3) for r in ratios],
                            "slices": slices}
    finally:
        worker.close()
    return found


def one_round(candidates: list[Candidate], args: argparse.Namespace) -> dict[str, dict[int, dict[str, Any]]]:
    """Every artifact paired with one baseline process, each artifact in a fresh process."""
    baseline = next(c for c in candidates if c.target == BASELINE_TARGET)
    worker = Worker(baseline, args)
    try:
        rows = {}
        for candidate in (c for c in candidates if c.target != BASELINE_TARGET):
            rows[candidate.name] = compare(worker, candidate, args)
            row = rows[candidate.name]
            print(f"  {candidate.name:18}", "  ".join(f"b{b} {row[b]['speedup']:.2f}x {row[b]['ratios']}"
                                                      for b in args.batch_sizes))
    finally:
        worker.close()
    return rows


def one_run(candidates: list[Candidate], args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """``--rounds`` rounds of fresh processes; an artifact's speedup is the median of its rounds' paired speedups
    (part of the host's slowness stays with a process, which only other processes can outvote)."""
    rounds = [one_round(candidates, args) for _ in range(args.rounds)]
    return {name: {"speedups": {b: round(statistics.median(r[name][b]["speedup"] for r in rounds), 3)
                                for b in args.batch_sizes}, "rounds": [r[name] for r in rounds]}
            for name in rounds[0]}


def paired_speedups(run: dict[str, dict[str, Any]], batch: int) -> dict[str, float]:
    """Each artifact's speedup at ``batch`` in one run (``one_run``)."""
    return {name: row["speedups"][batch] for name, row in run.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("artifacts", type=Path)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--slice", type=float, default=0.4, help="seconds per slice (at least 2 timed runs)")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1, help="fresh processes per artifact in each run")
    parser.add_argument("--batch-sizes", default="1,8")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--save", type=Path, default=Path("bench/results"))
    args = parser.parse_args()
    args.batch_sizes = tuple(int(b) for b in args.batch_sizes.split(","))
    candidates = [c for c in discover(args.artifacts) if c.manifest is not None]
    runs = []
    for number in range(args.runs):
        print(f"run {number + 1}")
        runs.append(one_run(candidates, args))
    summary = {f"b{batch}": agreement(paired_speedups(runs[0], batch), paired_speedups(runs[1], batch), batch)
               for batch in args.batch_sizes}
    settings = {key: str(value) if isinstance(value, Path) else value for key, value in vars(args).items()}
    save(args.save, "paired_slices", {"settings": settings, "summary": summary, "runs": runs}, args.threads)


if __name__ == "__main__":
    main()
