"""Each issue-21 lever measured on its own: the same artifact with and without it, in interleaved fresh processes.

    python bench/levers.py --artifacts artifacts-fastest [--repeats 3] [--seconds 3]

Reads the two builds bench/fastest_artifact.py makes (``<artifacts>/yolov5n`` with float input,
``<artifacts>/yolov5n-uint8``) and measures, per lever, a "without" and a "with" variant in turns, one fresh
process each per round, images/s in the host's fast state over all rounds (results.fast_state):

- throughput configuration at batch 8 (OpenVINO's THROUGHPUT hint and requests, concurrent ONNX Runtime
  requests on a one-thread session) against the latency configuration, for onnx/openvino fp32 and int8;
- OpenVINO INT8's float parts in bf16 (the hint its build chose on a bf16 CPU) against f32, at batch 1;
- the uint8 input (layout and scaling in the graph; INT8 ONNX reads the bytes on their own grid) against float
  input, for onnx/openvino/aoti int8 at batch 1 (the inference-only figure: the float conversion it saves is part of
  the end-to-end path);
- the strided stem as space-to-depth in INT8 ONNX against the same graph with the stem put back (the rearranged
  int8 weights moved back, exact), at batch 1, with each variant's per-layer profile of the stem;
- the end-to-end path at batch 1 with OpenCV and PyTorch single-threaded (what eval does) against their defaults;
- the anchor head's output convolutions as integer GEMMs in INT8 ONNX (optimize/integer_head.py) against the same
  graph with them put back as float convolutions (weights dequantized from the same integers, the head's own
  reshape and permute), at batch 1 and 8;
- one image per request in the throughput configuration at batch 8 (what the runners ship) against four (two
  requests, one per stream, each a batch of four), for onnx/openvino fp32 and int8.

``--only TEXT`` measures the levers whose name contains TEXT.

Saves everything under bench/results/ with the environment.
"""

from __future__ import annotations

import re
import statistics
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from common import save, timing_parser

from yolo_optimize.artifact import Manifest
from yolo_optimize.evaluation.measuring.measure import MeasureJob, measure
from yolo_optimize.evaluation.results import BLOCK_S, Timing, fast_state
from yolo_optimize.families import family_named
from yolo_optimize.host.processes import in_own_process
from yolo_optimize.images import list_images
from yolo_optimize.metadata import ArtifactMetadata
from yolo_optimize.runtime.runners.base import AUTO, LATENCY

STEM = "node_conv2d"


@dataclass(frozen=True)
class Variant:
    folder: Path
    manifest: Manifest
    batch: int
    mode: str = AUTO
    end_to_end: bool = False  # time the pipelined path instead of inference
    single_threaded_helpers: bool = True  # end_to_end: OpenCV and PyTorch on one thread, as eval runs it
    request_batch: int = 1  # images per request in the throughput configuration (the runners' own value is 1)


def lever_pairs(root: Path, work: Path) -> dict[str, tuple[Variant, Variant]]:
    """lever name -> (without, with)."""
    floats, bytes_ = root / "yolov5n", root / "yolov5n-uint8"

    def variant(folder: Path, batch: int, **kwargs: Any) -> Variant:
        return Variant(folder, Manifest.read(folder), batch, **kwargs)

    pairs = {f"throughput configuration, {name} b8": (variant(floats / name, 8, mode=LATENCY),
                                                       variant(floats / name, 8))
             for name in ("onnx-fp32", "onnx-int8", "openvino-fp32", "openvino-int8")}
    ov_int8 = variant(floats / "openvino-int8", 1)
    pairs["OpenVINO INT8 float parts in bf16, b1"] = (
        replace(ov_int8, manifest=replace(ov_int8.manifest, metadata=replace(
            ArtifactMetadata.of(ov_int8.manifest), compile_config={"INFERENCE_PRECISION_HINT": "f32"}).to_dict())),
        ov_int8)
    pairs.update({f"uint8 input, {name} b1": (variant(floats / name, 1), variant(bytes_ / name, 1))
                  for name in ("onnx-int8", "openvino-int8", "aoti-int8")})
    pairs["stem as space-to-depth, onnx-int8 b1"] = (variant(stem_put_back(floats / "onnx-int8", work), 1),
                                                     variant(floats / "onnx-int8", 1))
    float_head = head_put_back(floats / "onnx-int8", work)
    pairs.update({f"head convolutions as integer GEMMs, onnx-int8 b{batch}": (
        variant(float_head, batch), variant(floats / "onnx-int8", batch)) for batch in (1, 8)})
    pairs.update({f"one image per throughput request, {name} b8": (
        variant(floats / name, 8, request_batch=4), variant(floats / name, 8))
        for name in ("onnx-fp32", "onnx-int8", "openvino-fp32", "openvino-int8")})
    fastest = variant(floats / "openvino-int8", 1, end_to_end=True)
    pairs["end-to-end with single-threaded helpers, openvino-int8 b1"] = (
        replace(fastest, single_threaded_helpers=False), fastest)
    return pairs


