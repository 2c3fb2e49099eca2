"""Issue 45: YOLOv5's stem in NCNN, as it is (a 6x6 stride-2 convolution on the 3-channel image) and as
space-to-depth plus a 3x3 stride-1 convolution on 12 channels (what ``optimize/space_to_depth.py`` does for ONNX), in
FP32 and in NCNN's INT8, at 640.

    python -m bench.archive.edge_runtimes.ncnn_stem [--assets ../shared/assets] [--repeats 5] [--save \
        bench/results/<cpu kind>/ncnn_stem]

Why: in ``bench/archive/edge_runtimes/ncnn_layers.py`` the stem ran at 46-63 GOP/s in both ncnn-fp32 and ncnn-int8, 5.6
ms of ncnn-int8's 20.3 ms of convolutions, the largest single layer; a 6x6 kernel on 3 input channels does not suit
NCNN's packed kernels. The rewrite gives the same sums (``space_to_depth.stride_one_weights``, its input channels put in
``PixelUnshuffle``'s order) on input channels NCNN packs.

Each form is the convolution alone (16 output channels, as yolov5n's; seeded random weights, He-scaled), exported by
pnnx at 640 with NCNN's FP16 off as ``ncnn-fp32`` runs, and quantized by the project's own NCNN INT8 pass
(``optimize/int8_ncnn``: input scales from the FP32 activations on coco128 images, letterboxed as the detector
family prepares them). The script first checks that both forms give the same output in PyTorch and in NCNN FP32.
Then each (form, precision) runs in its own fresh process per round, the rounds interleaved: load, 5 warm-up
passes, then passes for ``--seconds``; the median pass in ms, input conversion included as ``runners.ncnn`` does it.
Prints and saves the medians over rounds and each round's.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from bench.harness import by_name, paired_rounds, save, timing_parser
from yolo_optimize.host.processes import in_own_process

SIDE, CHANNELS, BLOCK = 640, 16, 2
FORMS = ("6x6 stride 2 on 3 channels", "space-to-depth + 3x3 stride 1 on 12 channels")
CALIBRATION_IMAGES = 16


def stems() -> dict[str, torch.nn.Module]:
    """Both forms as PyTorch modules with the same sums: the second's weights rearranged from the first's."""
    from yolo_optimize.optimize.space_to_depth import stride_one_weights

    torch.manual_seed(0)
    strided = torch.nn.Conv2d(3, CHANNELS, 6, 2, 2)
    torch.nn.init.kaiming_normal_(strided.weight)
    stride_one = torch.nn.Conv2d(3 * BLOCK * BLOCK, CHANNELS, 3, 1, 1)
    assert strided.bias is not None and stride_one.bias is not None  # both made with a bias
    with torch.no_grad():
        stride_one.weight.copy_(torch.from_numpy(unshuffled_order(stride_one_weights(strided.weight.numpy(), BLOCK))))
        stride_one.bias.copy_(strided.bias)
    return {FORMS[0]: strided.eval(), FORMS[1]: SpaceToDepthStem(stride_one).eval()}


def unshuffled_order(weights: np.ndarray) -> np.ndarray:
    """Weights for ONNX's SpaceToDepth order of input channels (block offset major: ``(rh*s + rw)*C + c``) put in
    PyTorch's ``PixelUnshuffle`` order (channel major: ``c*s*s + rh*s + rw``), which pnnx's ``Reorg`` keeps."""
    out, channels, height, width = weights.shape
    return np.ascontiguousarray(weights.reshape(out, BLOCK * BLOCK, channels // (BLOCK * BLOCK), height, width)
                                .transpose(0, 2, 1, 3, 4).reshape(out, channels, height, width))


class SpaceToDepthStem(torch.nn.Module):
    """``PixelUnshuffle`` then the stride-1 convolution (named attributes: pnnx writes a Python file with them)."""

    def __init__(self, convolution: torch.nn.Conv2d) -> None:
        super().__init__()
        self.unshuffle, self.convolution = torch.nn.PixelUnshuffle(BLOCK), convolution

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.convolution(self.unshuffle(image))


def exported(module: torch.nn.Module, folder: Path) -> Path:
    """``module`` as pnnx converts it at 640; its .param."""
    import pnnx

    from yolo_optimize.export.ncnn import scratch_paths

    param = folder / "model.ncnn.param"
    pnnx.export(module, str(folder / "model.pt"), (torch.rand(1, 3, SIDE, SIDE),), ncnnparam=str(param),
                ncnnbin=str(folder / "model.ncnn.bin"), fp16=False, **scratch_paths(folder))
    return param


def calibration_images(assets: Path) -> list[np.ndarray]:
    """coco128 images as the detector family prepares them for a float input: [1, 3, 640, 640] in [0, 1]."""
    from yolo_optimize.families import family_named
    from yolo_optimize.images import list_images

    family = family_named("yolov5")
    prepared = [family.prepare(family.read_image(path), SIDE).pixels for path in
                list_images(assets / "coco128")[:CALIBRATION_IMAGES]]
    return [np.ascontiguousarray(pixels.transpose(2, 0, 1)[None], dtype=np.float32) / 255 for pixels in prepared]


def int8_of(param: Path, images: list[np.ndarray], threads: int) -> Path:
    """The project's NCNN INT8 pass on every convolution of ``param``: the INT8 .param beside it."""
    from yolo_optimize.optimize.int8_ncnn import input_scales, quantize
    from yolo_optimize.runtime.runners.ncnn import CONVOLUTIONS, read_layers

    convolutions = [layer.name for layer in read_layers(param) if layer.kind in CONVOLUTIONS]
    target = param.parent / "int8" / param.name
    target.parent.mkdir()
    quantize(param, target, input_scales(param, convolutions, images, threads))
    return target


