"""The lines that load a recommended artifact with its plain runtime, in the configuration it was measured in: the
format table's template filled from the row's recorded execution, and for a PyTorch row measured on a GPU the CUDA
graph (and streams) it ran with, so that what is shipped runs as it was measured."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from yolo_optimize.formats import format_named
from yolo_optimize.runtime.runners.base import THROUGHPUT, Execution


def snippet(target: str, precision: str, path: str, execution: Mapping[str, Any], input_form: str,
            side: int = 640) -> str:
    """A few lines that load ``path`` with its plain runtime in the configuration it was measured in (the format
    table's template for that configuration; ``execution``: the row's ``runners.base.Execution`` as results.json
    records it); a PyTorch row measured on a GPU (``cuda_graph`` in its settings) goes on with how it ran there
    (``CUDA_GRAPH``), on as many CUDA streams as its throughput configuration ran."""
    form, run = format_named(target), Execution.recorded(execution)
    throughput = run.mode == THROUGHPUT and form.throughput_snippet
    template = form.throughput_snippet if throughput else form.snippet
    loaded = template.format(path=path, config=repr(run.settings), input=input_form,
                             threads=run.streams * run.threads_per_stream, requests=run.requests,
                             dtype="float16" if precision == "fp16" else "float32")
    if "cuda_graph" not in run.settings:
        return loaded
    cast = ".half()" if precision == "fp16" else ""
    weights = CHANNELS_LAST if run.settings.get("channels_last") else ""
    streams = CUDA_STREAMS.format(streams=run.streams, batch=run.request_batch) if run.mode == THROUGHPUT else ""
    return "\n".join(line for line in loaded.splitlines() if not line.startswith("outputs")) + "\n" + \
        CUDA_GRAPH.format(cast=cast, channels_last=weights, batch=run.request_batch, side=side) + streams


# How a PyTorch row runs on a GPU (runtime/runners/cuda_graph.py), after the format's lines that load ``model``
CHANNELS_LAST = ("for weight in model.parameters():  # channels-last convolution weights\n"
                 "    weight.data = weight.data.contiguous(memory_format=torch.channels_last) if weight.dim() == 4 "
                 "else weight.data\n")
CUDA_GRAPH = (
    "torch.backends.cudnn.benchmark = True\n"
    "model = model.cuda(){cast}\n{channels_last}"
    "pixels = torch.empty(({batch}, {side}, {side}, 3), dtype=torch.uint8, device=\"cuda\")  # the prepared batch\n"
    "forward = lambda: model(pixels.permute(0, 3, 1, 2).float().div(255){cast})\n"
    "side = torch.cuda.Stream()\nside.wait_stream(torch.cuda.current_stream())\n"
    "with torch.inference_mode(), torch.cuda.stream(side):\n    for _ in range(3):\n        forward()\n"
    "torch.cuda.current_stream().wait_stream(side)\ngraph = torch.cuda.CUDAGraph()\n"
    "with torch.inference_mode(), torch.cuda.graph(graph):\n    outputs = forward()\n"
    "# each batch: pixels.copy_(pinned_images, non_blocking=True); graph.replay()  (images in pinned memory)\n"
    "# then NMS on outputs where they are (torchvision.ops.batched_nms); copy back only the detections")

CUDA_STREAMS = ("\n# on {streams} CUDA streams (--mode throughput): the batch split in parts of {batch} images, each "
                "part's copy, graph and NMS on its own stream, with a graph and buffers per stream")
