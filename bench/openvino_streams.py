"""Batch-8 throughput of the OpenVINO runner (one stream per thread, async requests) vs one batch-8 request.

Each measurement runs in its own process, interleaved (ours, one request, OpenVINO's throughput
mode, ours, ...), because timings on this kind of host are bimodal per process. References are
benchmark_app with one synchronous batch-8 request (the latency hint's single stream) and with
benchmark_app's own throughput setup (one stream per thread, asynchronous batch-1 requests).

    python bench/openvino_streams.py --artifact artifacts/yolov5n/openvino-int8
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from harness_overhead import benchmark_app

from yolo_optimize.artifact import Manifest
from yolo_optimize.evaluate.evaluator import _in_own_process
from yolo_optimize.evaluate.measure import MeasureJob
from yolo_optimize.evaluate.report import environment

BATCH = 8


def ours(folder: Path, threads: int, seconds: float, pixels: Path) -> float:
    """Images/s at batch 8 as ``optimize eval`` measures it."""
    job = MeasureJob(folder, Manifest.read(folder), pixels, (BATCH,), seconds, threads, "cpu", detect=False)
    measurement, _ = _in_own_process(job)
    result = measurement.batches[0]
    assert result.latency is not None, result.error
    return BATCH * 1000 / result.latency.p50_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--artifact", type=Path, default=Path("artifacts/yolov5n/openvino-int8"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--save", type=Path, default=Path("bench/results"))
    args = parser.parse_args()
    manifest = Manifest.read(args.artifact)
    assert manifest.target == "openvino" and manifest.entry
    xml, imgsz = args.artifact / manifest.entry, manifest.metadata["imgsz"][0]
    rounds = []
    with tempfile.TemporaryDirectory() as work:
        pixels = Path(work) / "images.npy"
        np.save(pixels, np.random.default_rng(0).integers(0, 255, (BATCH, imgsz, imgsz, 3), dtype=np.uint8))
        for _ in range(args.repeats):
            rounds.append({"ours": ours(args.artifact, args.threads, args.seconds, pixels),
                           "one_request": benchmark_app(xml, args.threads, args.seconds, imgsz, BATCH)["images_per_s"],
                           "throughput_mode": benchmark_app(xml, args.threads, args.seconds, imgsz, 1,
                                                            streams=args.threads)["images_per_s"]})
    medians = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
    for r in rounds:
        print("   ".join(f"{key} {value:6.1f} img/s" for key, value in r.items()))
    print("median: " + "   ".join(f"{key} {value:6.1f}" for key, value in medians.items()))
    args.save.mkdir(parents=True, exist_ok=True)
    path = args.save / f"openvino_streams-{datetime.now(timezone.utc):%Y%m%dT%H%M%S}.json"
    path.write_text(json.dumps({"artifact": str(args.artifact), "batch": BATCH, "threads": args.threads,
                                "rounds_images_per_s": rounds, "median_images_per_s": medians,
                                "environment": environment(args.threads)}, indent=2) + "\n")
    print(f"saved {path}")


if __name__ == "__main__":
    main()
