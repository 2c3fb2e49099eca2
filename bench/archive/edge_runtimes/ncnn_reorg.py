"""Issue 45: NCNN's ``Reorg`` layer, what pnnx writes for ``torch.nn.PixelUnshuffle``, against PyTorch's own, fed
the input two ways.

    python -m bench.archive.edge_runtimes.ncnn_reorg [--save bench/results/<cpu kind>/ncnn_reorg]

Why: a space-to-depth stem (``optimize/space_to_depth.py`` does it for ONNX) would reach NCNN as that layer, and a
first probe of it gave garbage from 16x16 up. Exports a one-layer ``PixelUnshuffle(2)`` module with pnnx at 8x8, then
runs the .param at several input sizes (NCNN's graphs take any size) on the same counting input, with NCNN's FP16
storage off as ``ncnn-fp32`` runs, the input Mat made two ways: from an array held while NCNN copies it (as
``runners.ncnn.ncnn_input`` does), and from a temporary (``ncnn.Mat(x.copy()).clone()``, the probe's way: the Mat only
points at the buffer, which Python frees before the copy). Each case runs in its own process (a read of freed memory
may crash it); prints and saves the largest absolute difference from PyTorch's output, or how the process ended.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from bench.harness import by_name, save, timing_parser
from yolo_optimize.host.processes import in_own_process

SIZES = (8, 16, 32, 64, 640)


def exported(folder: Path) -> Path:
    """``PixelUnshuffle(2)`` as pnnx converts it; its .param."""
    import pnnx
    import torch

    from yolo_optimize.export.ncnn import scratch_paths

    param = folder / "reorg.ncnn.param"
    pnnx.export(torch.nn.PixelUnshuffle(2).eval(), str(folder / "reorg.pt"), (torch.rand(1, 3, 8, 8),),
                ncnnparam=str(param), ncnnbin=str(folder / "reorg.ncnn.bin"), **scratch_paths(folder))
    return param


FEEDS = ("held array", "temporary")


def difference(param: Path, size: int, feed: str) -> float:
    """NCNN's output against PyTorch's on a 3 x size x size input counting up from 0, fed as ``feed`` says."""
    import ncnn
    import torch

    net = ncnn.Net()
    for option in ("use_fp16_storage", "use_fp16_packed", "use_fp16_arithmetic"):
        setattr(net.opt, option, False)
    net.load_param(str(param))
    net.load_model(str(param.with_suffix(".bin")))
    image = np.arange(3 * size * size, dtype=np.float32).reshape(3, size, size)
    with net.create_extractor() as extractor:
        mat = ncnn.Mat(image).clone() if feed == "held array" else ncnn.Mat(image.copy()).clone()
        extractor.input(net.input_names()[0], mat)
        _, output = extractor.extract(net.output_names()[0])
        found = np.array(output)
    expected = torch.nn.functional.pixel_unshuffle(torch.from_numpy(image)[None], 2)[0].numpy()
    return float(np.abs(found - expected).max())


def main() -> None:
    parser = timing_parser(__doc__, "ncnn_reorg", 0.0)
    args = parser.parse_args()
    import ncnn

    found: dict[str, dict[str, str]] = {feed: {} for feed in FEEDS}
    with tempfile.TemporaryDirectory(prefix="ncnn-reorg-") as scratch:
        param = exported(Path(scratch))
        layers = [line.split()[0] for line in param.read_text().splitlines()[2:]]
        for feed in FEEDS:
            for size in SIZES:
                try:
                    found[feed][str(size)] = f"{in_own_process(by_name(difference), param, size, feed):.6g}"
                except RuntimeError as err:  # the process died: how, as the package says it
                    found[feed][str(size)] = f"failed: {err}"
                print(f"{feed}, {size}x{size}: largest difference from PyTorch {found[feed][str(size)]}", flush=True)
    save(args.save, "ncnn_reorg", {"ncnn": ncnn.__version__, "layers": layers, "largest_difference": found},
         args.threads)


if __name__ == "__main__":
    main()
