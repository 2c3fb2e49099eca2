"""The ops each INT8 pass keeps in float, translated from the family's float module, against the structural rule
the ONNX and OpenVINO passes used before (every op from which no convolution can be reached; OpenVINO: less the
output convolutions; classifiers: none).

Builds each model's onnx-fp32 and openvino-fp32 at 320 into --out (cached), then compares, per model, the ONNX
``float_nodes`` and the OpenVINO ``decode_ops`` of the recorded float part with the old rule's ops:

    python -m bench.archive.int8_recipes.float_part --assets ../shared/assets --out /tmp/float_part --save \
        bench/results/avx2
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.harness import optimize, parser_for, results_folder, save
from yolo_optimize.artifact import Manifest
from yolo_optimize.building.stage import recorded_float_part
from yolo_optimize.optimize.int8_onnx import float_nodes
from yolo_optimize.optimize.int8_openvino import decode_ops

# (label, the build's model argument and options, its model folder's name, whether a detector)
MODELS = (("yolov5n", ["{weights}"], "yolov5n", True),
          ("yolov5n --nms", ["{weights}", "--nms"], "yolov5n-nms", True),
          ("yolov5n --input uint8", ["{weights}", "--input", "uint8"], "yolov5n-uint8", True),
          ("yolov7-tiny", ["yolov7-tiny", "--random-weights"], "yolov7-tiny-random", True),
          ("yolo11n", ["yolo11n", "--random-weights"], "yolo11n-random", True),
          ("yolo26n", ["yolo26n", "--random-weights"], "yolo26n-random", True),
          ("rtdetr-l", ["rtdetr-l", "--random-weights"], "rtdetr-l-random", True),
          ("resnet18", ["resnet18", "--random-weights"], "resnet18-random", False))


def no_convolution_below(ops: list[Any], name: Callable[[Any], str], below: Callable[[Any], list[Any]],
                         is_convolution: Callable[[Any], bool]) -> list[str]:
    """The old rule on a graph's ``ops`` (topologically ordered): those from which no convolution can be reached."""
    reaches: dict[str, bool] = {}
    for op in reversed(ops):
        reaches[name(op)] = any(is_convolution(b) or reaches.get(name(b), False) for b in below(op))
    return [name(op) for op in ops if not reaches[name(op)]]


def onnx_rule(model: Any) -> list[str]:
    readers: dict[str, list[Any]] = {}
    for node in model.graph.node:
        for tensor in node.input:
            readers.setdefault(tensor, []).append(node)
    return no_convolution_below(list(model.graph.node), lambda node: node.name,
                                lambda node: [r for out in node.output for r in readers.get(out, [])],
                                lambda node: node.op_type == "Conv")


def openvino_rule(model: Any) -> list[str]:
    """Less the convolutions, which OpenVINO's recipe quantizes."""
    ops = [op for op in model.get_ordered_ops() if op.get_type_name() not in ("Constant", "Parameter", "Result")]
    kept = no_convolution_below(ops, lambda op: op.get_friendly_name(),
                                lambda op: [t.get_node() for out in op.outputs() for t in out.get_target_inputs()],
                                lambda op: op.get_type_name() == "Convolution")
    convolutions = {op.get_friendly_name() for op in ops if op.get_type_name() == "Convolution"}
    return [name for name in kept if name not in convolutions]


def compared(folder: Path, detector: bool) -> dict[str, Any]:
    import onnx
    import openvino as ov

    onnx_manifest, ov_manifest = Manifest.read(folder / "onnx-fp32"), Manifest.read(folder / "openvino-fp32")
    graph = onnx.load(str(folder / "onnx-fp32" / str(onnx_manifest.entry)))
    ir = ov.Core().read_model(str(folder / "openvino-fp32" / str(ov_manifest.entry)))
    result = {}
    for name, new, old, part in (
            ("onnx", float_nodes(graph, recorded_float_part(onnx_manifest)), onnx_rule(graph) if detector else [],
             recorded_float_part(onnx_manifest)),
            ("openvino", decode_ops(ir, recorded_float_part(ov_manifest)), openvino_rule(ir) if detector else [],
             recorded_float_part(ov_manifest))):
        result[name] = {"float_part": len(part), "kept": len(new), "kept_before": len(old), "identical": new == old,
                        "differing": sorted(set(new) ^ set(old))}
    return result


def main() -> None:
    parser = parser_for(__doc__)
    parser.add_argument("--assets", type=Path, default=Path("../shared/assets"))
    parser.add_argument("--out", type=Path, default=Path("/tmp/float_part"))
    parser.add_argument("--save", type=Path, default=results_folder("float_part"))
    args = parser.parse_args()
    results = {}
    for label, model, folder, detector in MODELS:
        argv = [arg.format(weights=args.assets / "weights" / "yolov5n.pt") for arg in model]
        optimize("build", *argv, "--imgsz", "320", "--targets", "onnx,openvino", "--precisions", "fp32", "--out",
                 args.out / folder)
        results[label] = compared(args.out / folder / folder, detector)
        print(f"{label:24} " + "  ".join(f"{name}: {r['kept']} kept of a {r['float_part']}-op part, "
                                        f"{'identical' if r['identical'] else 'DIFFERENT'}"
                                        for name, r in results[label].items()))
    save(args.save, "float_part", {"models": results}, threads=2)


if __name__ == "__main__":
    main()
