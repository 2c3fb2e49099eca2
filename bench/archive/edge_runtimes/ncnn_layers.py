"""Issue 45: where ncnn-int8's time goes against ncnn-fp32's, layer kind by layer kind, from NCNN's own timer.

    python -m bench.archive.edge_runtimes.ncnn_layers --artifacts <a build's folder> --ncnn /tmp/ncnn-benchmark \\
        --save bench/results/<cpu kind>/ncnn_layers

The PyPI ncnn is built without ``NCNN_BENCHMARK``, NCNN's per-layer timer. One with it, from the source distribution
of the installed version (its setup.py takes CMake options from ``EXTRA_CMAKE_ARGS``; the runtime's x86 kernels
chosen at build time for the host, instead of dispatched at run time, which cuts the build to ~200 objects)::

    pip download --no-deps --no-binary :all: ncnn==<version>   # or its tar.gz from PyPI by URL
    EXTRA_CMAKE_ARGS="-DNCNN_VULKAN=OFF -DNCNN_BENCHMARK=ON -DNCNN_RUNTIME_CPU=OFF -DNCNN_AVX512=ON \\
        -DNCNN_AVX512VNNI=ON -DNCNN_AVX512BF16=OFF -DNCNN_AVX512FP16=OFF -DNCNN_AVXVNNI=OFF -DNCNN_FMA4=OFF \\
        -DNCNN_XOP=OFF" pip wheel --no-deps --no-build-isolation <its folder>
    pip install --no-deps --target /tmp/ncnn-benchmark ncnn-*.whl

(the AVX-512 options for a host with AVX-512 VNNI; on an AVX2-only one, ``-DNCNN_AVX512=OFF``). Reads
``<artifacts>/yolov5n/ncnn-fp32`` and ``ncnn-int8`` (``optimize build yolov5n.pt --targets ncnn --precisions
fp32,int8``) and runs ``optimize profile`` on each in --repeats interleaved rounds, each a fresh process tree: with
that ncnn first on the path (per-layer times), and with the installed wheel (its forward time only, so the timed
build can be set against what users run). Prints, per layer kind and per convolution class (stem, 3x3 stride 2,
3x3 stride 1, 1x1), each file's median ms per image and FP32's over INT8's, and per round INT8's speedup (the wheel's
forward time, the timed build's, its per-layer sum) and the timed build's forward time over the wheel's; saves the
rounds, the tables and each convolution's times with the environment.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from bench.harness import by_round, optimize, paired_rounds, save, timing_parser
from yolo_optimize.artifact import Manifest
from yolo_optimize.runtime.runners.ncnn import CONVOLUTIONS, NcnnLayer, read_layers

FILES = ("ncnn-fp32", "ncnn-int8")
TIMERS = ("benchmark", "wheel")  # the NCNN_BENCHMARK build, and the installed wheel


def profiled(folder: Path, data: Path, threads: int, seconds: float, ncnn: Path | None) -> dict[str, Any]:
    """One ``optimize profile`` at batch 1 in its own process tree; ``ncnn`` (a folder holding a built ncnn) first on
    its path and its children's. Its output is captured: the benchmark build prints every pass's per-layer lines."""
    path = os.pathsep.join(filter(None, (str(ncnn), os.environ.get("PYTHONPATH")))) if ncnn is not None else None
    with tempfile.TemporaryDirectory(prefix="ncnn-layers-") as out:
        optimize("profile", folder, "--data", data, "--threads", threads, "--min-time", seconds, "--largest-batch",
                 "1", "--out", out, env={"PYTHONPATH": path} if path else None, capture=True)
        profile = json.loads((Path(out) / "profile.json").read_text())
    return {key: profile[key] for key in ("executed_precision", "forward_ms", "layers_ms", "profiled_pass_ms",
                                          "by_kind_ms", "layers", "unavailable")}


def kinds_table(rounds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per layer kind, the median over rounds of each file's ms per image, slowest kind in FP32 first."""
    kinds = {kind for entry in rounds for name in FILES for kind in entry[name]["benchmark"]["by_kind_ms"]}

    def median_ms(name: str, kind: str) -> float:
        return statistics.median(entry[name]["benchmark"]["by_kind_ms"].get(kind, 0.0) for entry in rounds)

    rows = [{"kind": kind, **{name: round(median_ms(name, kind), 3) for name in FILES}} for kind in kinds]
    return sorted(rows, key=lambda row: -row["ncnn-fp32"])


