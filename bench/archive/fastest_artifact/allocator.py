"""Does glibc's habit of returning freed memory to the kernel move PyTorch eager's latency?

    python -m bench.archive.fastest_artifact.allocator artifacts/ [--repeats 4] [--seconds 3] [--batch-sizes 1,8]

Why: on the Zen 4 VM the PyTorch baseline's batch-1 latency moved between about 45 and 113 ms from
one fresh process to the next while ONNX Runtime's stayed put. PyTorch eager allocates its
activations afresh in every inference; glibc hands large freed blocks back to the kernel, so each
inference page-faults them in again, at a cost the host decides. This measures the baseline as
``optimize eval`` does (measure.py, each process fresh), processes with glibc's defaults and with
``processes.ALLOCATOR_ENV`` (freed memory kept) in turns, and prints each process's p50 and peak memory. Saves
everything.
"""

from __future__ import annotations

import os
import statistics
import tempfile
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness import paired_rounds, save, timing_parser
from yolo_optimize.evaluation.measuring.discover import discover
from yolo_optimize.evaluation.measuring.measure import MeasureJob, Timing, measure
from yolo_optimize.evaluation.results import BASELINE_TARGET, Measurement
from yolo_optimize.host.processes import ALLOCATOR_ENV
from yolo_optimize.metadata import ArtifactMetadata

SETTINGS = {"glibc defaults": {}, "freed memory kept": ALLOCATOR_ENV}


def measured(job: MeasureJob, env: dict[str, str]) -> Measurement:
    """One fresh spawned process whose malloc reads exactly ``env`` (none of ALLOCATOR_ENV's names otherwise): not
    the package's ``in_own_process``, which gives every child ALLOCATOR_ENV where the environment sets none of it,
    and glibc's defaults cannot be written out (setting any of them turns glibc's adaptive thresholds off)."""
    for name in ALLOCATOR_ENV:
        os.environ.pop(name, None)
    os.environ.update(env)
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        return pool.submit(measure, job).result()[0]


def process(job: MeasureJob, name: str) -> dict[str, Any]:
    """One process's p50 per batch size, peak memory and samples with the allocator settings ``name``."""
    measurement = measured(job, SETTINGS[name])
    p50 = {f"b{b.batch}_p50_ms": b.latency.p50_ms for b in measurement.batches if b.latency}
    print(f"{name:18} " + "  ".join(f"{k} {v:7.1f}" for k, v in p50.items())
          + f"  peak {measurement.peak_rss_mb:.0f} MB", flush=True)
    return {**p50, "peak_rss_mb": measurement.peak_rss_mb,
            "samples_ms": {f"b{b.batch}": b.latency.samples_ms for b in measurement.batches if b.latency}}


def main() -> None:
    parser = timing_parser(__doc__, "allocator", 3.0)
    parser.add_argument("artifacts", type=Path)
    parser.add_argument("--batch-sizes", default="1,8")
    args = parser.parse_args()
    baseline = next(c for c in discover(args.artifacts) if c.target == BASELINE_TARGET)
    assert baseline.manifest is not None  # a built artifact's folder has one
    imgsz = ArtifactMetadata.of(baseline.manifest).side
    batch_sizes = tuple(int(b) for b in args.batch_sizes.split(","))
    with tempfile.TemporaryDirectory() as work:
        pixels = Path(work) / "images.npy"
        np.save(pixels, np.random.default_rng(0).integers(0, 256, (max(batch_sizes), imgsz, imgsz, 3), np.uint8))
        job = MeasureJob(baseline.folder, baseline.manifest, pixels, Timing(batch_sizes, args.seconds, args.threads),
                         predict=False)
        runs = paired_rounds(list(SETTINGS), args.repeats, lambda name: process(job, name))
    found = dict(zip(SETTINGS, runs))
    summary = {name: {key: [round(min(v), 1), round(statistics.median(v), 1), round(max(v), 1)]
                      for key in runs[0] if key != "samples_ms" for v in [[r[key] for r in runs]]}
               for name, runs in found.items()}
    for name, figures in summary.items():
        print(f"{name:18} " + "  ".join(f"{key} min/median/max {low}/{mid}/{high}"
                                        for key, (low, mid, high) in figures.items()))
    save(args.save, "allocator", {"settings": {"artifacts": str(args.artifacts), "seconds": args.seconds,
                                               "repeats": args.repeats, "batch_sizes": list(batch_sizes)},
                                  "summary": summary, "processes": found}, args.threads)


if __name__ == "__main__":
    main()
