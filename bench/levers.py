"""Each issue-21 lever measured on its own: the same artifact with and without it, in interleaved fresh processes.

    python -m bench.levers --artifacts artifacts-fastest [--repeats 3] [--seconds 3]

Reads the two builds bench/fastest_artifact.py makes (``<artifacts>/yolov5n`` with float input,
``<artifacts>/yolov5n-uint8``) and measures, per lever, a "without" and a "with" variant in turns, one fresh
process each per round, images/s in the host's fast state over all rounds (run_statistics.fast_state):

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
  requests, one per stream, each a batch of four), for onnx/openvino fp32 and int8;
- OpenVINO INT8's stem as space-to-depth (issue 46): the built IR against a copy whose 6x6 stride-2 stem reads the
  image moved into 12 channels at half the size, through a 3x3 stride-1 convolution of the same int8 weights
  rearranged (``ov_stem_as_space_to_depth``), at batch 1, with each variant's stem layers profiled;
- OpenVINO's threads unpinned (``ENABLE_CPU_PINNING`` false) against pinned, its default, for openvino-int8 at
  batch 1 (inference and end to end) and 8;
- the heap on transparent huge pages (glibc's ``glibc.malloc.hugetlb=1``, on top of the measuring processes'
  allocator settings) against the default pages, for openvino-int8 and onnx-int8 at batch 1 (inference and end to
  end).

``--only TEXT`` measures the levers whose name contains TEXT (and reads only the artifacts those need).

Saves everything under bench/results/<host kind>/levers/ with the environment.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness import Variant, by_name, paired_rounds, rates, save, timed, timing_parser
from yolo_optimize.artifact import Manifest
from yolo_optimize.families import family_named
from yolo_optimize.host.processes import in_own_process
from yolo_optimize.images import list_images
from yolo_optimize.runtime.runners.base import LATENCY

STEM = "node_conv2d"
HUGE_PAGES = (("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1"),)  # glibc >= 2.35: madvise its heap for THP


Pair = tuple[Variant, Variant]


def lever_pairs(root: Path, work: Path) -> dict[str, Callable[[], Pair]]:
    """lever name -> what makes its (without, with), called only for the levers measured: each reads or rewrites
    only the artifacts it needs."""
    floats, bytes_ = root / "yolov5n", root / "yolov5n-uint8"

    variant = Variant.of

    def float_parts_in_bf16() -> Pair:
        ov_int8 = variant(floats / "openvino-int8", 1)
        return ov_int8.compiled_with(INFERENCE_PRECISION_HINT="f32"), ov_int8

    def end_to_end_helpers() -> Pair:
        fastest = variant(floats / "openvino-int8", 1, end_to_end=True)
        return replace(fastest, single_threaded_helpers=False), fastest

    def unpinned(batch: int, end_to_end: bool) -> Pair:
        pinned = variant(floats / "openvino-int8", batch, end_to_end=end_to_end)
        return pinned, pinned.compiled_with(ENABLE_CPU_PINNING=False)

    def on_huge_pages(name: str, end_to_end: bool) -> Pair:
        plain = variant(floats / name, 1, end_to_end=end_to_end)
        return plain, replace(plain, environment=HUGE_PAGES)

    pairs: dict[str, Callable[[], Pair]] = {}
    for name in ("onnx-fp32", "onnx-int8", "openvino-fp32", "openvino-int8"):
        pairs[f"throughput configuration, {name} b8"] = partial(
            lambda name: (variant(floats / name, 8, mode=LATENCY), variant(floats / name, 8)), name)
    pairs["OpenVINO INT8 float parts in bf16, b1"] = float_parts_in_bf16
    for name in ("onnx-int8", "openvino-int8", "aoti-int8"):
        pairs[f"uint8 input, {name} b1"] = partial(
            lambda name: (variant(floats / name, 1), variant(bytes_ / name, 1)), name)
    pairs["stem as space-to-depth, onnx-int8 b1"] = lambda: (
        variant(stem_put_back(floats / "onnx-int8", work), 1), variant(floats / "onnx-int8", 1))
    for batch in (1, 8):
        pairs[f"head convolutions as integer GEMMs, onnx-int8 b{batch}"] = partial(
            lambda batch: (variant(head_put_back(floats / "onnx-int8", work), batch),
                           variant(floats / "onnx-int8", batch)), batch)
    for name in ("onnx-fp32", "onnx-int8", "openvino-fp32", "openvino-int8"):
        pairs[f"one image per throughput request, {name} b8"] = partial(
            lambda name: (variant(floats / name, 8, request_batch=4), variant(floats / name, 8)), name)
    pairs["end-to-end with single-threaded helpers, openvino-int8 b1"] = end_to_end_helpers
    for label, folder in (("float", floats), ("uint8", bytes_)):
        pairs[f"stem as space-to-depth, openvino-int8 {label} input b1"] = partial(
            lambda folder: (variant(folder / "openvino-int8", 1),
                            variant(ov_stem_as_space_to_depth(folder / "openvino-int8", work), 1)), folder)
    for batch, end_to_end in ((1, False), (1, True), (8, False)):
        pairs[f"OpenVINO threads unpinned, openvino-int8 b{batch}{' end to end' * end_to_end}"] = partial(
            unpinned, batch, end_to_end)
    for name in ("openvino-int8", "onnx-int8"):
        for end_to_end in (False, True):
            pairs[f"heap on huge pages, {name} b1{' end to end' * end_to_end}"] = partial(
                on_huge_pages, name, end_to_end)
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


def ov_stem_as_space_to_depth(folder: Path, work: Path) -> Path:
    """A copy of an openvino-int8 artifact whose 6x6 stride-2 stem is a 3x3 stride-1 convolution on the image moved
    into 12 channels (optimize/space_to_depth.stride_one_weights on the same int8 weights). The move goes before
    the input's FakeQuantize, which is per tensor, so the stem still reads u8 (after it, OpenVINO's low-precision
    passes stop at the SpaceToDepth and the stem runs in bf16): on a float input as ``SpaceToDepth``, on a uint8
    NHWC input as a 6-D transpose of the bytes."""
    import shutil

    import openvino as ov
    import openvino.opset13 as ops

    from yolo_optimize.optimize.space_to_depth import stride_one_weights

    copy = shutil.copytree(folder, work / f"{folder.parent.name}-openvino-int8-stem-space-to-depth")
    path = copy / str(Manifest.read(copy).entry)
    model = ov.Core().read_model(str(path))
    stem = next(op for op in model.get_ops() if op.get_friendly_name() == f"{STEM}/WithoutBiases")
    image = model.get_parameters()[0]
    first = next(target for target in image.output(0).get_target_inputs())  # FakeQuantize, or uint8's Convert
    if image.get_element_type() == ov.Type.u8:  # [N, H, W, 3] bytes
        _, height, width, channels = image.get_partial_shape().get_max_shape()
        blocks = ops.reshape(image, ops.constant(np.array([-1, height // 2, 2, width // 2, 2, channels], np.int64)),
                             False)
        together = ops.transpose(blocks, ops.constant(np.array([0, 1, 3, 2, 4, 5], np.int64)))
        moved = ops.reshape(together, ops.constant(np.array([-1, height // 2, width // 2, 4 * channels], np.int64)),
                            False)
        for step, node in (("blocks", blocks), ("transpose", together)):
            node.set_friendly_name(f"{STEM}_space_to_depth_{step}")
    else:
        moved = ops.space_to_depth(image, "blocks_first", 2)
    moved.set_friendly_name(f"{STEM}_space_to_depth")  # stem layers to is_stem
    first.replace_source_output(moved.output(0))
    node = first.get_node()
    while node is not stem:  # the per-tensor quantization and layout change between the image and the stem
        node.validate_and_infer_types()
        node = next(target.get_node() for target in node.output(0).get_target_inputs())
    dequantize = stem.input(1).get_source_output().get_node()
    integers = dequantize.input(0).get_source_output().get_node().input(0).get_source_output().get_node()
    weights = ops.multiply(ops.convert(ops.constant(stride_one_weights(integers.get_data(), 2)), "f32"),
                           dequantize.input(1).get_source_output())
    moved_stem = ops.convolution(stem.input(0).get_source_output(), weights, [1, 1], [1, 1], [1, 1], [1, 1])
    moved_stem.set_friendly_name(stem.get_friendly_name())
    for target in list(stem.output(0).get_target_inputs()):
        target.replace_source_output(moved_stem.output(0))
    model.validate_nodes_and_infer_types()
    written = path.with_name(f"rewritten-{path.name}")  # beside it: the model still maps the old .bin
    ov.save_model(model, str(written), compress_to_fp16=False)
    for suffix in (".xml", ".bin"):
        written.with_suffix(suffix).replace(path.with_suffix(suffix))
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


def is_stem(layer: str) -> bool:
    """The stem's layers in a per-layer profile: ``node_conv2d`` itself, fused (``node_conv2d_token_20``) or
    rearranged (``node_conv2d_space_to_depth_u8``), never ``node_conv2d_<n>...``, the model's other convolutions;
    in OpenVINO's also what moves the image to it (``images/fq_output_0...``, uint8's ``node__to_copy``)."""
    return re.match(rf"({STEM}(?!_\d)|images|node__to_copy)", layer) is not None


def stem_profile(variant: Variant, pixels: Path, threads: int) -> dict[str, Any]:
    """The stem's share of the runtime's per-layer profile (ms and share of the layer sum), at batch 1."""
    return in_own_process(by_name(_stem_worker), variant.folder, variant.manifest, pixels, threads)


def _stem_worker(folder: Path, manifest: Manifest, pixels: Path, threads: int) -> dict[str, Any]:
    from yolo_optimize.runtime.runners import open_runner

    with (open_runner(folder, manifest, threads=threads) as runner,
          tempfile.TemporaryDirectory() as work):
        profile = runner.profile_layers(runner.input_of(np.load(pixels)[:1]), 20, Path(work) / "trace.json")
    total = sum(layer.ms for layer in profile.layers)
    stem = {layer.name: round(layer.ms, 3) for layer in profile.layers if is_stem(layer.name)}
    return {"stem_ms": round(sum(stem.values()), 3), "stem_share": round(sum(stem.values()) / total, 4),
            "layers_ms": round(total, 3), "stem_layers_ms": stem}


def largest_difference(pair: Pair, pixels: Path, threads: int) -> float:
    """The largest absolute difference between the two variants' raw outputs on the same images, each run as the
    runner runs it (its compile config)."""
    worker = by_name(_outputs_worker)
    outputs = [in_own_process(worker, variant.folder, variant.manifest, pixels, threads) for variant in pair]
    return float(np.abs(outputs[0] - outputs[1]).max())


def _outputs_worker(folder: Path, manifest: Manifest, pixels: Path, threads: int) -> np.ndarray:
    from yolo_optimize.runtime.runners import open_runner

    with open_runner(folder, manifest, threads=threads) as runner:
        return np.concatenate([runner.infer(runner.input_of(image[None])) for image in np.load(pixels)])


def main() -> None:
    parser = timing_parser(__doc__, "levers", 3.0)
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
        pairs = {name: make() for name, make in lever_pairs(args.artifacts, Path(work)).items() if args.only in name}
        for lever, variants in pairs.items():
            runs = paired_rounds(variants, args.repeats,
                                 lambda variant: timed(variant, pixels, files, args.seconds, args.threads))
            (without, without_rounds), (with_, with_rounds) = (rates(v, r) for v, r in zip(variants, runs))
            results[lever] = {"without_ips": without, "with_ips": with_, "gain": round(with_ / without, 3),
                              "rounds_ips": {"without": without_rounds, "with": with_rounds}}
            print(f"{lever}: {without:.1f} -> {with_:.1f} img/s ({with_ / without - 1:+.1%}); rounds "
                  f"{without_rounds} / {with_rounds}")
        for lever in [name for name in pairs if name.startswith("stem as space-to-depth")]:
            plain, rewritten = pairs[lever]
            results[lever]["stem profile"] = {"without": stem_profile(plain, pixels, args.threads),
                                              "with": stem_profile(rewritten, pixels, args.threads)}
            results[lever]["largest output difference"] = largest_difference(pairs[lever], pixels, args.threads)
            print(f"{lever}, largest output difference: {results[lever]['largest output difference']:.4g}")
            print(f"{lever}, stem profile (the runtime's, b1): {results[lever]['stem profile']}")
    save(args.save, "levers", {"settings": {k: str(v) for k, v in vars(args).items()}, "levers": results}, args.threads)


if __name__ == "__main__":
    main()
