"""Our openvino-int8 against the recipe a user would copy: the same ONNX quantized with NNCF's documented defaults.

    python bench/int8_vs_nncf_defaults.py --assets ../shared/assets [--rounds 3] [--seconds 10]

Issue 31. Builds yolov5n's openvino-int8 as the README does (128 coco128 images, the gate on coco128,
`--max-map-drop 1.0`) into `--out`; quantizes the build's own `onnx-fp32` with `ov.convert_model` and
`nncf.quantize(model, calibration)` on the same 128 images, every other argument NNCF's default; then times
both with OpenVINO's `benchmark_app` (latency hint at batch 1, throughput hint at batch 8; each run a fresh
process, the two IRs alternating in `--rounds` interleaved rounds): ours with the inference precision its
metadata carries (`-infer_precision`, what our runners apply), the defaults' as benchmark_app runs it
unasked. Their accuracy comes from `optimize eval` on coco_val128 (the default IR added with `--add`).
Saves everything under `--save`.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from common import save

from yolo_optimize.artifact import Manifest
from yolo_optimize.evaluation.reporting.report import load_report
from yolo_optimize.metadata import ArtifactMetadata

HINTS = {"bf16": "bf16", "fp32": "f32"}
MODES = {"latency b1": ("latency", 1), "throughput b8": ("throughput", 8)}


def optimize(*args: str | Path) -> None:
    subprocess.run([sys.executable, "-m", "yolo_optimize", *map(str, args)], check=True)


def calibration_inputs(images: list[Path], imgsz: int) -> list[np.ndarray]:
    """The images as a copied recipe's calibration reads them: letterboxed as yolov5 does, NCHW, /255."""
    from yolo_optimize.families import family_named

    family = family_named("yolov5")
    return [np.ascontiguousarray(family.preprocess(path, imgsz).pixels.transpose(2, 0, 1)[None], dtype=np.float32)
            / 255 for path in images]


def nncf_defaults(onnx: Path, inputs: list[np.ndarray], out: Path) -> Path:
    """The recipe of NNCF's and OpenVINO's docs: convert, then quantize with a calibration dataset, defaults else."""
    import nncf
    import openvino as ov

    quantized = nncf.quantize(ov.convert_model(str(onnx)), nncf.Dataset(inputs))
    xml = out / "yolov5n.xml"
    ov.save_model(quantized, str(xml))
    return xml


def benchmark_app(xml: Path, hint: str, batch: int, imgsz: int, seconds: float,
                  infer_precision: str | None) -> float:
    """img/s: batch over the median latency with the latency hint; benchmark_app's throughput with the other."""
    precision = ["-infer_precision", infer_precision] if infer_precision else []
    with tempfile.TemporaryDirectory() as home:
        command = [str(Path(sys.executable).parent / "benchmark_app"), "-m", str(xml), "-d", "CPU", "-hint", hint,
                   *precision, "-shape", f"[{batch},3,{imgsz},{imgsz}]", "-t", str(max(1, round(seconds)))]
        output = subprocess.run(command, capture_output=True, text=True, check=True, env={"HOME": home}).stdout
    if hint == "latency":
        return batch * 1000 / float(re.search(r"Median:\s+([\d.]+) ms", output).group(1))  # type: ignore[union-attr]  # no match fails the benchmark here
    return float(re.search(r"Throughput:\s+([\d.]+) FPS", output).group(1))  # type: ignore[union-attr]  # no match fails the benchmark here


def accuracy(out: Path, xml: Path, data: Path, report: Path) -> dict[str, float]:
    optimize("eval", out, "--add", f"yolov5={xml}", "--data", data, "--out", report, "--batch-sizes", "1",
             "--min-time", "0", "--repeats", "1", "--no-end-to-end")
    return {line.artifact: line.map50_95 for line in load_report(report).matrix if line.map50_95 is not None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assets", type=Path, default=Path("../shared/assets"))
    parser.add_argument("--out", type=Path, default=Path("artifacts-int8-vs-nncf"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--save", type=Path, default=Path("bench/results"))
    args = parser.parse_args()
    calib = args.assets / "coco128"
    optimize("build", "yolov5n", "--weights-dir", args.assets / "weights", "--targets", "openvino", "--precisions",
             "fp32,int8", "--calib-data", calib, "--out", args.out)
    model = args.out / "yolov5n"
    ours = Manifest.read(model / "openvino-int8")
    metadata = ArtifactMetadata.of(ours)
    imgsz, float_precision = metadata.side, metadata.extra["float_precision"]
    calibration = sorted((calib / "images").rglob("*.jpg"))[:128]
    defaults_dir = args.out / "nncf-defaults"
    defaults_dir.mkdir(parents=True, exist_ok=True)
    defaults = nncf_defaults(model / "onnx-fp32" / "yolov5n.onnx", calibration_inputs(calibration, imgsz),
                             defaults_dir)
    irs = {"ours": (model / "openvino-int8" / str(ours.entry), HINTS[float_precision]),
           "nncf defaults": (defaults, None)}
    rates: dict[str, dict[str, list[float]]] = {mode: {name: [] for name in irs} for mode in MODES}
    for round_ in range(args.rounds):
        for mode, (hint, batch) in MODES.items():
            for name, (xml, precision) in (irs.items() if round_ % 2 == 0 else reversed(irs.items())):
                rates[mode][name].append(round(benchmark_app(xml, hint, batch, imgsz, args.seconds, precision), 2))
                print(f"round {round_ + 1} {mode} {name}: {rates[mode][name][-1]} img/s", flush=True)
    maps = accuracy(args.out, defaults, args.assets / "coco_val128", args.out / "report")
    summary: dict[str, Any] = {
        mode: {"ours_img_s": found["ours"], "defaults_img_s": found["nncf defaults"],
               "median_ratio_ours_over_defaults": round(statistics.median(
                   a / b for a, b in zip(found["ours"], found["nncf defaults"])), 3)}
        for mode, found in rates.items()}
    result = {"ours_float_precision": float_precision,
              "ours_float_precision_evidence": ours.info.get("float_precision_evidence"),
              "ours_gate": {k: ours.info["gate"][k] for k in ("route", "drop_points", "fp32_score")},
              "map50_95_coco_val128": maps, "rounds": args.rounds, "seconds": args.seconds, "rates": summary}
    print(json.dumps(result, indent=2))
    save(args.save, "int8_vs_nncf_defaults", result, threads=2)


if __name__ == "__main__":
    main()
