"""Issue 75: yolov5n's ONNX Runtime and NCNN files checked on emulated ARM cores: this machine against each core on
the same tensors, each INT8 file's held-out gate score here and on each core, and what ``--check-on`` costs a build.

    python -m bench.arm_check --sizes 320,640 --cores cortex-a72,cortex-a76    # needs: sudo optimize arm-setup

1. For each size, a build of onnx and ncnn in FP32, FP16 and INT8 (calibrated on ``--calib-images`` of coco128, gated
   on ``--gate-images`` held out of it) without ``--check-on``, then the same build with ``--check-on`` one core
   into a folder of its own, for each core: its wall time over the first's is that core's checks' cost (every node
   rebuilds there: the checked build's keys differ). A file the core refuses is not published: its reason is kept.
2. From each checked build's manifests: each file's parity on the core against PyTorch (what ran there, the
   tolerance it was held to) and each INT8 file's gate score here and there.
3. Each file of the unchecked build run here and on each core on the same 4 letterboxed coco_val128 images (the
   package's runner here, ``arm.runs.run_on_arm`` there): the largest box and score differences between the two, and
   the detections after NMS they share: the issue's table. ExecuTorch is not on the ARM side (its aarch64 wheel
   needs PyTorch in the rootfs): not measured.

Emulation checks numbers, never speed: the seconds are this machine's, emulating.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness import NODE_FAILED, optimize, parser_for, results_folder, save
from yolo_optimize.arm.cores import CORES
from yolo_optimize.arm.runs import run_on_arm
from yolo_optimize.artifact import Manifest
from yolo_optimize.families.base import ParityStats
from yolo_optimize.images import list_images
from yolo_optimize.metadata import ArtifactMetadata
from yolo_optimize.runtime.runners import open_runner

FILES = tuple(f"{target}-{precision}" for target in ("onnx", "ncnn") for precision in ("fp32", "fp16", "int8"))
COMPARED_IMAGES = 4


def build(args: argparse.Namespace, size: int, out: Path, *extra: str) -> tuple[float, dict[str, str]]:
    """The build's wall seconds, every node built again (``--force``: a folder left by an earlier run would make it a
    cached build's), and the reason of each node it refused."""
    ran = optimize("build", args.assets / "weights" / "yolov5n.pt", "--out", out, "--imgsz", size, "--targets",
                   "onnx,ncnn", "--precisions", "fp32,fp16,int8", "--parity-data", args.assets / "coco_val128",
                   "--calib-data", args.assets / "coco128", "--calib-images", args.calib_images, "--gate-images",
                   args.gate_images, "--force", *extra, allowed=(0, NODE_FAILED), capture=True)
    failed = dict(line.split(": failed ", 1) for line in ran.output.splitlines() if ": failed " in line)
    return ran.wall_s, failed


def checked_on(folder: Path, failed: dict[str, str]) -> dict[str, Any]:
    """A checked file's parity and gate on its core, beside this machine's; or why the core refused it."""
    if folder.name in failed:
        return {"refused": failed[folder.name]}
    manifest = Manifest.read(folder)
    assert manifest.parity is not None
    keep = ("executed_precision", "max_abs_diff_boxes_px", "max_abs_diff_scores", "p99.9_abs_diff_scores",
            "agreement", "passed", "seconds", "letterbox")
    parity = {"here": {k: manifest.parity.get(k) for k in keep}, **{
        core: {**{k: found.get(k) for k in keep}, "tolerance": found["tolerance"]["precision"]}
        for core, found in manifest.parity["on_arm"].items()}}
    gate = manifest.info.get("gate")
    if gate is None:
        return {"parity": parity}
    scores = {"fp32": gate["fp32_score"], "here": gate["score"], **{core: found["score"] for core, found in
                                                                    gate["on_arm"].items()}}
    return {"parity": parity, "gate_scores": scores, "gate_images": gate["gate_images"]}


def here_against_core(folder: Path, core: str, pixels: np.ndarray, failed: dict[str, str]) -> dict[str, Any]:
    """One file on the same tensors here and on ``core``: the issue's table row (none where this machine's own gate
    refused the file: ``failed``)."""
    if folder.name in failed:
        return {"refused_here": failed[folder.name]}
    manifest = Manifest.read(folder)
    family = ArtifactMetadata.of(manifest).model_family()
    with open_runner(folder, manifest, threads=2) as runner:
        here = np.concatenate([runner.infer(runner.input_of(image[None])) for image in pixels])
        runs_here = runner.executed_precision
    arm = run_on_arm(CORES[core], folder, manifest, pixels.shape[1], pixels=pixels)
    stats = ParityStats()
    for index in range(len(pixels)):
        stats = stats.merged(family.compare(arm.outputs[index:index + 1], here[index:index + 1]))
    return {"runs_in_here": runs_here, "runs_in_there": arm.facts["executed_precision"],
            "max_box_diff_px": stats.box_diff, "max_score_diff": round(stats.score_diff, 6),
            "detections_here": stats.total, "shared": stats.matched}


def main() -> None:
    parser = parser_for(__doc__)
    parser.add_argument("--assets", type=Path, default=Path("../shared/assets"))
    parser.add_argument("--out", type=Path, default=Path("/tmp/arm-check"))
    parser.add_argument("--sizes", default="320,640")
    parser.add_argument("--cores", default="cortex-a72,cortex-a76")
    parser.add_argument("--calib-images", type=int, default=64)
    parser.add_argument("--gate-images", type=int, default=32)
    parser.add_argument("--save", type=Path, default=results_folder("arm_check"))
    args = parser.parse_args()
    cores = args.cores.split(",")
    result: dict[str, Any] = {"cores": cores, "calib_images": args.calib_images, "gate_images": args.gate_images,
                              "sizes": {}}  # each size saved as soon as it is measured
    for size in map(int, args.sizes.split(",")):
        plain = args.out / f"plain-{size}"
        plain_s, refused = build(args, size, plain)
        checked = {core: build(args, size, args.out / f"{core}-{size}", "--check-on", core) for core in cores}
        images = list_images(args.assets / "coco_val128")[:COMPARED_IMAGES]
        family = ArtifactMetadata.of(Manifest.read(plain / "yolov5n" / FILES[0])).model_family()
        pixels = np.stack([family.preprocess(image, size).pixels for image in images])
        result["sizes"][size] = {
            "build_s": round(plain_s, 1),
            "build_checked_s": {core: round(seconds, 1) for core, (seconds, _) in checked.items()},
            "files": {name: {core: {**checked_on(args.out / f"{core}-{size}" / "yolov5n" / name, failed),
                                    "here_against": here_against_core(plain / "yolov5n" / name, core, pixels,
                                                                     refused)}
                             for core, (_, failed) in checked.items()} for name in FILES}}
        print(size, result["sizes"][size]["build_s"], result["sizes"][size]["build_checked_s"])
        save(args.save, f"arm_check-{size}", {**result, "sizes": {size: result["sizes"][size]}}, threads=2)


if __name__ == "__main__":
    main()
