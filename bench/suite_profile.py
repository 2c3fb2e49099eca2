"""Where the test suite's time goes: a py-spy sampling of every process of one full run, summed by category.

Run the suite under py-spy (every process it starts included, without stopping them), then this on its output:

    py-spy record --nonblocking --subprocesses --rate 10 --format raw -o suite.raw -- python -m pytest
    python bench/suite_profile.py suite.raw --rate 10 --label <commit>

A category's seconds are the samples (over every process, busy ones only: py-spy leaves out idle threads) of the
stacks that pass through one of its frames, at the sampling rate; a stack counts once per category, and categories
overlap (an import inside an export counts in both). Saved as JSON, with the host, in --save.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

from common import save

# category -> a pattern any one frame of a stack matches ("function (file:line)", as py-spy's raw output names them)
CATEGORIES = {
    "every import": r"^_find_and_load \(<frozen importlib",
    "import yolov5 (its package's __init__)": r"^<module> \((.*/)?yolov5/__init__\.py",
    "import torch": r"^<module> \((.*/)?torch/__init__\.py",
    "import torchvision": r"^<module> \((.*/)?torchvision/__init__\.py",
    "import executorch.exir": r"^<module> \((.*/)?exir/__init__\.py",
    "build nodes (every stage of every build)": r"^build_node \(.*yolo_optimize/building/dag\.py",
    "ONNX export (torch.onnx.export, dynamo)": r"^OnnxExport\.run \(",
    "NNCF INT8 (ONNX and OpenVINO)": r"^NncfInt8\.run \(",
    "ExecuTorch lowering (to_edge_transform_and_lower)": r"^to_edge_transform_and_lower \(",
    "AOTInductor compiles": r"^compile_fx_aot \(",
    "parity checks": r"^check_parity \(",
    "INT8 gates: scoring the candidates": r"^Gate\.score \(",
    "INT8 gates: bootstrap": r"^PairedBootstrap\.",
    "measuring processes (evaluate's rows)": r"^serve \(.*yolo_optimize/evaluation/measuring/interleave\.py",
    "model facts (GFLOPs)": r"^model_facts \(",
}


def categorized(raw: Path, rate: float) -> tuple[float, dict[str, float]]:
    """(seconds sampled in all, seconds per category) of a py-spy raw file."""
    patterns = {name: re.compile(pattern) for name, pattern in CATEGORIES.items()}
    total, found = 0, Counter[str]()
    with raw.open(errors="replace") as lines:
        for line in lines:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not count.isdigit():
                continue
            total += int(count)
            frames = stack.split(";")
            for name, pattern in patterns.items():
                if any(pattern.search(frame) for frame in frames):
                    found[name] += int(count)
    return total / rate, {name: round(found[name] / rate, 1) for name in CATEGORIES}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("raw", type=Path, help="py-spy record --format raw output")
    parser.add_argument("--rate", type=float, default=10.0, help="the samples per second it was recorded at")
    parser.add_argument("--label", required=True, help="what was run (the commit)")
    parser.add_argument("--save", type=Path, default=Path("bench/results/avx2"), help="the CPU kind's results folder")
    args = parser.parse_args()
    total, seconds = categorized(args.raw, args.rate)
    for name, value in seconds.items():
        print(f"{value:8.1f} s  {value / total:6.1%}  {name}")
    print(f"{total:8.1f} s  sampled in all (busy samples of every process)")
    save(args.save, f"suite_profile-{args.label}", {"label": args.label, "rate": args.rate,
                                                    "sampled_s": round(total, 1), "categories_s": seconds}, 2)


if __name__ == "__main__":
    main()
