"""Every INT8 ONNX route we considered: mAP lost on the gate set and on coco_val128, and ONNX Runtime speed.

    python -m bench.archive.int8_recipes.onnx_int8_routes --artifact artifacts/yolov5n/onnx-fp32 --assets \
        ../shared/assets

Routes (all with per-channel symmetric s8 weights, u8 or s8 asymmetric activations, the Detect head in
float, ranges from every coco128 image):
- nncf-7bit: NNCF's ONNX backend, MIXED preset, fast bias correction, overflow fix on every layer
  (7-bit weights: what ``onnx-int8`` builds on CPUs without VNNI);
- nncf-8bit: the same with full 8-bit weights (what it builds on VNNI CPUs);
- nncf-first-layer: NNCF's own default (7 bits on the first layer only);
- nncf-ort: what ``onnx-int8`` ships: NNCF with this CPU's weight bits (7 without VNNI, 8 with it), completed for
  ONNX Runtime's int8 kernels (optimize/onnxruntime_fusion.py: int32 bias, Q/DQ on the convolutions' outputs,
  the SiLU's low end cut at -6, the sigmoid on the [0, 1] grid); "-no-floor" keeps the observed low end,
  "-floor-8" cuts it at -8, "-float-silu" leaves the sigmoid unquantized (the SiLU runs in float);
- ort-all: ONNX Runtime's quantize_static, every op (the project's previous default; weights 7-bit via
  reduce_range, ranges averaged per image);
- ort-conv: quantize_static on Conv only (QDQ on Conv inputs and outputs, SiLU in float);
- ort-all-percentile, ort-all-entropy: ort-all with percentile (99.999) or entropy ranges instead of min-max
  (histograms merged over chunks of 4 images);
- tensorrt-minmax, tensorrt-entropy, tensorrt-percentile-99.99, tensorrt-percentile-99.999: the Q/DQ graph
  TensorRT INT8 engines are built from (optimize/int8_tensorrt.py: symmetric signed int8 activations, float
  bias), with each way of choosing activation ranges, run here by ONNX Runtime on the CPU; "-image-float" also keeps
  the convolution that reads the image in float; "-conv" quantizes only the convolutions' inputs (NVIDIA's
  recommended placement: weighted layers' inputs), every other op (SiLU, Concat, Add, MaxPool, Resize) in float.
Accuracy: mAP50-95 drop in points with a 90% paired-bootstrap interval. Speed: batch 1 and 8
throughput of each route and of the FP32 parent, in fresh processes, --repeats interleaved rounds
(``--repeats 0``: accuracy only, e.g. for the TensorRT routes, whose CPU speed says nothing of an engine's).
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness import paired_rounds, save, timing_parser
from yolo_optimize.artifact import Manifest
from yolo_optimize.building.gate import Gate
from yolo_optimize.building.held_out import ImageSet
from yolo_optimize.building.request import GateConfig
from yolo_optimize.building.stage import recorded_float_part
from yolo_optimize.evaluation.measuring.measure import MeasureJob, Timing, measure
from yolo_optimize.host.cpu import has_vnni
from yolo_optimize.host.processes import in_own_process
from yolo_optimize.images import list_images
from yolo_optimize.metadata import ArtifactMetadata
from yolo_optimize.optimize.calibration import calibration_inputs, candidate_manifest
from yolo_optimize.optimize.int8_onnx import float_nodes
from yolo_optimize.optimize.int8_tensorrt import quantize_symmetric
from yolo_optimize.optimize.onnxruntime_fusion import (
    FusionOptions,
    fuse_for_onnxruntime,
)

TENSORRT_RANGES = {"tensorrt-minmax": "minmax", "tensorrt-entropy": "entropy",
                   "tensorrt-percentile-99.99": "percentile:99.99", "tensorrt-percentile-99.999": "percentile:99.999",
                   "tensorrt-percentile-99.99-image-float": "percentile:99.99",
                   "tensorrt-percentile-99.999-image-float": "percentile:99.999",
                   "tensorrt-percentile-99.99-conv": "percentile:99.99",
                   "tensorrt-percentile-99.999-conv": "percentile:99.999", "tensorrt-minmax-conv": "minmax"}
ORT_RANGES = {"ort-all-percentile": ("Percentile", {"CalibPercentile": 99.999}), "ort-all-entropy": ("Entropy", {})}
ORT_FUSION = {"nncf-ort": FusionOptions(), "nncf-ort-no-floor": FusionOptions(silu_floor=None),
              "nncf-ort-floor-8": FusionOptions(silu_floor=8.0),
              "nncf-ort-float-silu": FusionOptions(quantize_sigmoid=False)}
ROUTES = ("nncf-7bit", "nncf-8bit", "nncf-first-layer", *ORT_FUSION, "ort-all", "ort-conv", *ORT_RANGES,
          *TENSORRT_RANGES)


def image_convolutions(model: Any) -> list[str]:
    """The convolutions that read the input image: pixels in [0, 1] use half of a symmetric int8 range (7 bits), and
    the first layer's few channels carry everything the network sees, so they are kept in float."""
    inputs = {tensor.name for tensor in model.graph.input}
    return [node.name for node in model.graph.node if node.op_type == "Conv" and node.input[0] in inputs]


