"""Does our harness distort OpenVINO? Our p50 vs benchmark_app's median, same IR, threads, precision.

Runs both in separate processes, interleaved (ours, theirs, ours, theirs, ...), because
timings on this kind of host are bimodal per process. Prints and saves the numbers.

    python bench/harness_overhead.py --artifact artifacts/yolov5n/openvino-fp32
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from common import save, timing_parser

from yolo_optimize.artifact import Manifest
from yolo_optimize.evaluation.measuring.measure import MeasureJob, measure
from yolo_optimize.evaluation.results import Timing
from yolo_optimize.host.processes import in_own_process
from yolo_optimize.metadata import ArtifactMetadata


def ours(folder: Path, threads: int, seconds: float, pixels: Path) -> float:
    """p50 latency (ms) of batch 1 as ``optimize eval`` measures it."""
    job = MeasureJob(folder, Manifest.read(folder), pixels, Timing((1,), seconds, threads), predict=False)
    measurement, _ = in_own_process(measure, job)
    latency = measurement.batches[0].latency
    assert latency is not None, measurement.batches[0].error
    return latency.p50_ms


def benchmark_app(xml: Path, threads: int, seconds: float, imgsz: int, batch: int = 1,
                  streams: int = 1) -> dict[str, float]:
    """benchmark_app's median latency (ms) and throughput (img/s), f32 execution.

    One stream runs one synchronous request (what the latency hint gives): img/s is batch over
    the median. More streams run asynchronous requests, as the throughput hint does: img/s is
    its FPS, which counts requests, so use batch 1 there.
    """
    mode = ["-api", "sync"] if streams == 1 else ["-api", "async", "-nireq", str(streams)]
    with tempfile.TemporaryDirectory() as home:
        command = [str(Path(sys.executable).parent / "benchmark_app"), "-m", str(xml), "-d", "CPU", "-hint", "none",
                   *mode, "-nstreams", str(streams), "-nthreads", str(threads), "-infer_precision", "f32",
                   "-shape", f"[{batch},3,{imgsz},{imgsz}]", "-t", str(max(1, round(seconds)))]
        output = subprocess.run(command, capture_output=True, text=True, check=True, env={"HOME": home}).stdout
    median = float(re.search(r"Median:\s+([\d.]+) ms", output).group(1))  # type: ignore[union-attr]  # no match fails the benchmark here
    throughput = float(re.search(r"Throughput:\s+([\d.]+) FPS", output).group(1))  # type: ignore[union-attr]  # no match fails the benchmark here
    return {"median_ms": median, "images_per_s": batch * 1000 / median if streams == 1 else throughput}


def main() -> None:
    parser = timing_parser(__doc__, seconds=10.0)
    parser.add_argument("--artifact", type=Path, default=Path("artifacts/yolov5n/openvino-fp32"))
    args = parser.parse_args()
    manifest = Manifest.read(args.artifact)
    assert manifest.target == "openvino" and manifest.precision == "fp32" and manifest.entry
    imgsz = ArtifactMetadata.of(manifest).side
    with tempfile.TemporaryDirectory() as work:
        pixels = Path(work) / "images.npy"
        np.save(pixels, np.random.default_rng(0).integers(0, 255, (1, imgsz, imgsz, 3), dtype=np.uint8))
        pairs = [(ours(args.artifact, args.threads, args.seconds, pixels),
                  benchmark_app(args.artifact / manifest.entry, args.threads, args.seconds, imgsz)["median_ms"])
                 for _ in range(args.repeats)]
    ratios = [a / b for a, b in pairs]
    result = {"pairs_ms": pairs, "ours_p50_ms": statistics.median(a for a, _ in pairs),
              "benchmark_app_median_ms": statistics.median(b for _, b in pairs),
              "ratio_median": statistics.median(ratios),
              "ratios": ratios, "threads": args.threads}
    for ours_ms, theirs_ms in pairs:
        print(f"ours p50 {ours_ms:7.2f} ms   benchmark_app median {theirs_ms:7.2f} ms   "
              f"ratio {ours_ms / theirs_ms:.3f}")
    print(f"median ratio ours/benchmark_app: {result['ratio_median']:.3f} (goal: within 1.10)")
    save(args.save, "harness_overhead", result, args.threads)


if __name__ == "__main__":
    main()
