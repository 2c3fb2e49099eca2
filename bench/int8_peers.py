"""Issue 46: our INT8 files against the recipes users copy, on one CPU, in one interleaved evaluation.

    python -m bench.int8_peers --assets ../shared/assets --report bench/results/<cpu kind>/int8_peers

Extends issue 31's study (OpenVINO's benchmark_app, NNCF's defaults only: bench/archive/int8_peers/) to the three peers
of the issue, each made from the same checkpoint and the same 128 coco128 images (the family's letterbox, /255):

- ``nncf-defaults``: our build's ``onnx-fp32`` through ``ov.convert_model`` and ``nncf.quantize`` with every other
  argument NNCF's default (``nncf_defaults``);
- ``ultralytics-recipe``: Ultralytics' own OpenVINO INT8 export function (``ultralytics.utils.export.openvino.
  torch2openvino``, the installed release) on the export form of the model: traced, converted from PyTorch, preset
  MIXED, every Sigmoid and the head's own operations left in float, all images calibrating;
- ``ort-quantize-static``: ONNX Runtime's documented recipe for our ``onnx-fp32``: ``quant_pre_process``, then
  ``quantize_static`` with its defaults (QDQ, s8 activations and weights, per tensor, MinMax).

Ours are built as a user builds them: openvino-int8 and onnx-int8 with ``--calib-data coco128`` (its held-out split
calibrates on one half and gates on the other) at the default ``--max-map-drop``; where a CPU's gate refuses one
(onnx-int8 on a CPU without VNNI), it is built again at ``--onnx-max-map-drop`` so that its speed can still be
compared, and the summary says so. Then one ``optimize eval`` measures every row on all of coco_val128 at batch 1
and 8 in ``--repeats`` interleaved fresh-process rounds, the peers as ``--add`` rows, and the summary gives each
pair's throughput, mAP50-95 and per-process ratio of median latencies (peer over ours: > 1, ours faster). The
evaluation profiles every row too, so ``python -m bench.ceiling --report <the report>`` gives each file's share of its
convolutions-only ceiling from the same run. ``--skip-build --skip-eval`` recomputes the summary from the saved report.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness import NODE_FAILED, optimize, study_parser
from yolo_optimize.evaluation.reporting.report import load_report

IMGSZ = 640
PEERS = {"nncf-defaults": "openvino-int8", "ultralytics-recipe": "openvino-int8", "ort-quantize-static": "onnx-int8"}
SUFFIXES = {"openvino-int8": "xml", "onnx-int8": "onnx"}  # each peer's file, by the row of ours it is set beside


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


def ultralytics_recipe(assets: Path, inputs: list[np.ndarray], out: Path) -> Path:
    """Ultralytics' OpenVINO INT8 export, called as its exporter calls it for a Detect model."""
    import nncf
    import openvino as ov
    import torch
    from ultralytics.utils.export.openvino import torch2openvino

    from yolo_optimize.checkpoint import load_model, resolve_source

    model = load_model(resolve_source(str(assets / "weights" / "yolov5n.pt")))
    quantized = torch2openvino(model, torch.zeros(1, 3, IMGSZ, IMGSZ), quantize=8, int8_detect=True,
                               calibration_dataset=nncf.Dataset(inputs))
    xml = out / "yolov5n.xml"
    ov.save_model(quantized, str(xml), compress_to_fp16=False)
    return xml


def ort_quantize_static(onnx_fp32: Path, inputs: list[np.ndarray], out: Path) -> Path:
    """ONNX Runtime's static quantization as its docs give it: pre-processing, then the defaults."""
    from onnxruntime.quantization import CalibrationDataReader, quant_pre_process, quantize_static

    class Images(CalibrationDataReader):
        def __init__(self) -> None:
            self.left = iter(inputs)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(({"images": image} for image in self.left), None)

    prepared, quantized = out / "prepared.onnx", out / "yolov5n.onnx"
    quant_pre_process(str(onnx_fp32), str(prepared))
    quantize_static(str(prepared), str(quantized), Images())
    prepared.unlink()
    return quantized


