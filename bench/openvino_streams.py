"""OpenVINO at batch 8: our runner (one request per batch) vs benchmark_app, one request and streams.

Does OpenVINO's throughput mode (one stream per thread, asynchronous requests) buy batch-8
throughput on this host? References are benchmark_app with one synchronous batch-8 request
(what our runner does) and benchmark_app's throughput setup (one stream per thread, batch-1
requests kept in flight continuously, no batch boundary). Each measurement runs in its own
process, interleaved, because timings on this kind of host are bimodal per process.

    python bench/openvino_streams.py --artifact artifacts/yolov5n/openvino-int8
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

import numpy as np
from common import save, timing_parser
from harness_overhead import benchmark_app

from yolo_optimize.artifact import Manifest
from yolo_optimize.evaluation.measuring.measure import MeasureJob, measure
from yolo_optimize.evaluation.results import Timing
from yolo_optimize.host.processes import in_own_process
from yolo_optimize.metadata import ArtifactMetadata

BATCH = 8


def ours(folder: Path, threads: int, seconds: float, pixels: Path) -> float:
    """Images/s at batch 8 as ``optimize eval`` measures it."""
    job = MeasureJob(folder, Manifest.read(folder), pixels, Timing((BATCH,), seconds, threads), predict=False)
    measurement, _ = in_own_process(measure, job)
    result = measurement.batches[0]
    assert result.latency is not None, result.error
    return BATCH * 1000 / result.latency.p50_ms


def main() -> None:
    parser = timing_parser(__doc__, seconds=10.0)
    parser.add_argument("--artifact", type=Path, default=Path("artifacts/yolov5n/openvino-int8"))
    args = parser.parse_args()
    manifest = Manifest.read(args.artifact)
    assert manifest.target == "openvino" and manifest.entry
    xml, imgsz = args.artifact / manifest.entry, ArtifactMetadata.of(manifest).side
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
    save(args.save, "openvino_streams", {"artifact": str(args.artifact), "batch": BATCH, "threads": args.threads,
                                         "rounds_images_per_s": rounds, "median_images_per_s": medians}, args.threads)


if __name__ == "__main__":
    main()
