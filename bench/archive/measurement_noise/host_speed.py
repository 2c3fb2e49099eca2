"""How steady is this host? One artifact run back to back in one process, its throughput per window.

    python -m bench.archive.measurement_noise.host_speed --artifact artifacts/yolov5n/onnx-fp32 [--seconds 60] \
        [--window 1]

Why: on the hosts of this project a process sometimes runs 1.4-1.7x slower than the same process
a few seconds earlier, with no other process running and no steal time reported. This shows how
long the host stays in each state, which decides how far apart two measurements may be and still
be compared (README, "Reproducibility"). Prints every window and saves them with a summary.
"""

from __future__ import annotations

import itertools
import statistics
import time
from pathlib import Path

import numpy as np

from bench.harness import save, timing_parser
from yolo_optimize.artifact import Manifest
from yolo_optimize.images import to_input
from yolo_optimize.metadata import ArtifactMetadata
from yolo_optimize.runtime.runners import open_runner

SLOW = 1.25  # a window this much slower than the fastest one counts as the slow state


def windows(folder: Path, seconds: float, window: float, threads: int) -> list[float]:
    """Images per second in each ``window`` of ``seconds`` of back-to-back batch-1 inference."""
    manifest = Manifest.read(folder)
    imgsz = ArtifactMetadata.of(manifest).side
    image = to_input(np.random.default_rng(0).integers(0, 256, (1, imgsz, imgsz, 3), dtype=np.uint8))
    found = []
    with open_runner(folder, manifest, threads=threads) as runner:
        for _ in range(3):
            runner.infer(image)
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            started, runs = time.perf_counter(), 0
            while time.perf_counter() - started < window:
                runner.infer(image)
                runs += 1
            found.append(round(runs / (time.perf_counter() - started), 2))
            print(f"{len(found) * window:6.1f} s {found[-1]:8.2f} img/s")
    return found


def main() -> None:
    parser = timing_parser(__doc__, "host_speed", 60.0)
    parser.add_argument("--artifact", type=Path, default=Path("artifacts/yolov5n/onnx-fp32"))
    parser.add_argument("--window", type=float, default=1.0, help="seconds per throughput sample")
    args = parser.parse_args()
    found = windows(args.artifact, args.seconds, args.window, args.threads)
    fastest = max(found)
    slow = [value * SLOW < fastest for value in found]
    stretches = [len(list(group)) for _, group in itertools.groupby(slow)]  # windows in one state in a row
    summary = {"fastest_ips": fastest, "median_ips": statistics.median(found), "slowest_ips": min(found),
               "fastest_over_slowest": round(fastest / min(found), 2), "slow_share": round(sum(slow) / len(slow), 2),
               "state_changes": len(stretches) - 1, "longest_stretch_s": max(stretches) * args.window,
               "median_stretch_s": statistics.median(stretches) * args.window}
    print(", ".join(f"{key} {value}" for key, value in summary.items()))
    save(args.save, "host_speed", {"settings": {"artifact": str(args.artifact), "seconds": args.seconds,
                                                "window_s": args.window, "threads": args.threads},
                                   "windows_ips": found, "summary": summary}, args.threads)


if __name__ == "__main__":
    main()
