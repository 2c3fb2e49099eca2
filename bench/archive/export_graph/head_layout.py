"""Issue 46's first lever: yolov5's Detect decode rewritten five ways, against yolov5's own, in OpenVINO.

    python -m bench.archive.export_graph.head_layout --assets ../shared/assets [--repeats 3] [--seconds 5] [--heads \
        plain,chain] [--batch 8]

yolov5's head permutes each level's ``[B, 255, H, W]`` to ``[B, 3, H, W, 85]`` first, then splits the 85 (x y, w h,
the rest) along the innermost axis, decodes and concatenates them there. Three rewrites keep the output contract
``[B, 25200, 85]`` and its anchor order:

- ``planes``: split, decode and concatenate in ``[B, 3, 85, H*W]``, where each part is whole planes, then one
  transpose per level to ``[B, 3*H*W, 85]``;
- ``one_transpose``: the same, the levels concatenated as ``[B, 85, 25200]`` and one transpose at the end;
- ``chain``: yolov5's layout, the decode one elementwise chain with no split and no concatenation, its grid
  offsets a row and a column broadcast.

Two keep the shape with each level's rows in (y, x, anchor) order, the layout the convolutions write (their
difference from yolov5's output is measured on its rows reordered the same way):

- ``channels_last``: each level transposed to ``[B, H, W, 255]``, read as ``[B, H, W, 3, 85]`` and decoded there
  as yolov5 decodes (the build's YOLOv5 export form since its graph revision 1, ``families/modules.py``);
- ``channels_last_chain``: the same with ``chain``'s decode.

Each head is exported from the pretrained yolov5n at 640 (torch's TorchScript-based ONNX exporter for
all of them, opset 18), converted to OpenVINO FP32 and quantized by NNCF's default recipe (MIXED preset, 32 coco128
images, in batches of ``--batch``). Each IR is then timed at ``--batch`` (1 by default; the graph is exported at that
batch) on 2 threads (LATENCY hint), the variants in turns, one fresh process each per round, with OpenVINO's
per-layer times summed by layer type. Saves the medians and every round under ``--save``.
"""

from __future__ import annotations

import collections
import statistics
import tempfile
import time
import types
from pathlib import Path
from typing import Any

from bench.harness import by_name, by_round, paired_rounds, parser_for, results_folder, save
from yolo_optimize.host.processes import in_own_process

VARIANTS = ("plain", "planes", "one_transpose", "chain", "channels_last", "channels_last_chain")
SIZE = 640


def decoded_in_planes(head: Any, levels: list[Any], one_transpose: bool) -> tuple[Any]:
    """yolov5's ``Detect.forward`` in export mode, its decode done in ``[B, anchors, 85, H*W]``."""
    import torch

    found = []
    for i in range(head.nl):
        y = head.m[i](levels[i]).sigmoid()
        batch, _, ny, nx = y.shape
        y = y.view(batch, head.na, head.no, ny * nx)
        xy, wh, rest = y.split((2, 2, head.nc + 1), 2)
        gy, gx = torch.meshgrid(torch.arange(ny, dtype=y.dtype), torch.arange(nx, dtype=y.dtype), indexing="ij")
        grid = torch.stack((gx.reshape(-1), gy.reshape(-1)), 0).view(1, 1, 2, ny * nx) - 0.5
        anchors = (head.anchors[i] * head.stride[i]).view(1, head.na, 2, 1)
        y = torch.cat(((xy * 2 + grid) * head.stride[i], (wh * 2) ** 2 * anchors, rest), 2)
        found.append(y.permute(0, 2, 1, 3).reshape(batch, head.no, -1) if one_transpose
                     else y.transpose(2, 3).reshape(batch, -1, head.no))
    return (torch.cat(found, 2).transpose(1, 2),) if one_transpose else (torch.cat(found, 1),)