def stem_put_back(folder: Path, work: Path) -> Path:
    """A copy of an INT8 ONNX artifact whose space-to-depth stem is the original strided convolution again: its int8
    weights rearranged back, the SpaceToDepth dropped (the same integers, the same grid)."""
    import shutil

    import onnx
    from onnx import helper, numpy_helper

    copy = shutil.copytree(folder, work / "onnx-int8-stem-put-back")
    path = copy / str(Manifest.read(copy).entry)
    model = onnx.load(str(path))
    nodes = {node.name: node for node in model.graph.node}
    stem, moved = nodes[STEM], nodes[f"{STEM}_space_to_depth_u8"]
    block = helper.get_attribute_value(moved.attribute[0])
    produced = {out: node for node in model.graph.node for out in node.output}
    weights = next(t for t in model.graph.initializer if t.name == produced[stem.input[1]].input[0])
    weights.CopyFrom(numpy_helper.from_array(strided_weights(numpy_helper.to_array(weights), block), weights.name))
    produced[stem.input[0]].input[0] = moved.input[0]
    model.graph.node.remove(moved)
    for attribute in stem.attribute:
        if attribute.name == "strides":
            attribute.ints[:] = [block] * len(attribute.ints)
        elif attribute.name in ("pads", "kernel_shape"):
            attribute.ints[:] = [value * block for value in attribute.ints]
    del model.graph.value_info[:]
    onnx.save(model, str(path))
    return copy


def head_put_back(folder: Path, work: Path) -> Path:
    """A copy of an INT8 ONNX artifact whose integer-GEMM head convolutions are float 1x1 convolutions again, on the
    float input, with weights dequantized from the same integers and the head's own reshape and permute."""
    import shutil

    import onnx
    from onnx import helper, numpy_helper

    from yolo_optimize.runtime.runners.onnxruntime import INTEGER_CONVOLUTION_SUFFIX

    copy = shutil.copytree(folder, work / "onnx-int8-head-put-back")
    path = copy / str(Manifest.read(copy).entry)
    model = onnx.load(str(path))
    produced = {out: node for node in model.graph.node for out in node.output}
    readers = {name: node for node in model.graph.node for name in node.input}
    arrays = {t.name: t for t in model.graph.initializer}
    for matmul in [n for n in model.graph.node if n.name.endswith(INTEGER_CONVOLUTION_SUFFIX)]:
        channels_last = produced[matmul.input[0]]
        quantize = produced[channels_last.input[0]]
        rows = readers[matmul.output[0]]
        anchors_first = readers[rows.output[0]]
        _, height, width, anchors, outputs = numpy_helper.to_array(arrays[rows.input[1]])
        integers, scale = (numpy_helper.to_array(arrays[name]) for name in (matmul.input[1], matmul.input[3]))
        weight = (integers.T.astype(np.float32) * scale[:, None])[:, :, None, None]
        name = matmul.name.removesuffix(INTEGER_CONVOLUTION_SUFFIX)
        model.graph.initializer.extend([numpy_helper.from_array(weight, name + "_float_weight"),
                                        numpy_helper.from_array(np.array([-1, anchors, outputs, height, width],
                                                                         np.int64), name + "_anchor_shape")])
        bias = list(matmul.input[6:])
        position = list(model.graph.node).index(matmul)
        for node in (quantize, channels_last, matmul, rows, anchors_first):
            model.graph.node.remove(node)
        for offset, node in enumerate([
                helper.make_node("Conv", [quantize.input[0], name + "_float_weight", *bias], [name + "_out"],
                                 name=name),
                helper.make_node("Reshape", [name + "_out", name + "_anchor_shape"], [name + "_view"]),
                helper.make_node("Transpose", [name + "_view"], [anchors_first.output[0]], perm=[0, 1, 3, 4, 2])]):
            model.graph.node.insert(position - 2 + offset, node)
    read = {name for node in model.graph.node for name in node.input}
    kept = [tensor for tensor in model.graph.initializer if tensor.name in read]  # the integer weights go
    del model.graph.initializer[:], model.graph.value_info[:]
    model.graph.initializer.extend(kept)
    onnx.save(model, str(path))
    return copy


def strided_weights(moved: np.ndarray, block: int) -> np.ndarray:
    """The inverse of optimize/space_to_depth.stride_one_weights."""
    out, depth, height, width = moved.shape
    channels = depth // (block * block)
    weights = np.zeros((out, channels, height * block, width * block), moved.dtype)
    for row in range(block):
        for column in range(block):
            first = (row * block + column) * channels
            weights[:, :, row::block, column::block] = moved[:, first:first + channels]
    return weights


def timed(variant: Variant, pixels: Path, files: tuple[Path, ...], seconds: float, threads: int) -> list[float]:
    """One fresh process's runs (ms) of ``variant``: inference, or the end-to-end path's intervals. The children's
    functions are taken from this file imported as a module: the package's spawn never hands a child the caller's
    ``__main__``."""
    from levers import _measure_worker, _path_worker

    if not variant.end_to_end:
        timing = Timing((variant.batch,), seconds, threads, mode=variant.mode)
        job = MeasureJob(variant.folder, variant.manifest, pixels, timing, predict=False)
        return in_own_process(_measure_worker, job, variant.request_batch)
    return in_own_process(_path_worker, variant, files, seconds, threads)


