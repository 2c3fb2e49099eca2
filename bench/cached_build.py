"""How long a build with nothing to do takes: yolov5n's 8 nodes, all cached, timed as a user runs the command.

    python -m bench.cached_build --assets ../shared/assets [--runs 5]

Builds yolov5n for TorchScript, ONNX and OpenVINO in FP32 and FP16 (load, reference, the two TorchScript and
four ONNX/OpenVINO nodes: 8 that run on a CPU) into a temporary folder, then runs the same command again
``--runs`` times (every node cached: files trusted by their recorded stamp) and as many times with
``--verify`` (every byte hashed again), each the wall time of the whole ``optimize build`` process. Goal
(issue 22): under one second without --verify. Saves the runs under bench/results/.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from bench.harness import optimize, parser_for, results_folder, save

TARGETS = "torchscript,onnx,openvino"


def timed(*args: str | Path) -> float:
    """The wall time of one ``optimize`` process, its output kept out of the benchmark's."""
    return optimize(*args, capture=True).wall_s


def main() -> None:
    parser = parser_for(__doc__)
    parser.add_argument("--assets", type=Path, default=Path("../shared/assets"))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--save", type=Path, default=results_folder("cached_build"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cached-build-") as out:
        command = ["build", "yolov5n", "--weights-dir", args.assets / "weights", "--parity-data",
                   args.assets / "coco_val128", "--targets", TARGETS, "--out", out]
        first = timed(*command)
        cached = [timed(*command) for _ in range(args.runs)]
        verified = [timed(*command, "--verify") for _ in range(args.runs)]
    print(f"first build {first:.1f} s; cached rebuild median {statistics.median(cached):.2f} s (runs "
          f"{', '.join(f'{t:.2f}' for t in cached)}); with --verify {statistics.median(verified):.2f} s")
    save(args.save, "cached_build", {"targets": TARGETS, "first_s": round(first, 2),
                                     "cached_s": [round(t, 3) for t in cached],
                                     "verify_s": [round(t, 3) for t in verified]}, 2)


if __name__ == "__main__":
    main()
