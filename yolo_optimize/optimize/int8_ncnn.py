"""INT8 NCNN models: NCNN's own post-training quantization, written in Python because the ``ncnn`` wheel carries
neither of its tools, and run by NCNN's own INT8 inference; gated like every INT8 artifact.

The recipe is the tools' (ncnn's ``tools/quantize``), step for step, but for the activation threshold:

- ``ncnn2table``: each quantized convolution's input range from the FP32 model's activations on the calibration
  images (2048-bin histograms of ``|x|``, scale 127/threshold); weight scales per output channel, 127/max|w|, and
  31/max|w| for 3x3 stride-1 convolutions, whose INT8 Winograd kernels want 6-bit weights.
- The threshold keeps 99.999% of each input's values in range (``clip_bin``), not the tool's default KL threshold:
  on yolov5n at 640, KL's thresholds cost 5.14 points of mAP50-95 on the held-out gate images (2.80 on
  coco_val128), the 99.999% range 0.43 (0.32), the full range 0.57 (0.32)
  (``bench/archive/edge_runtimes/ncnn_int8_thresholds.py``, saved per host in bench/results/). KL clips SiLU's long
  positive tail, where a detector's large activations are.
- ``ncnn2int8``: those weights rounded to int8 (half away from zero, clamped to ±127) in the .bin, with the int8
  tag, and ``int8_scale_term=2`` with the scales after the bias: NCNN then quantizes each one's input, convolves
  in int8 and dequantizes its output to float.

The family's float module (the Detect head) stays in float32: its convolutions are found through the module paths
the export recorded for every NCNN convolution (``info.convolution_modules``). The float layers between the INT8
convolutions run in fp32, like the parent the gate compares against.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from yolo_optimize.building.loading import export_module
from yolo_optimize.building.stage import REFERENCE, SOURCE, Stage, StageContext, StageOutput
from yolo_optimize.export.ncnn import METADATA_FILE
from yolo_optimize.families import family_named
from yolo_optimize.metadata import FLOAT_INPUT
from yolo_optimize.optimize.calibration import Int8Config, gated_int8, int8_metadata
from yolo_optimize.runtime.runners.ncnn import CONVOLUTIONS, NcnnLayer, ncnn_input, read_layers, write_layers

if TYPE_CHECKING:
    from yolo_optimize.building.request import BuildRequest

ROUTE = "NCNN's own INT8 (ncnn2table histograms, 99.999% activation range; ncnn2int8 per-channel weights)"
HISTOGRAM_BINS = 2048  # ncnn2table's
CLIP_SHARE = 0.99999  # of each input's |x| kept in range; the rest saturates (module docstring)
INT8_TAG = 0x000D4B38  # the .bin's tag for int8 weights (src/modelbin.cpp)
FLOAT_TAG = 0  # raw float32 weights
FLOAT32 = np.dtype("<f4")
# the layers with weights read here, and the param ids of their bias_term and weight_data_size: the convolutions are
# quantized, a classifier's InnerProduct is copied in float (ncnn2int8 would quantize it too: one small GEMM)
WEIGHTED = {**dict.fromkeys(CONVOLUTIONS, (5, 6)), "InnerProduct": (1, 2)}


@dataclass(frozen=True)
class NcnnInt8Config(Int8Config):
    input_form: str = FLOAT_INPUT
    precision: str = "int8"


class NcnnInt8(Stage):
    """Quantizes the FP32 NCNN model (SOURCE) as ncnn's tools would and gates it against it."""

    name = "ncnn-int8"
    inputs = (SOURCE, REFERENCE)
    tools = ("ncnn",)
    target = "ncnn"
    config: NcnnInt8Config

    @classmethod
    def planned(cls, request: BuildRequest, precision: str) -> NcnnInt8:
        return cls(NcnnInt8Config(request.imgsz, request.calib_images, request.int8_gate, request.input_form))

    def run(self, ctx: StageContext) -> StageOutput:
        parent = ctx.manifest(SOURCE)
        family = family_named(ctx.source.family)
        float_module = family.float_module(export_module(ctx.source, FLOAT_INPUT))  # NCNN's graph: export/ncnn.py
        modules: dict[str, str] = parent.info.get("convolution_modules") or {}
        if not modules:
            raise RuntimeError("NCNN INT8: the NCNN convolutions could not be paired with the PyTorch modules they "
                               "came from (pnnx's IR and the .param disagree), so the float module is unknown")
        param = ctx.inputs[SOURCE] / str(parent.entry)
        in_float = [name for name, module in modules.items() if _inside(module, float_module)]
        metadata = int8_metadata(parent, float_module, ROUTE)
        written: dict[str, Any] = {}

        def write(images: list[np.ndarray]) -> None:
            target = ctx.out_dir / str(parent.entry)
            target.parent.mkdir(parents=True)
            scales = input_scales(param, _quantizable(param, modules, in_float), images, ctx.threads)
            written["int8_convolutions"] = [len(scales), len(modules)]
            quantize(param, target, scales)
            (target.parent / METADATA_FILE).write_text(json.dumps(metadata.to_dict(), indent=1))

        record = gated_int8(ctx, self.name, self.config, family, metadata, ROUTE, write)
        return StageOutput(entry=parent.entry, metadata=metadata.to_dict(),
                           info={**written, "kept_in_float": metadata.kept_in_float, "float_convolutions": in_float,
                                 "gate": record.result(self.config.calib_images)})


