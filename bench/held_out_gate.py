"""Does the INT8 gate predict the drop the evaluator measures? The held-out gate against the old one, per INT8 route.

    python bench/held_out_gate.py --assets ../shared/assets [--routes onnx,openvino,aoti,executorch]

Issue 43. Two builds of the real yolov5n, every INT8 route in each, `--max-map-drop 100` so that every route's
first recipe is kept whatever it loses (what is compared is the measurement, not the verdict):
- **held out** (today's default): `--calib-data coco128` alone, so the build calibrates on one half of coco128
  and gates on the other (building/held_out.py);
- **old**: calibrated on all 128 coco128 images, as the build did before; the old gate scored the same 128
  images, so its drop is recomputed here on them. (That build's own gate is on coco_val128; it is not read.)

Every artifact and its FP32 parent are then scored with the gate's code (the evaluator's COCO mAP50-95 on the
family's decoding, through the artifact's own runner) on: coco_val128 (what `optimize eval` reports), the held-out
gate's images, the images the held-out build calibrated on, and all of coco128. Each drop has the gate's 90%
paired-bootstrap interval. Saves `held_out_gate-<time>.json` under `--save`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from common import save

from yolo_optimize.artifact import Manifest
from yolo_optimize.building.gate import Gate, GateRecord
from yolo_optimize.building.held_out import ImageSet
from yolo_optimize.building.request import GateConfig
from yolo_optimize.families import family_named

IMGSZ = 640


def build(out: Path, assets: Path, routes: list[str], *extra: str | Path) -> Path:
    subprocess.run([sys.executable, "-m", "yolo_optimize", "build", "yolov5n", "--weights-dir", assets / "weights",
                    "--targets", ",".join(routes), "--precisions", "fp32,int8", "--parity-data",
                    assets / "coco_val128", "--calib-data", assets / "coco128", "--max-map-drop", "100", "--out", out,
                    *extra], check=True)
    return out / "yolov5n"


def drops(images: ImageSet, candidates: dict[str, tuple[Path, Path]], threads: int,
          unpublished: dict[str, Manifest] | None = None) -> dict[str, Any]:
    """For each name: (the INT8 folder, its FP32 parent's folder) -> its drop on ``images`` with the 90% interval.
    ``unpublished``: the manifests to run some of the INT8 folders by (those without one of their own)."""
    found: dict[str, Any] = {}
    gate = Gate(images, family_named("yolov5"), IMGSZ, threads)
    try:
        parents: dict[Path, GateRecord] = {}
        for name, (folder, parent) in candidates.items():
            if parent not in parents:
                config = GateConfig(images, None, "bench", 100.0)
                parents[parent] = GateRecord(config, gate.score(parent, Manifest.read(parent)), gate)
            record = parents[parent]
            record.add(name, gate.score(folder, (unpublished or {}).get(name) or Manifest.read(folder)))
            attempt = record.attempts[-1]
            found[name] = {"fp32": round(record.reference.value, 4), "int8": attempt["score"],
                           "drop_points": attempt["drop_points"], "drop_90ci_points": attempt["drop_90ci_points"]}
            print(f"{len(images.images)} images of {images.root}: {name} {found[name]}", flush=True)
    finally:
        gate.close()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assets", type=Path, default=Path("../shared/assets"))
    parser.add_argument("--out", type=Path, default=Path("artifacts-held-out-gate"))
    parser.add_argument("--routes", default="onnx,openvino,aoti")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--save", type=Path, default=Path("bench/results"))
    args = parser.parse_args()
    routes = args.routes.split(",")
    held = build(args.out / "held-out", args.assets, routes)
    old = build(args.out / "all-128", args.assets, routes, "--gate-data", args.assets / "coco_val128")
    first = Manifest.read(held / f"{routes[0]}-int8")
    gated, calibrated = first.params["gate"]["images"], first.params["calib_images"]
    sets = {"coco_val128 (evaluation)": ImageSet.of(args.assets / "coco_val128"),
            "held-out gate": ImageSet(gated["root"], tuple(gated["images"])),
            "held-out build's calibration images": ImageSet(gated["root"], tuple(calibrated)),
            "all of coco128 (the old gate)": ImageSet.of(args.assets / "coco128")}
    candidates = {f"{kind} {route}-int8": (model / f"{route}-int8", model / f"{route}-fp32")
                  for kind, model in (("held out", held), ("old", old)) for route in routes}
    result: dict[str, Any] = {"routes": routes, "gate_rule": first.info["gate"]["held_out"],
                              "recorded_held_out_gate": {route: {k: Manifest.read(held / f"{route}-int8").info[
                                  "gate"][k] for k in ("drop_points", "drop_90ci_points", "gate_images")}
                                  for route in routes},
                              "drops": {name: drops(images, candidates, args.threads)
                                        for name, images in sets.items()}}
    result["summary"] = summary(result["drops"], routes)
    print(json.dumps(result["summary"], indent=2))
    save(args.save, "held_out_gate", result, args.threads)


def summary(found: dict[str, dict[str, Any]], routes: list[str]) -> dict[str, Any]:
    """Per route: what each gate said, what the evaluation measured, and how far each gate was from it."""
    evaluation = found["coco_val128 (evaluation)"]
    rows = {}
    for route in routes:
        held, old = f"held out {route}-int8", f"old {route}-int8"
        new_gate = found["held-out gate"][held]["drop_points"]
        old_gate = found["all of coco128 (the old gate)"][old]["drop_points"]
        rows[route] = {"held_out_gate_drop": new_gate, "held_out_eval_drop": evaluation[held]["drop_points"],
                       "held_out_error": round(new_gate - evaluation[held]["drop_points"], 3),
                       "held_out_build_on_its_calibration_images": found["held-out build's calibration images"][
                           held]["drop_points"],
                       "old_gate_drop": old_gate, "old_eval_drop": evaluation[old]["drop_points"],
                       "old_error": round(old_gate - evaluation[old]["drop_points"], 3),
                       "eval_map_calibrated_on_half": evaluation[held]["int8"],
                       "eval_map_calibrated_on_all_128": evaluation[old]["int8"]}
    return rows


if __name__ == "__main__":
    main()