def build_ours(args: Any) -> dict[str, str]:
    """Our two INT8 files, built as a user builds them; what each was gated at."""
    common = ["build", args.assets / "weights" / "yolov5n.pt", "--imgsz", str(IMGSZ), "--calib-data",
              args.assets / "coco128", "--parity-data", args.assets / "coco_val128", "--out", args.out]
    gated = {"openvino-int8": "1.0 (default)"}
    optimize(*common, "--targets", "openvino", "--precisions", "fp32,int8")
    if optimize(*common, "--targets", "onnx", "--precisions", "fp32,int8", allowed=(0, NODE_FAILED)).code == 0:
        gated["onnx-int8"] = "1.0 (default)"
    else:
        optimize(*common, "--targets", "onnx", "--precisions", "int8", "--max-map-drop", args.onnx_max_map_drop)
        gated["onnx-int8"] = f"{args.onnx_max_map_drop} (refused at the default 1.0 on this CPU)"
    return gated


def make_peers(args: Any) -> dict[str, Path]:
    """Each peer's file, in ``--out/peers/<peer>/`` (the folder names its row), calibrated on all 128 coco128 images."""
    from yolo_optimize.images import list_images

    images = list_images(args.assets / "coco128")[:128]
    inputs = calibration_inputs(images, IMGSZ)
    folders = {name: args.out / "peers" / name for name in PEERS}
    for folder in folders.values():
        folder.mkdir(parents=True, exist_ok=True)
    onnx_fp32 = args.out / "yolov5n" / "onnx-fp32" / "yolov5n.onnx"
    return {"nncf-defaults": nncf_defaults(onnx_fp32, inputs, folders["nncf-defaults"]),
            "ultralytics-recipe": ultralytics_recipe(args.assets, inputs, folders["ultralytics-recipe"]),
            "ort-quantize-static": ort_quantize_static(onnx_fp32, inputs, folders["ort-quantize-static"])}


def summary(report_dir: Path) -> dict[str, Any]:
    """Each peer beside our file for its runtime: throughput (fast state), mAP50-95, per-process latency ratios."""
    results = json.loads((report_dir / "results.json").read_text())
    rows = {row["name"]: row for row in results["rows"]}
    lines = {line.artifact: line for line in load_report(report_dir).matrix}
    found: dict[str, Any] = {}
    for peer, ours in PEERS.items():
        name = next(row for row, found_row in rows.items() if found_row["external"]
                    and Path(found_row["external"]["path"]).parent.name == peer)
        found[peer] = {"row": name, "ours": ours, "map50_95": lines[name].map50_95,
                       "ours_map50_95": lines[ours].map50_95, "batches": {}}
        for index, (batch, cell) in enumerate(sorted(lines[name].batches.items())):
            ratios = [float(np.median(_samples(rows[name], process, index)) /
                            np.median(_samples(rows[ours], process, index)))
                      for process in range(len(rows[ours]["measurements"]))]
            found[peer]["batches"][batch] = {
                "img_s": cell.throughput_ips, "ours_img_s": lines[ours].batches[batch].throughput_ips,
                "peer_over_ours_median_latency_per_process": [round(r, 3) for r in ratios]}
    return found


def _samples(row: dict[str, Any], process: int, batch_index: int) -> list[float]:
    return list(row["measurements"][process]["batches"][batch_index]["latency"]["samples_ms"])


def main() -> None:
    parser = study_parser(__doc__, "int8_peers", "bench-int8-peers", "3")
    parser.add_argument("--onnx-max-map-drop", default="4", help="onnx-int8's limit where the default refuses it")
    args = parser.parse_args()
    args.report.mkdir(parents=True, exist_ok=True)
    gated_file = args.report / "gated.json"
    if not args.skip_build:
        gated_file.write_text(json.dumps(build_ours(args), indent=1) + "\n")
        peers = make_peers(args)
    else:
        peers = {name: args.out / "peers" / name / f"yolov5n.{SUFFIXES[ours]}" for name, ours in PEERS.items()}
    if not args.skip_eval:
        added = [value for path in peers.values() for value in ("--add", f"yolov5={path}")]
        optimize("eval", args.out, "--data", args.assets / "coco_val128", "--batch-sizes", "1,8", "--repeats",
                 args.repeats, "--profile", "--out", args.report, *added)
    result = {"gated_at": json.loads(gated_file.read_text()), "peers": summary(args.report)}
    (args.report / "peers.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