def _inside(module: str, container: str | None) -> bool:
    return container is not None and (module == container or module.startswith(container + "."))


def _quantizable(param: Path, modules: dict[str, str], in_float: list[str]) -> list[str]:
    """The convolutions to quantize: every plain one outside the float module. Grouped (depthwise) ones stay in
    float: ncnn2int8 scales them per group, which is not written here."""
    kinds = {layer.name: layer.kind for layer in read_layers(param)}
    return [name for name in modules if name not in in_float and kinds[name] == "Convolution"]


def input_scales(param: Path, convolutions: list[str], images: list[np.ndarray], threads: int) -> dict[str, float]:
    """The input scale of each of ``convolutions`` (layer names) from the FP32 model's activations on ``images``
    (``activation_histograms``): 127 over the clip threshold (``clip_bin``)."""
    layers = {layer.name: layer for layer in read_layers(param)}
    blobs = {name: layers[name].bottoms[0] for name in convolutions}
    collected = activation_histograms(param, sorted(set(blobs.values())), images, threads)
    scale = {blob: 127 / ((clip_bin(histogram) + 0.5) * largest / HISTOGRAM_BINS) if largest > 0 else 1.0
             for blob, (largest, histogram) in collected.items()}
    return {name: scale[blob] for name, blob in blobs.items()}


def activation_histograms(param: Path, blobs: list[str], images: list[np.ndarray],
                          threads: int) -> dict[str, tuple[float, np.ndarray]]:
    """Per blob, its largest |x| on ``images`` (single-image batches) and its histogram over [0, that], as
    ncnn2table collects them: one pass of the FP32 model for the largest magnitudes, one for the histograms."""
    largest = dict.fromkeys(blobs, 0.0)
    for activations in _activations(param, blobs, images, threads):
        for blob, values in activations.items():
            largest[blob] = max(largest[blob], float(np.abs(values).max()))
    histograms = {blob: np.zeros(HISTOGRAM_BINS, np.int64) for blob in blobs}
    for activations in _activations(param, blobs, images, threads):
        for blob, values in activations.items():
            histograms[blob] += _histogram(values, largest[blob])
    return {blob: (largest[blob], histograms[blob]) for blob in blobs}


def float_net(param: Path, threads: int) -> Any:
    """``param`` and its .bin loaded in NCNN as ncnn-fp32 and ncnn-int8 run (no FP16 anywhere; NCNN's INT8 inference,
    its default, for a file with int8 weights)."""
    import ncnn

    net = ncnn.Net()
    for option in ("use_fp16_storage", "use_fp16_packed", "use_fp16_arithmetic"):
        setattr(net.opt, option, False)
    net.opt.num_threads, net.opt.use_int8_inference = threads, True
    net.load_param(str(param))
    net.load_model(str(param.with_suffix(".bin")))
    return net


def _activations(param: Path, blobs: list[str], images: list[np.ndarray], threads: int) -> Any:
    """Per image (a single-image batch in the form the model takes), the FP32 model's values of ``blobs``."""
    net = float_net(param, threads)
    try:
        for image in images:
            with net.create_extractor() as extractor:
                extractor.set_light_mode(False)  # keep what was computed: the next blob reuses it
                extractor.input(net.input_names()[0], ncnn_input(image[0]))
                yield {blob: np.array(extractor.extract(blob)[1]) for blob in blobs}
    finally:
        net.clear()


