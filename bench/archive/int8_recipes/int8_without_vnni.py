"""AOTInductor INT8 on a CPU without VNNI: the accuracy it loses with 8-bit activations, and with the 7-bit ones the
build chooses there (torchao's ``reduce_range``, optimize/int8_aoti.py).

    python -m bench.archive.int8_recipes.int8_without_vnni [--assets ../shared/assets] [--out artifacts-novnni]   \
        (as root, on Linux)

Runs on a VNNI machine and holds oneDNN, which runs the package's int8 convolutions, to an instruction set without
VNNI (``ONEDNN_MAX_CPU_ISA``: AVX2, or AVX512_CORE, AVX-512 as before Cascade Lake), where u8 x s8 pair sums
saturate. Per instruction set, two builds of yolov5n (``--targets aoti --precisions fp32,int8``, calibrated and
gated on coco128, the gate limit lifted so every package is published with its measured drop):

- **8-bit activations**: built as on this VNNI CPU, then calibrated, gated and evaluated by the held oneDNN;
- **7-bit activations**: built as on a CPU without VNNI: a private mount namespace (``unshare -m``, so root) shows
  the build a /proc/cpuinfo without the AVX-512 and VNNI flags, which is all yolo_optimize reads of the CPU.

plus the reference, unheld, with VNNI. Each package is then evaluated on coco_val128 (accuracy; one short round of
speed) under the same instruction set. Prints the table and saves it with the environment under ``--save``.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from bench.harness import optimize, parser_for, results_folder, save
from yolo_optimize.evaluation.reporting.report import load_report

HELD_ISAS = ("AVX2", "AVX512_CORE")
WITHOUT_VNNI = re.compile(r" (avx512\w*|avx_vnni|amx_\w+)")  # every AVX-512 flag (an AVX2-only CPU), VNNI, AMX


def cpuinfo_without_vnni(path: Path) -> Path:
    """This machine's /proc/cpuinfo with the AVX-512, VNNI and AMX flags removed."""
    path.write_text(WITHOUT_VNNI.sub("", Path("/proc/cpuinfo").read_text()))
    return path


def run(isa: str | None, cpuinfo: Path | None, *args: str | Path) -> None:
    """``optimize *args`` with oneDNN held to ``isa`` (None: unheld), seeing ``cpuinfo`` as /proc/cpuinfo where
    given (a private mount namespace, the file bound over it before the command starts)."""
    prefix = ["unshare", "-m", "--propagation", "private", "sh", "-c",
              'mount --bind "$0" /proc/cpuinfo && exec "$@"', str(cpuinfo)] if cpuinfo is not None else []
    optimize(*args, env={"ONEDNN_MAX_CPU_ISA": isa} if isa else None, prefix=prefix)


def measured(out: Path, report: Path) -> dict[str, Any]:
    """The INT8 package's gate record and the evaluated accuracies."""
    manifest = json.loads((out / "yolov5n" / "aoti-int8" / "manifest.json").read_text())
    matrix = {line.artifact: line for line in load_report(report).matrix}
    gate = manifest["info"]["gate"]
    return {"route": gate["route"], "gate_drop_points": gate["drop_points"], "gate_drop_90ci": gate["drop_90ci_points"],
            "gate_images": gate["gate_images"], "executed": manifest["parity"]["executed_precision"],
            "map50_95": matrix["aoti-int8"].map50_95, "fp32_map50_95": matrix["aoti-fp32"].map50_95}


def case(args: argparse.Namespace, isa: str | None, cpuinfo: Path | None) -> dict[str, Any]:
    name = f"{isa or 'unheld'}-{'7bit' if cpuinfo else '8bit'}"
    out, report = args.out / name, args.out / f"report-{name}"
    run(isa, cpuinfo, "build", args.assets / "weights" / "yolov5n.pt", "--out", out, "--targets", "aoti",
        "--precisions", "fp32,int8", "--parity-data", args.assets / "coco_val128", "--calib-data",
        args.assets / "coco128", "--max-map-drop", "100")
    run(isa, cpuinfo, "eval", out, "--data", args.assets / "coco_val128", "--out", report, "--batch-sizes", "1",
        "--repeats", "1", "--min-time", "0.2", "--no-end-to-end")
    return {"onednn_isa": isa or "unheld (VNNI)", "built_as": "no VNNI" if cpuinfo else "VNNI", **measured(out, report)}


def main() -> None:
    parser = parser_for(__doc__)
    parser.add_argument("--assets", type=Path, default=Path("../shared/assets"))
    parser.add_argument("--out", type=Path, default=Path("artifacts-novnni"))
    parser.add_argument("--save", type=Path, default=results_folder("int8_without_vnni"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    cpuinfo = cpuinfo_without_vnni(args.out.resolve() / "cpuinfo-without-vnni")
    rows = [case(args, None, None)] + [case(args, isa, info) for isa in HELD_ISAS for info in (None, cpuinfo)]
    print("| oneDNN held to | built as on | activations | gate drop (points, 90% CI) | mAP50-95 coco_val128 | FP32 |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        bits = "7-bit" if "7-bit" in r["route"] else "8-bit"
        print(f"| {r['onednn_isa']} | {r['built_as']} | {bits} | {r['gate_drop_points']:+.2f} {r['gate_drop_90ci']} | "
              f"{r['map50_95']:.4f} | {r['fp32_map50_95']:.4f} |")
    save(args.save, "int8_without_vnni", {"rows": rows}, threads=0)  # threads 0: the builds and evals chose theirs


if __name__ == "__main__":
    main()
