"""onnx-int8's activation ranges by calibration size: NNCF's default (min-max) ranges against its histogram ranges.

    python -m bench.archive.int8_recipes.onnx_int8_ranges --assets ../shared/assets --minmax /tmp/minmax \
        --histogram /tmp/exp \
        [--sizes 16,32,64]

Issue 46. On the AVX2-only host, histogram ranges (openvino-int8's) took onnx-int8's loss on coco_val128 from 0.82
points to none and on the held-out gate from 3.05 to 1.88, calibrated on 64 images; but with the suite's 16
calibration images the test fixture's gate lost 3.44 points (bench/results/avx2/onnx_int8_gate_check/). Which
ranges to use then depends on how many images calibrate them: this measures both at each size.

Each build is the CLI's own, `--calib-images N` and `--max-map-drop 100` (every candidate kept; what is compared is
the measurement), each recipe from a tree of its own: min-max ranges from `--minmax`, a clone at 3d05340 (onnx-int8's
revision 9, before revision 10 chose by size from these results), histogram ranges from `--histogram`, that clone with
`onnx_int8_gate_check/histogram_ranges.patch` applied (its own revision, so its own cache key: checked). Both
recipes at a size calibrate on the same random subset of coco128's calibration half (the build's split and seed)
and are scored, with their common FP32 parent, by the gate's code on the 64 held-out gate images and on all of
coco_val128 (`held_out_gate.drops`: mAP50-95 drop with its 90% paired-bootstrap interval). Saves
`onnx_int8_ranges-<time>.json` under `--save`.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any

from bench.harness import gate_drops, optimize, parser_for, results_folder, save
from yolo_optimize.artifact import Manifest
from yolo_optimize.building.held_out import ImageSet

RECIPES = ("default ranges", "histogram ranges")


def build(out: Path, assets: Path, calib_images: int | None, tree: Path) -> Path:
    """yolov5n's onnx-fp32, and its onnx-int8 calibrated on ``calib_images`` (None: none), into ``out`` with the code
    of ``tree``."""
    out, assets, tree = out.resolve(), assets.resolve(), tree.resolve()
    int8 = ["--precisions", "fp32,int8", "--calib-data", assets / "coco128", "--calib-images", str(calib_images),
            "--max-map-drop", "100"]
    optimize("build", "yolov5n", "--weights-dir", assets / "weights", "--targets", "onnx",
             *(int8 if calib_images else ["--precisions", "fp32"]), "--parity-data", assets / "coco_val128", "--out",
             out, tree=tree)
    return out / "yolov5n"


def built_pairs(args: argparse.Namespace, sizes: list[int]) -> dict[str, Path]:
    """'<recipe> <N>' -> its onnx-int8 folder, each built beside a copy of one FP32 build (its cached parent)."""
    base = build(args.out / "base", args.assets, None, args.minmax)
    folders: dict[str, Path] = {}
    for size in sizes:
        keys = set()
        for recipe, tree in zip(RECIPES, (args.minmax, args.histogram)):
            out = args.out / f"{recipe.split()[0]}-{size}"
            shutil.copytree(base.parent, out, dirs_exist_ok=True)
            folders[f"{recipe} {size}"] = build(out, args.assets, size, tree) / "onnx-int8"
            keys.add(Manifest.read(folders[f"{recipe} {size}"]).cache_key)
        assert len(keys) == 2, f"the two trees built the same onnx-int8 at {size} images"
    return folders


def main() -> None:
    parser = parser_for(__doc__)
    parser.add_argument("--assets", type=Path, default=Path("../shared/assets"))
    parser.add_argument("--minmax", type=Path, required=True, help="a clone at 3d05340 (min-max ranges)")
    parser.add_argument("--histogram", type=Path, required=True, help="that clone with histogram_ranges.patch applied")
    parser.add_argument("--sizes", default="16,32,64", help="calibration images (64: all of the calibration half)")
    parser.add_argument("--out", type=Path, default=Path("artifacts-onnx-int8-ranges"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--save", type=Path, default=results_folder("onnx_int8_ranges"))
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    folders = built_pairs(args, sizes)
    parent = args.out / "base" / "yolov5n" / "onnx-fp32"
    first = Manifest.read(next(iter(folders.values())))
    gated = first.params["gate"]["images"]
    sets = {"held-out gate": ImageSet(gated["root"], tuple(gated["images"])),
            "coco_val128 (evaluation)": ImageSet.of(args.assets / "coco_val128")}
    candidates = {name: (folder, parent) for name, folder in folders.items()}
    found = {name: gate_drops(images, candidates, args.threads) for name, images in sets.items()}
    result: dict[str, Any] = {
        "sizes": sizes, "drops": found,
        "recorded_gate": {name: {key: Manifest.read(folder).info["gate"][key]
                                 for key in ("route", "drop_points", "drop_90ci_points", "gate_images")}
                          for name, folder in folders.items()},
        "summary": {f"{size} calibration images": {
            recipe: {set_name: found[set_name][f"{recipe} {size}"]["drop_points"] for set_name in sets}
            for recipe in RECIPES} for size in sizes}}
    for line, row in result["summary"].items():
        print(line, row)
    save(args.save, "onnx_int8_ranges", result, args.threads)


if __name__ == "__main__":
    main()