def _histogram(values: np.ndarray, largest: float) -> np.ndarray:
    """ncnn2table's: |x| in HISTOGRAM_BINS bins over [0, largest], zeros left out."""
    magnitudes = np.abs(values[values != 0]).astype(np.float64)
    bins = np.minimum((magnitudes / largest * HISTOGRAM_BINS).astype(np.int64), HISTOGRAM_BINS - 1)
    return np.bincount(bins, minlength=HISTOGRAM_BINS)


def clip_bin(histogram: np.ndarray) -> int:
    """The bin holding the CLIP_SHARE quantile of ``|x|``: the activation range kept (module docstring)."""
    return int(np.searchsorted(np.cumsum(histogram) / max(int(histogram.sum()), 1), CLIP_SHARE))


def quantize(param: Path, target: Path, scales: dict[str, float]) -> None:
    """ncnn2int8: the FP32 model at ``param`` (and its .bin) written at ``target`` with each convolution of
    ``scales`` (layer name -> input scale) in int8; every other layer's weights copied as they are."""
    layers = read_layers(param)
    weights = param.with_suffix(".bin").read_bytes()
    offset, parts, rewritten = 0, [], []
    for layer in layers:
        size = _weight_bytes(layer, weights, offset)
        if layer.name in scales:
            parts.append(_int8_convolution(layer, weights[offset:offset + size], scales[layer.name]))
            layer = replace(layer, params=(*layer.params, "8=2"))
        else:
            parts.append(weights[offset:offset + size])
        rewritten.append(layer)
        offset += size
    if offset != len(weights):
        unknown = sorted({layer.kind for layer in layers} - {*WEIGHTED, "MemoryData"})
        raise RuntimeError(f"NCNN INT8: the .bin holds {len(weights) - offset} bytes more than its convolutions', "
                           f"InnerProduct and MemoryData layers'; the weights of {', '.join(unknown)} cannot be read "
                           "here")
    write_layers(target, param.read_text(), rewritten)
    target.with_suffix(".bin").write_bytes(b"".join(parts))


def _weight_bytes(layer: NcnnLayer, weights: bytes, offset: int) -> int:
    """How many bytes of the .bin from ``offset`` belong to ``layer`` (its load_model: ncnn's src/layer/)."""
    if layer.kind in WEIGHTED:  # the same layout: tagged weights, then the bias
        tag = int.from_bytes(weights[offset:offset + 4], "little")
        if tag != FLOAT_TAG:
            raise RuntimeError(f"NCNN INT8: {layer.name}'s weights are not float32 (tag {tag:#x})")
        bias_term, weight_data_size = WEIGHTED[layer.kind]
        return 4 * (1 + layer.param(weight_data_size) + (layer.param(0) if layer.param(bias_term) else 0))
    if layer.kind == "MemoryData":
        if layer.param(21, 1) != 1:
            raise RuntimeError(f"NCNN INT8: {layer.name} stores its data in a form not read here")
        shape = [layer.param(key) for key in (0, 1, 11, 2)]
        return 4 * int(np.prod([n for n in shape if n])) if any(shape) else 0
    return 0


def _int8_convolution(layer: NcnnLayer, stored: bytes, input_scale: float) -> bytes:
    """One convolution's .bin part as ncnn2int8 writes it: int8 weights (tagged, padded to 4 bytes), the float bias,
    the weight scales per output channel, the input scale."""
    outputs, kernel = layer.param(0), (layer.param(1), layer.param(11, layer.param(1)))
    weights = np.frombuffer(stored, FLOAT32, count=layer.param(6), offset=4).reshape(outputs, -1)
    bias = stored[4 + weights.nbytes:]
    dilation = (layer.param(2, 1), layer.param(12, layer.param(2, 1)))
    stride = (layer.param(3, 1), layer.param(13, layer.param(3, 1)))
    levels = 31 if kernel == (3, 3) and dilation == stride == (1, 1) else 127  # 6-bit for INT8 Winograd
    largest = np.abs(weights).max(axis=1)
    weight_scales = np.where(largest > 0, levels / np.where(largest > 0, largest, 1), 1.0)
    scaled = weights * weight_scales[:, None].astype(np.float32)
    integers = np.clip(np.sign(scaled) * np.floor(np.abs(scaled) + 0.5), -127, 127).astype(np.int8).tobytes()
    padded = integers + bytes(-len(integers) % 4)
    return b"".join([INT8_TAG.to_bytes(4, "little"), padded, bias, weight_scales.astype(FLOAT32).tobytes(),
                     np.array([input_scale], FLOAT32).tobytes()])