def output_of(param: Path, image: np.ndarray, threads: int) -> np.ndarray:
    """One pass of ``param`` on ``image`` ([1, 3, H, W] float), as ncnn-fp32 and ncnn-int8 run."""
    from yolo_optimize.optimize.int8_ncnn import float_net
    from yolo_optimize.runtime.runners.ncnn import ncnn_input

    net = float_net(param, threads)
    with net.create_extractor() as extractor:
        extractor.input(net.input_names()[0], ncnn_input(image[0]))
        return np.array(extractor.extract(net.output_names()[0])[1])


def median_pass_ms(param: Path, image: np.ndarray, threads: int, seconds: float) -> float:
    """This process's median pass of ``param`` (ms) after 5 warm-up passes, over ``seconds`` (at least 20 passes)."""
    from yolo_optimize.optimize.int8_ncnn import float_net
    from yolo_optimize.runtime.runners.ncnn import ncnn_input

    net = float_net(param, threads)
    name, output = net.input_names()[0], net.output_names()[0]

    def one() -> None:
        with net.create_extractor() as extractor:
            extractor.input(name, ncnn_input(image[0]))
            extractor.extract(output)

    for _ in range(5):
        one()
    times: list[float] = []
    deadline = time.perf_counter() + seconds
    while len(times) < 20 or time.perf_counter() < deadline:
        started = time.perf_counter()
        one()
        times.append((time.perf_counter() - started) * 1e3)
    return statistics.median(times)


def main() -> None:
    parser = timing_parser(__doc__, "ncnn_stem", 2.0)
    parser.add_argument("--assets", type=Path, default=Path("../shared/assets"))
    parser.set_defaults(repeats=5)
    args = parser.parse_args()

    images = calibration_images(args.assets)
    modules = stems()
    with tempfile.TemporaryDirectory(prefix="ncnn-stem-") as scratch, torch.no_grad():
        params: dict[tuple[str, str], Path] = {}
        expected = modules[FORMS[0]](torch.from_numpy(images[0])).numpy()[0]
        agreement = {}
        for index, form in enumerate(FORMS):
            folder = Path(scratch) / str(index)
            folder.mkdir()
            params[form, "fp32"] = exported(modules[form], folder)
            params[form, "int8"] = int8_of(params[form, "fp32"], images, args.threads)
            agreement[form] = {
                "pytorch": float(np.abs(modules[form](torch.from_numpy(images[0])).numpy()[0] - expected).max()),
                "ncnn-fp32": float(np.abs(output_of(params[form, "fp32"], images[0], args.threads) - expected).max()),
                "ncnn-int8": float(np.abs(output_of(params[form, "int8"], images[0], args.threads) - expected).max()),
            }
            print(f"{form}: largest difference from the 6x6 stem in PyTorch: "
                  + ", ".join(f"{where} {value:.3g}" for where, value in agreement[form].items()))

        def run(case: tuple[str, str]) -> float:
            ms = round(in_own_process(by_name(median_pass_ms), params[case], images[0], args.threads, args.seconds), 3)
            print(f"{case[0]}, {case[1]}: {ms:.2f} ms", flush=True)
            return ms

        runs = paired_rounds(list(params), args.repeats, run)
    rounds = {f"{form}, {precision}": times for (form, precision), times in zip(params, runs)}
    medians = {case: round(statistics.median(times), 3) for case, times in rounds.items()}
    for case, ms in medians.items():
        print(f"{case}: {ms:.2f} ms (median of {args.repeats} processes)")
    save(args.save, "ncnn_stem", {"settings": {k: str(v) for k, v in vars(args).items()},
                                  "largest_difference_from_pytorch_6x6": agreement,
                                  "median_pass_ms": medians, "rounds_ms": rounds}, args.threads)


if __name__ == "__main__":
    main()