def _measure_worker(job: MeasureJob, request_batch: int) -> list[float]:
    """The runs (ms) of ``job`` with the runners' images per throughput request set to ``request_batch`` (in this
    process only)."""
    from yolo_optimize.runtime.runners import onnxruntime, openvino

    onnxruntime.THROUGHPUT_REQUEST_BATCH = openvino.THROUGHPUT_REQUEST_BATCH = request_batch
    measurement, _ = measure(job)
    return measurement.batches[0].latency.samples_ms  # type: ignore[union-attr]  # latency is None only for a failed row


def _path_worker(variant: Variant, files: tuple[Path, ...], seconds: float, threads: int) -> list[float]:
    from yolo_optimize.evaluation.measuring.end_to_end import EndToEnd, single_threaded_helpers
    from yolo_optimize.runtime.runners import open_runner

    with open_runner(variant.folder, variant.manifest, threads=threads, mode=variant.mode) as runner:
        if variant.single_threaded_helpers:
            single_threaded_helpers(runner)
        path = EndToEnd(runner.metadata.model_family(), runner, files, runner.metadata.side, variant.batch)
        try:
            return [ms * 1e3 for _ in range(max(1, round(seconds / BLOCK_S))) for ms in path.block(BLOCK_S)]
        finally:
            path.close()


def is_stem(layer: str) -> bool:
    """The stem's layers in ONNX Runtime's profile: ``node_conv2d`` itself, fused (``node_conv2d_token_20``) or
    rearranged (``node_conv2d_space_to_depth_u8``), never ``node_conv2d_<n>...``, the model's other convolutions."""
    return re.match(rf"{STEM}(?!_\d)", layer) is not None


def stem_profile(variant: Variant, pixels: Path, threads: int) -> dict[str, float]:
    """The stem's share of an ONNX Runtime per-layer profile (ms and share of the layer sum), at batch 1."""
    return in_own_process(_stem_worker, variant, pixels, threads)


def _stem_worker(variant: Variant, pixels: Path, threads: int) -> dict[str, float]:
    from yolo_optimize.runtime.runners import open_runner

    with (open_runner(variant.folder, variant.manifest, threads=threads) as runner,
          tempfile.TemporaryDirectory() as work):
        profile = runner.profile_layers(runner.input_of(np.load(pixels)[:1]), 20, Path(work) / "trace.json")
    total = sum(layer.ms for layer in profile.layers)
    stem = sum(layer.ms for layer in profile.layers if is_stem(layer.name))
    return {"stem_ms": round(stem, 3), "stem_share": round(stem / total, 4), "layers_ms": round(total, 3)}


def main() -> None:
    parser = timing_parser(__doc__, 3.0)
    parser.add_argument("--artifacts", type=Path, default=Path("artifacts-fastest"))
    parser.add_argument("--data", type=Path, default=Path("../shared/assets/coco_val128"))
    parser.add_argument("--only", default="", help="measure only the levers whose name contains this")
    args = parser.parse_args()
    family = family_named("yolov5")
    files = tuple(list_images(args.data)[:16])
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="levers-") as work:
        pixels = Path(work) / "pixels.npy"
        np.save(pixels, np.stack([family.preprocess(path, 640).pixels for path in files]))
        pairs = {name: pair for name, pair in lever_pairs(args.artifacts, Path(work)).items() if args.only in name}
        samples = {lever: ([], []) for lever in pairs}
        for round_ in range(args.repeats):
            for lever, variants in pairs.items():
                for index in (round_ % 2, 1 - round_ % 2):  # which goes first alternates
                    samples[lever][index].append(timed(variants[index], pixels, files, args.seconds, args.threads))
        for lever, (without, with_) in samples.items():
            batch = pairs[lever][0].batch
            rates = [fast_state(runs, batch).throughput_ips for runs in (without, with_)]  # type: ignore[union-attr]  # None only for a failed row
            per_round = [[round(batch / (statistics.median(r) / 1e3), 2) for r in runs] for runs in (without, with_)]
            results[lever] = {"without_ips": rates[0], "with_ips": rates[1], "gain": round(rates[1] / rates[0], 3),
                              "rounds_ips": {"without": per_round[0], "with": per_round[1]}}
            print(f"{lever}: {rates[0]:.1f} -> {rates[1]:.1f} img/s ({rates[1] / rates[0] - 1:+.1%}); rounds "
                  f"{per_round[0]} / {per_round[1]}")
        if stem := pairs.get("stem as space-to-depth, onnx-int8 b1"):
            results["stem profile"] = {"without": stem_profile(stem[0], pixels, args.threads),
                                       "with": stem_profile(stem[1], pixels, args.threads)}
            print(f"stem profile (ONNX Runtime's, b1): {results['stem profile']}")
    save(args.save, "levers", {"settings": {k: str(v) for k, v in vars(args).items()}, "levers": results}, args.threads)


if __name__ == "__main__":
    main()