def decoded_as_one_chain(head: Any, levels: list[Any], channels_last: bool = False) -> tuple[Any]:
    """yolov5's layout, its decode as ``s * (A * s + B) + X + Y`` on ``s = sigmoid(x)``: no split, no concatenation
    (A: 4 x the anchor on w h; B: 2 x the stride on x y, 1 on the scores; X, Y: the grid's offsets on x and y, one
    row and one column; OpenVINO folds the two additions into one constant the size of the output).
    ``channels_last``: the same decode in the build's channels-last layout (``families.modules
    .decoded_channels_last``), its constants' axes moved as the logits' are."""
    import torch

    found = []
    for i in range(head.nl):
        y = head.m[i](levels[i])
        batch, _, ny, nx = y.shape
        grid, anchors = head._make_grid(nx, ny, i)  # [1, na, ny, nx, 2] each: offsets - 0.5, anchors in pixels
        a = torch.zeros(1, head.na, 1, 1, head.no)
        a[..., 2:4] = 4 * anchors[:, :, :1, :1]
        b = torch.ones(1, 1, 1, 1, head.no)
        b[..., 0:2], b[..., 2:4] = 2 * head.stride[i], 0
        across, down = torch.zeros(1, 1, 1, nx, head.no), torch.zeros(1, 1, ny, 1, head.no)
        across[0, 0, 0, :, 0] = grid[0, 0, 0, :, 0] * head.stride[i]
        down[0, 0, :, 0, 1] = grid[0, 0, :, 0, 1] * head.stride[i]
        if channels_last:  # [B, ny, nx, na, no] instead of [B, na, ny, nx, no]
            s = y.permute(0, 2, 3, 1).reshape(batch, ny, nx, head.na, head.no).sigmoid()
            a, across, down = (c.permute(0, 2, 3, 1, 4) for c in (a, across, down))
        else:
            s = y.view(batch, head.na, head.no, ny, nx).permute(0, 1, 3, 4, 2).sigmoid()
        found.append((s * (a * s + b) + across + down).reshape(batch, -1, head.no))
    return (torch.cat(found, 1),)


def in_channels_last_order(head: Any, output: Any) -> Any:
    """yolov5's output with its rows in the channels-last heads' (y, x, anchor) order."""
    import torch

    parts, start = [], 0
    for i in range(head.nl):
        ny, nx = int(SIZE / head.stride[i]), int(SIZE / head.stride[i])
        level = output[:, start:start + head.na * ny * nx]
        parts.append(level.reshape(-1, head.na, ny, nx, head.no).permute(0, 2, 3, 1, 4).reshape(-1, ny * nx * head.na,
                                                                                                 head.no))
        start += head.na * ny * nx
    return torch.cat(parts, 1)


def make(assets: Path, folder: Path, heads: list[str], batch: int) -> dict[str, float]:
    """The heads' FP32 and INT8 IRs in ``folder``; each variant's largest difference from yolov5's output. A variant
    is a forward set on this loaded model's Detect instance: a patch of a model object for the study, no package
    code replaced."""
    import nncf
    import numpy as np
    import openvino as ov
    import torch
    from yolov5.models.yolo import Detect

    from yolo_optimize.checkpoint import load_model, resolve_source
    from yolo_optimize.families import family_named
    from yolo_optimize.families.modules import decoded_channels_last
    from yolo_optimize.images import list_images

    model = load_model(resolve_source(str(assets / "weights" / "yolov5n.pt")))
    image = torch.rand(batch, 3, SIZE, SIZE)
    head = next(m for m in model.modules() if isinstance(m, Detect))
    # The variants are this loaded model's own Detect instance given another forward (an instance attribute, the
    # class and the package untouched): first none, the export form's channels-last decode (YoloV5.for_export) gone
    del head.forward
    want = model(image)
    family = family_named("yolov5")
    images = [np.ascontiguousarray(family.preprocess(path, SIZE).pixels.transpose(2, 0, 1)[None],
                                   dtype=np.float32) / 255 for path in list_images(assets / "coco128")[:32]]
    calibration = [np.concatenate(images[start:start + batch]) for start in range(0, len(images), batch)]
    forwards = {"plain": head.forward,
                "planes": types.MethodType(lambda self, x: decoded_in_planes(self, x, False), head),
                "one_transpose": types.MethodType(lambda self, x: decoded_in_planes(self, x, True), head),
                "chain": types.MethodType(decoded_as_one_chain, head),
                "channels_last": types.MethodType(decoded_channels_last, head),
                "channels_last_chain": types.MethodType(lambda self, x: decoded_as_one_chain(self, x, True), head)}
    differences = {}
    for name in heads:
        head.forward = forwards[name]
        expected = in_channels_last_order(head, want) if name.startswith("channels_last") else want
        differences[name] = float((model(image) - expected).abs().max())
        torch.onnx.export(model, (image,), str(folder / f"{name}.onnx"), dynamo=False, opset_version=18,
                          input_names=["images"], output_names=["output0"])
        ir = ov.convert_model(str(folder / f"{name}.onnx"))
        ov.save_model(ir, str(folder / f"{name}-fp32.xml"), compress_to_fp16=False)
        quantized = nncf.quantize(ir, nncf.Dataset(calibration), preset=nncf.QuantizationPreset.MIXED,
                                  subset_size=len(calibration))
        ov.save_model(quantized, str(folder / f"{name}-int8.xml"), compress_to_fp16=False)
    return differences


