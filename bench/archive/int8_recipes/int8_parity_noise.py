"""How far a sound INT8 file is from PyTorch FP32 on real images: the noise the INT8 parity tolerance is set from.

    python -m bench.archive.int8_recipes.int8_parity_noise MODEL_DIR [MODEL_DIR...] [--images 32] [--data \
        ../shared/assets/coco_val128]

Issue 43. For every `*-int8` folder of each built model (e.g. the ones `bench/archive/int8_recipes/README.md` leaves in
`artifacts-held-out-gate/held-out/yolov5n`), the parity check's own comparison (`Family.compare`: the largest score
difference over every output, and the agreement of the decoded detections) against the PyTorch FP32 model, image
by image at batch 1, in groups of 4 (the default parity set's size) and over batches of 8, on `--images` real
images: the largest score difference, its 99.9th percentile (``ParityStats.score_diff_quantile``) and the agreement.
The same for a copy of each onnx-int8 broken on purpose (the weight scale of its middle quantized convolution
multiplied by 8): what the check must refuse. Saves `int8_parity_noise-<time>.json`.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness import parser_for, results_folder, save
from yolo_optimize.artifact import Manifest
from yolo_optimize.building.parity import reference_outputs
from yolo_optimize.checkpoint import load_model, recorded_source
from yolo_optimize.families.base import ParityStats
from yolo_optimize.images import list_images
from yolo_optimize.metadata import ArtifactMetadata
from yolo_optimize.runtime.runners import open_runner


def noise(folder: Path, images: np.ndarray, expected: np.ndarray, threads: int) -> dict[str, Any]:
    manifest = Manifest.read(folder)
    family = ArtifactMetadata.of(manifest).model_family()
    per_image = []
    with open_runner(folder, manifest, threads=threads) as runner:
        for index in range(len(images)):
            stats = family.compare(runner.infer(runner.input_of(images[index:index + 1])), expected[index:index + 1])
            per_image.append(stats)
        batched = ParityStats()
        for start in range(0, len(images), 8):
            rows = slice(start, start + 8)
            batched = batched.merged(family.compare(runner.infer(runner.input_of(images[rows])), expected[rows]))
        executed = runner.executed_precision
    groups_of_4 = [functools.reduce(ParityStats.merged, per_image[i:i + 4]) for i in range(0, len(per_image) - 3, 4)]
    return {"executed_precision": executed, "images": len(images),
            "score_diff_per_image": spread([s.score_diff for s in per_image]),
            "score_diff_quantile_per_image": spread([s.score_diff_quantile for s in per_image]),
            "agreement_per_image": spread([s.agreement for s in per_image]),
            "per_4_images": {"score_diff_quantile_max": round(max(g.score_diff_quantile for g in groups_of_4), 4),
                             "agreement_min": round(min(g.agreement for g in groups_of_4), 4)},
            "all_batched_by_8": {"score_diff": round(batched.score_diff, 4),
                                 "score_diff_quantile": round(batched.score_diff_quantile, 4),
                                 "agreement": round(batched.agreement, 4),
                                 "box_diff_px": None if batched.box_diff is None else round(batched.box_diff, 3)}}


def spread(values: list[float]) -> dict[str, float]:
    return {"min": round(min(values), 4), "median": round(float(np.median(values)), 4), "max": round(max(values), 4)}


def model_noise(model_dir: Path, paths: list[Path], threads: int, work: Path) -> dict[str, Any]:
    """Every INT8 folder of ``model_dir`` measured, and a copy of its onnx-int8 with one weight scale x8."""
    folders = sorted(p for p in model_dir.glob("*-int8") if (p / "manifest.json").is_file())
    metadata = ArtifactMetadata.of(Manifest.read(folders[0]))
    family = metadata.model_family()
    images = np.stack([family.preprocess(p, metadata.side).pixels for p in paths])
    expected = reference_outputs(load_model(recorded_source(Manifest.read(model_dir / ".cache" / "load"))), images,
                                 "cpu")
    if (model_dir / "onnx-int8").is_dir():
        folders.append(broken_copy(model_dir / "onnx-int8", work / f"{model_dir.parent.name}-onnx-int8-scale-x8"))
    return {folder.name if folder.parent == model_dir else f"{folder.name} (broken)": noise(folder, images, expected,
                                                                                             threads)
            for folder in folders}


def broken_copy(folder: Path, copy: Path) -> Path:
    """``folder`` copied with the weight scale of the middle quantized convolution multiplied by 8."""
    import onnx
    from onnx import numpy_helper

    shutil.copytree(folder, copy)
    path = copy / str(Manifest.read(copy).entry)
    model = onnx.load(str(path))
    weights = {i.name: i for i in model.graph.initializer if len(i.dims) == 4}
    dequantized = [n for n in model.graph.node if n.op_type == "DequantizeLinear" and n.input[0] in weights]
    scale = next(i for i in model.graph.initializer if i.name == dequantized[len(dequantized) // 2].input[1])
    scale.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(scale) * np.float32(8), scale.name))
    onnx.save(model, str(path))
    return copy


def main() -> None:
    parser = parser_for(__doc__)
    parser.add_argument("model_dirs", type=Path, nargs="+")
    parser.add_argument("--data", type=Path, default=Path("../shared/assets/coco_val128"))
    parser.add_argument("--images", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--save", type=Path, default=results_folder("int8_parity_noise"))
    args = parser.parse_args()
    paths = list_images(args.data)[:args.images]
    with tempfile.TemporaryDirectory() as work:
        result: dict[str, Any] = {"data": str(args.data), "models": {
            str(model_dir): model_noise(model_dir, paths, args.threads, Path(work)) for model_dir in args.model_dirs}}
    for model_dir, found in result["models"].items():
        for name, stats in found.items():
            print(model_dir, name, stats)
    save(args.save, "int8_parity_noise", result, args.threads)


if __name__ == "__main__":
    main()