def convolutions_table(rounds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each convolution's median ms in both files, its GFLOP per image and what INT8 ran it in."""
    def layers(name: str, entry: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return {layer["name"]: layer for layer in entry[name]["benchmark"]["layers"] if layer["gflops"] is not None}

    first = layers("ncnn-int8", rounds[0])
    return [{"name": layer_name, "gflops": first[layer_name]["gflops"], "int8_executed": first[layer_name]["executed"],
             **{name: round(statistics.median(layers(name, entry)[layer_name]["ms"] for entry in rounds), 4)
                for name in FILES}} for layer_name in first]


def convolution_class(layer: NcnnLayer) -> str:
    """The groups NCNN runs with different kernels: the 6x6 stride-2 stem on 3 channels, 3x3 at stride 2 (im2col GEMM),
    3x3 at stride 1 (Winograd), 1x1; the Detect head's output convolutions (1x1, float in the INT8 file) apart."""
    kernel, stride = layer.param(1), layer.param(3, 1)
    if not layer.param(8):
        return "Detect outputs, 1x1 (fp32 in both)"
    return f"{kernel}x{kernel} stride {stride}" + (" (stem)" if kernel not in (1, 3) else "")


def classes_table(rounds: list[dict[str, Any]], param: Path) -> list[dict[str, Any]]:
    """Per convolution class, the median over rounds of each file's summed ms per image."""
    classes = {layer.name: convolution_class(layer) for layer in read_layers(param) if layer.kind in CONVOLUTIONS}

    def class_ms(name: str, entry: dict[str, Any], group: str) -> float:
        return sum(layer["ms"] for layer in entry[name]["benchmark"]["layers"] if classes.get(layer["name"]) == group)

    return [{"class": group, "convolutions": list(classes.values()).count(group),
             **{name: round(statistics.median(class_ms(name, entry, group) for entry in rounds), 3) for name in FILES}}
            for group in sorted(set(classes.values()))]


def ratios(rounds: list[dict[str, Any]], timer: str, key: str) -> list[float]:
    """Per round, FP32's ``key`` over INT8's (the speedup) with one build of ncnn."""
    return [round(entry["ncnn-fp32"][timer][key] / entry["ncnn-int8"][timer][key], 3) for entry in rounds]


def main() -> None:
    parser = timing_parser(__doc__, "ncnn_layers", 1.0)
    parser.add_argument("--artifacts", type=Path, required=True, help="a build's --out, with yolov5n's ncnn files")
    parser.add_argument("--ncnn", type=Path, required=True, help="the folder an NCNN_BENCHMARK ncnn is installed in")
    parser.add_argument("--data", type=Path, default=Path("../shared/assets/coco_val128"))
    args = parser.parse_args()
    def run(variant: tuple[str, str]) -> dict[str, Any]:
        name, timer = variant
        found = profiled(args.artifacts / "yolov5n" / name, args.data, args.threads, args.seconds,
                         args.ncnn if timer == "benchmark" else None)
        print(f"{name} with the {timer} build: forward {found['forward_ms']:.2f} ms; layers {found['layers_ms']:.2f} "
              f"ms of a {found['profiled_pass_ms']:.2f} ms profiled pass", flush=True)
        return found

    variants = [(name, timer) for name in FILES for timer in TIMERS]
    rounds = [{name: {timer: entry[name, timer] for timer in TIMERS} for name in FILES}
              for entry in by_round(variants, paired_rounds(variants, args.repeats, run))]
    param = args.artifacts / "yolov5n" / "ncnn-int8" / str(Manifest.read(args.artifacts / "yolov5n" /
                                                                      "ncnn-int8").entry)
    summary: dict[str, Any] = {"kinds": kinds_table(rounds), "classes": classes_table(rounds, param),
               "int8_speedup_wheel_forward": ratios(rounds, "wheel", "forward_ms"),
               "int8_speedup_benchmark_forward": ratios(rounds, "benchmark", "forward_ms"),
               "int8_speedup_benchmark_layers": ratios(rounds, "benchmark", "layers_ms"),
               "benchmark_over_wheel_forward": {name: [round(entry[name]["benchmark"]["forward_ms"] /
                                                             entry[name]["wheel"]["forward_ms"], 3) for entry in rounds]
                                                for name in FILES}}
    for table in ("kinds", "classes"):
        print(f"| {table} | ncnn-fp32 ms | ncnn-int8 ms | fp32 / int8 |")
        for row in summary[table]:
            speedup = row["ncnn-fp32"] / row["ncnn-int8"] if row["ncnn-int8"] else float("nan")
            print(f"| {row.get('kind') or row['class']} | {row['ncnn-fp32']:.3f} | {row['ncnn-int8']:.3f} | "
                  f"{speedup:.2f} |")
    for key in ("int8_speedup_wheel_forward", "int8_speedup_benchmark_forward", "int8_speedup_benchmark_layers",
                "benchmark_over_wheel_forward"):
        print(f"{key}: {summary[key]}")
    save(args.save, "ncnn_layers", {"artifacts": str(args.artifacts), "rounds": rounds, **summary,
                                    "convolutions": convolutions_table(rounds)}, args.threads)


if __name__ == "__main__":
    main()