def timed(path: Path, seconds: float, batch: int) -> dict[str, Any]:
    """This process's median latency at ``batch`` of the IR at ``path`` and its per-layer milliseconds by layer type."""
    import numpy as np
    import openvino as ov

    compiled = ov.Core().compile_model(str(path), "CPU", {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": 2,
                                                          "PERF_COUNT": True})
    request = compiled.create_infer_request()
    image = np.random.default_rng(0).random((batch, 3, SIZE, SIZE), np.float32)
    for _ in range(5):
        request.infer({0: image})
    runs, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end:
        start = time.perf_counter()
        request.infer({0: image})
        runs.append((time.perf_counter() - start) * 1e3)
    by_type: collections.Counter[str] = collections.Counter()
    for layer in request.profiling_info:
        by_type[layer.node_type] += layer.real_time.total_seconds() * 1e3
    return {"p50_ms": round(statistics.median(runs), 3), "runs": len(runs),
            "layer_ms": {kind: round(ms, 3) for kind, ms in by_type.most_common()}}


def main() -> None:
    parser = parser_for(__doc__)
    parser.add_argument("--assets", type=Path, default=Path("../shared/assets"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--save", type=Path, default=results_folder("head_layout"))
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", default=",".join(VARIANTS), help="which of " + ", ".join(VARIANTS))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="head-layout-") as scratch:
        heads = args.heads.split(",")
        differences = make(args.assets, Path(scratch), heads, args.batch)
        irs = [f"{name}-{precision}" for name in heads for precision in ("int8", "fp32")]

        def run(ir: str) -> dict[str, Any]:
            found = in_own_process(by_name(timed), Path(scratch) / f"{ir}.xml", args.seconds, args.batch)
            print(f"{ir} {found['p50_ms']:.1f} ms", flush=True)
            return found

        runs = paired_rounds(irs, args.repeats, run)
    rounds = by_round(irs, runs)
    medians = {key: {"p50_ms": round(statistics.median(r[key]["p50_ms"] for r in rounds), 2),
                     "layer_ms": {kind: round(statistics.median(r[key]["layer_ms"].get(kind, 0) for r in rounds), 2)
                                  for kind in rounds[0][key]["layer_ms"]}} for key in rounds[0]}
    for key, line in medians.items():
        top = ", ".join(f"{kind} {ms}" for kind, ms in list(line["layer_ms"].items())[:6])
        print(f"{key}: p50 {line['p50_ms']} ms ({top})")
    save(args.save, "head_layout", {"batch": args.batch, "largest_difference": differences, "medians": medians,
                                    "rounds": rounds}, 2)


if __name__ == "__main__":
    main()
