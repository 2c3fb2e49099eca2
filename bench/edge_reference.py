"""Issue 45: our NCNN and ExecuTorch files against Ultralytics' own exports of the same checkpoint, measured in one
evaluation: the same runtimes, runners, threads and images.

    pip install --no-deps --target /tmp/pnnx-ultralytics pnnx==20260526
    python -m bench.edge_reference --assets ../shared/assets --pnnx /tmp/pnnx-ultralytics \
        --out /tmp/edge-reference --report bench/results/<cpu kind>/edge_reference

1. A yolo11n with seeded random weights (``torch.manual_seed(0)``, Ultralytics' own initialization) saved as an
   Ultralytics .pt: no trained YOLO11 is reachable offline, so accuracy is not compared (random weights detect
   nothing), only speed.
2. The installed Ultralytics exports it as its users do, ``YOLO(pt).export(format=...)``: ``ncnn`` (FP32),
   ``ncnn`` with ``quantize=16`` (FP16) and ``executorch``, each in a child process. Its NCNN exporter pins
   ``pnnx==20260526`` (the pnnx release after it segfaults in NCNN inference, pnnx#293), held in the ``--pnnx``
   folder put first on that process's path; our build uses the installed pnnx.
3. Our build of the same .pt: ncnn FP32, FP16 and INT8, executorch FP32 and INT8 (INT8 calibrated on coco128; its
   gate is vacuous on random weights, and says so).
4. One evaluation of ours with Ultralytics' files added (``--add``), batch 1, ``--repeats`` interleaved rounds on
   ``--images`` coco_val128 images, every row measured in the latency configuration Ultralytics' own NCNN and
   ExecuTorch backends use (one image a call). ``--skip-build --skip-eval`` reprints the saved report.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from bench.harness import optimize, study_parser
from yolo_optimize.evaluation.reporting.report import load_report

IMGSZ = 640
CHECKPOINT = "yolo11n-seed0.pt"
ULTRALYTICS_EXPORTS = (("ncnn-fp32", "format='ncnn'"), ("ncnn-fp16", "format='ncnn', quantize=16"),
                       ("executorch-fp32", "format='executorch'"))
OUR_BUILDS = (("ncnn,executorch", "fp32"), ("ncnn", "fp16"), ("ncnn,executorch", "int8"))


def python(code: str, *, path: Path | None = None) -> None:
    env = {**os.environ, "YOLO_OFFLINE": "1"}
    if path:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(path), env.get("PYTHONPATH"))))
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def build(args: argparse.Namespace, work: Path) -> list[Path]:
    """The checkpoint, Ultralytics' exports (returned: what --add takes) and our build of it."""
    checkpoint = work / CHECKPOINT
    work.mkdir(parents=True, exist_ok=True)
    python("import torch\nfrom ultralytics import YOLO\ntorch.manual_seed(0)\n"
           f"YOLO('yolo11n.yaml').save({str(checkpoint)!r})")
    added = []
    for name, export in ULTRALYTICS_EXPORTS:
        folder = work / "ultralytics" / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / CHECKPOINT).write_bytes(checkpoint.read_bytes())
        python("import pnnx\nfrom ultralytics import YOLO\nprint('pnnx', pnnx.__version__)\n"
               f"print(YOLO({str(folder / CHECKPOINT)!r}).export({export}, imgsz={IMGSZ}))", path=args.pnnx)
        added.append(next(p for p in folder.iterdir() if p.is_dir()))
    for targets, precisions in OUR_BUILDS:
        calibration = ["--calib-data", args.assets / "coco128"] if precisions == "int8" else []
        optimize("build", checkpoint, "--imgsz", IMGSZ, "--targets", targets, "--precisions", precisions,
                 "--parity-data", args.assets / "coco_val128", "--out", work / "ours", *calibration)
    return added


def main() -> None:
    parser = study_parser(__doc__, "edge_reference", "/tmp/edge-reference", "3")
    parser.add_argument("--pnnx", type=Path, default=Path("/tmp/pnnx-ultralytics"),
                        help="a folder holding pnnx==20260526 (pip install --no-deps --target)")
    parser.add_argument("--images", default="32")
    args = parser.parse_args()
    if not args.skip_eval:
        exports = [args.out / "ultralytics" / name for name, _ in ULTRALYTICS_EXPORTS]
        added = build(args, args.out) if not args.skip_build else [
            next(p for p in folder.iterdir() if p.is_dir()) for folder in exports]
        adds = [item for path in added for item in ("--add", path)]
        optimize("eval", args.out / "ours", "--data", args.assets / "coco_val128", "--max-images", args.images,
                 "--batch-sizes", "1", "--repeats", args.repeats, "--min-time", "1", "--no-end-to-end",
                 "--out", args.report, "--family", "ultralytics", *adds)
    report = load_report(args.report)
    for line in report.matrix:
        cell = line.at(1)
        print(f"{line.artifact:40} {line.executed_precision:28.28} {cell.throughput_ips} img/s {cell.speedup}x")


if __name__ == "__main__":
    main()
