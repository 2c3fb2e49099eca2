"""A PyTorch forward as a GPU deployment runs it: pinned uint8 input, preprocessing on the GPU, one CUDA graph.

Eager PyTorch launches every kernel from Python: on an H100 that bounds yolov5n FP16 at ~146 img/s at batch 1
whatever the GPU could do, while the same forward replayed from one CUDA graph runs ~1,100 (issue 33). Per batch
size a ``CapturedBatch`` holds the batch on the GPU and one graph that turns it into the model's input (NCHW, /255,
the model's dtype; or the bytes as they are for an artifact with that preprocessing in its graph) and runs the
forward. The prepared uint8 NHWC images come in pinned host memory (``pinned``: where a deployment's reader writes
them), so their copy to the GPU is asynchronous and needs no staging copy by the driver; a batch in pageable memory
is first copied into the batch's own pinned buffer. A call is then one copy and one graph launch. A forward that
cannot be captured (a host synchronisation inside it, an op capture refuses) runs eagerly on the same buffers,
and ``not_captured`` says why: the row records it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from yolo_optimize.host.processes import one_line
from yolo_optimize.runtime.runners.cuda_phases import CudaPhases

WARMUP_CALLS = 3  # before a capture, on a side stream: cuDNN's autotuning (benchmark mode), lazy initialisation


def pinned(pixels: np.ndarray) -> np.ndarray:
    """``pixels`` copied into page-locked host memory (PyTorch's caching host allocator: a batch of the same size
    reuses a freed block), as numpy: the form a GPU runner's ``input_of`` returns."""
    import torch

    staged = torch.empty(pixels.shape, dtype=torch.uint8, pin_memory=True).numpy()
    staged[...] = pixels
    return staged


def to_channels_last(module: Any) -> Any:
    """``module`` with its 4-D weights in channels-last memory (the layout tensor-core convolutions take). Not
    ``module.to(memory_format=...)``: that converts every tensor, and a detection head's 5-D grids refuse it."""
    import torch

    for parameter in module.parameters():
        if parameter.dim() == 4:
            parameter.data = parameter.data.contiguous(memory_format=torch.channels_last)
    return module


@dataclass
class CapturedBatch:
    """One batch size's buffers and, once captured, its graph (None: run eagerly)."""

    pixels: Any  # uint8 [B, H, W, 3] on the GPU
    staging: np.ndarray | None = None  # pinned, for callers whose images are in pageable memory (made on first use)
    graph: Any = None
    output: Any = None  # the graph's output tensor, rewritten by each replay


class CapturedForward:
    """``module`` called on prepared uint8 NHWC batches, each batch size captured in a CUDA graph on first use."""

    def __init__(self, module: Callable[[Any], Any], dtype: Any, *, takes_pixels: bool, channels_last: bool,
                 phases: CudaPhases | None = None) -> None:
        import torch

        self._torch, self.module, self.dtype = torch, module, dtype
        self.takes_pixels, self.channels_last, self.phases = takes_pixels, channels_last, phases
        self.batches: dict[tuple[int, ...], CapturedBatch] = {}
        self.not_captured = ""  # why the forward runs eagerly ("" while every capture worked)

    def __call__(self, pixels: np.ndarray) -> Any:
        """The model's output for ``pixels`` (uint8 [B, H, W, 3]), on the GPU; valid until the next call."""
        torch = self._torch
        with torch.inference_mode():
            batch = self.batches.get(pixels.shape) or self._new_batch(pixels.shape)
            host = torch.from_numpy(pixels)
            if not host.is_pinned():
                batch.staging = pinned(pixels) if batch.staging is None else batch.staging
                batch.staging[...] = pixels
                host = torch.from_numpy(batch.staging)
            if self.phases:
                self.phases.start()
            batch.pixels.copy_(host, non_blocking=True)
            if self.phases:
                self.phases.mark()
            if batch.graph is not None:
                batch.graph.replay()
                output = batch.output
            else:
                output = self.forward(batch.pixels)
            if self.phases:
                self.phases.mark()
            return output

    def forward(self, pixels: Any) -> Any:
        """The model's input made from the uint8 batch on the GPU, then the model: what the graph captures."""
        if self.takes_pixels:
            return self.module(pixels)
        images = pixels.permute(0, 3, 1, 2).float().div(255)  # the same float32 arithmetic as images.to_input
        images = images.to(self.dtype)  # a permuted NHWC tensor is already channels-last in memory
        return self.module(images if self.channels_last else images.contiguous())

    def captured(self, batch: int) -> bool:
        return any(shape[0] == batch and b.graph is not None for shape, b in self.batches.items())

    def _new_batch(self, shape: tuple[int, ...]) -> CapturedBatch:
        torch = self._torch
        batch = CapturedBatch(torch.zeros(shape, dtype=torch.uint8, device="cuda"))
        self.batches[shape] = batch
        if not self.not_captured:
            try:
                batch.graph, batch.output = self._capture(batch.pixels)
            except Exception as err:  # noqa: BLE001 - the forward still runs, eagerly, and the row says why
                torch.cuda.synchronize()
                self.not_captured = one_line(err, 160)
        return batch

    def _capture(self, pixels: Any) -> tuple[Any, Any]:
        """Warm-up calls on a side stream (PyTorch's recipe: nothing of them enters the graph), then the capture."""
        torch = self._torch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(WARMUP_CALLS):
                self.forward(pixels)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        # thread-local: the end-to-end path's readers may pin a batch's memory meanwhile (a CUDA call that a global
        # capture would refuse, from a thread that has nothing to do with the capture)
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            output = self.forward(pixels)
        return graph, output


@dataclass(frozen=True)
class Lane:
    """A CUDA stream and the forward that runs on it, with its own buffers and graphs (the throughput mode's)."""

    stream: Any
    forward: CapturedForward