def quantize(route: str, source: Path, target: Path, calibration: list[np.ndarray], threads: int) -> None:
    import onnx

    head = float_nodes(onnx.load(str(source)), recorded_float_part(Manifest.read(source.parent)))
    if route in TENSORRT_RANGES:
        kept = head + (image_convolutions(onnx.load(str(source))) if route.endswith("image-float") else [])
        quantize_symmetric(source, target, calibration, kept, ArtifactMetadata(), TENSORRT_RANGES[route],
                           ("Conv",) if route.endswith("-conv") else None)
        return
    if route.startswith("nncf"):
        import nncf
        from nncf.quantization.advanced_parameters import (
            AdvancedQuantizationParameters,
            OverflowFix,
        )

        fix = {"nncf-7bit": OverflowFix.ENABLE, "nncf-8bit": OverflowFix.DISABLE,
               "nncf-first-layer": OverflowFix.FIRST_LAYER}.get(
            route, OverflowFix.DISABLE if has_vnni() else OverflowFix.ENABLE)
        feeds = [{"images": x} for x in calibration]
        quantized = nncf.quantize(onnx.load(str(source)), nncf.Dataset(feeds),
                                  preset=nncf.QuantizationPreset.MIXED, subset_size=len(calibration),
                                  ignored_scope=nncf.IgnoredScope(names=head, validate=False),
                                  advanced_parameters=AdvancedQuantizationParameters(overflow_fix=fix))
        if route in ORT_FUSION:
            fuse_for_onnxruntime(quantized, feeds, threads, ORT_FUSION[route])
        onnx.save(quantized, str(target))
        return
    from onnxruntime.quantization import (
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Reader:
        def __init__(self) -> None:
            self.set_range(0, len(calibration))

        def __len__(self) -> int:
            return len(calibration)

        def set_range(self, start_index: int, end_index: int) -> None:
            self.items = iter({"images": x} for x in calibration[start_index:end_index])

        def get_next(self) -> dict[str, Any] | None:
            return next(self.items, None)

    method, options = ORT_RANGES.get(route, ("MinMax", {"CalibMovingAverage": True}))
    if route in ORT_RANGES:
        # chunks of 4 images: histograms merge, activations do not pile up
        options = {**options, "CalibStridedMinMax": 4}
    with tempfile.TemporaryDirectory() as work:  # quantize_static writes '<model>-inferred.onnx' beside its input
        private = Path(shutil.copy(source, work))
        quantize_static(str(private), str(target), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                        reduce_range=True, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        nodes_to_exclude=head, calibrate_method=CalibrationMethod[method],
                        op_types_to_quantize=["Conv"] if route == "ort-conv" else None, extra_options=options)


def accuracy(folders: dict[str, Path], parent: Manifest, data: Path, threads: int) -> dict[str, dict[str, Any]]:
    from yolo_optimize.building.gate import GateRecord

    metadata = ArtifactMetadata.of(parent)
    config = GateConfig(ImageSet.of(data), None, "every image of the folder", 1.0)
    gate = Gate(config.images, metadata.model_family(), metadata.side, threads)
    try:
        record = GateRecord(config, gate.score(folders["fp32"], parent), gate)
        for route, folder in folders.items():
            if route != "fp32":
                manifest = candidate_manifest(parent, node="onnx-int8", metadata=replace(metadata, precision="int8"))
                record.add(route, gate.score(folder, manifest))
    finally:
        gate.close()
    return {a["route"]: {k: a[k] for k in ("score", "drop_points", "drop_90ci_points")} for a in record.attempts}


def speed(folders: dict[str, Path], parent: Manifest, pixels: Path, args: Any) -> dict[str, dict[str, list[float]]]:
    """Each file's images/s at batch 1 and 8, one fresh process per file and round, the files in turns."""
    def rates(name: str) -> dict[str, float]:
        precision = "fp32" if name == "fp32" else "int8"
        manifest = candidate_manifest(parent, node=f"onnx-{name}",
                                      metadata=replace(ArtifactMetadata.of(parent), precision=precision))
        job = MeasureJob(folders[name], manifest, pixels, Timing((1, 8), args.seconds, args.threads), predict=False)
        measurement, _ = in_own_process(measure, job)
        return {f"b{batch.batch}": batch.throughput_ips or 0.0 for batch in measurement.batches}

    runs = paired_rounds(list(folders), args.repeats, rates)
    return {name: {key: [run[key] for run in found] for key in ("b1", "b8")} for name, found in zip(folders, runs)}


def main() -> None:
    parser = timing_parser(__doc__, "onnx_int8_routes", 2.0)
    parser.add_argument("--artifact", type=Path, default=Path("artifacts/yolov5n/onnx-fp32"))
    parser.add_argument("--assets", type=Path, default=Path("../shared/assets"))
    parser.add_argument("--routes", default=",".join(ROUTES))
    args = parser.parse_args()
    parent = Manifest.read(args.artifact)
    metadata = ArtifactMetadata.of(parent)
    calibration = calibration_inputs(metadata.model_family(),
                                     tuple(str(p) for p in list_images(args.assets / "coco128")), metadata.side)
    with tempfile.TemporaryDirectory() as work:
        folders = {"fp32": args.artifact}
        for route in args.routes.split(","):
            folders[route] = Path(work) / route
            folders[route].mkdir()
            quantize(route, args.artifact / str(parent.entry), folders[route] / str(parent.entry), calibration,
                     args.threads)
            print(f"quantized {route}")
        result: dict[str, Any] = {"gate": accuracy(folders, parent, args.assets / "coco128", args.threads),
                                  "coco_val128": accuracy(folders, parent, args.assets / "coco_val128", args.threads)}
        pixels = Path(work) / "images.npy"
        np.save(pixels, np.stack([np.asarray(x[0].transpose(1, 2, 0) * 255, np.uint8) for x in calibration[:8]]))
        result["throughput_ips"] = speed(folders, parent, pixels, args)
    print(f"{'route':26} {'gate drop (90% CI)':>24} {'val drop (90% CI)':>24} {'b1 img/s':>9} {'b8 img/s':>9}")
    for route in folders:
        cells = []
        for key in ("gate", "coco_val128"):
            entry = result[key].get(route)
            low, high = entry["drop_90ci_points"] if entry else (0, 0)
            cells.append(f"{entry['drop_points']:.2f} ({low:.2f}..{high:.2f})" if entry else "reference")
        b1, b8 = (f"{statistics.median(samples):9.2f}" if (samples := result["throughput_ips"][route][b]) else " " * 9
                  for b in ("b1", "b8"))
        print(f"{route:26} {cells[0]:>24} {cells[1]:>24} {b1} {b8}")
    save(args.save, "onnx_int8_routes", {**result, "settings": {"artifact": str(args.artifact), "routes": args.routes,
                                                                "repeats": args.repeats, "seconds": args.seconds}},
         args.threads)


if __name__ == "__main__":
    main()
