"""What the two PyTorch runners share once their module is loaded: inference, per-layer profiling, weight bytes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from yolo_optimize.runtime.layers import LayerProfile
from yolo_optimize.runtime.runners.base import AUTO, LATENCY, THROUGHPUT, Execution, Runner
from yolo_optimize.runtime.runners.cuda_graph import CapturedForward, Lane, pinned, to_channels_last
from yolo_optimize.runtime.runners.cuda_phases import CudaPhases
from yolo_optimize.runtime.runners.torch_profile import torch_layer_profile

STREAMS = 2  # CUDA streams of the throughput mode (--mode throughput; batches of at least as many images)


class TorchModuleRunner(Runner):
    """A runner whose ``activate`` sets ``module`` (eager or TorchScript) and the input ``dtype`` it takes, then
    calls ``prepare_device``."""

    module: Any = None
    forward: CapturedForward | None = None  # on CUDA: the module as deployed there
    lanes: tuple[Lane, ...] = ()  # on CUDA: the throughput mode's streams, each with its own graphs and buffers
    dtype: Any = None  # torch.float32, or torch.float16 for an FP16 TorchScript file, torch.uint8 for a uint8 input
    computes_with_torch = True

    def input_dtype(self) -> Any:
        """The torch dtype of the artifact's input, from its metadata (float32 when it says nothing: the baseline)."""
        import torch

        return getattr(torch, self.metadata.takes.dtype)

    def prepare_device(self) -> None:
        """On CUDA, the forward as a GPU deployment runs it (``cuda_graph.py``): the prepared uint8 batch in pinned
        memory, preprocessing on the GPU, one CUDA graph per batch size, cuDNN's autotuner on, channels-last for
        half precisions (their tensor-core kernels take NHWC); and FP32 means FP32 (PyTorch lets cuDNN round FP32
        convolutions to TF32 by default). Each call's copies and compute are split by CUDA events."""
        import torch

        if self.device != "cuda":
            return
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
        channels_last = self.dtype in (torch.float16, torch.bfloat16) and isinstance(self.module, torch.nn.Module)
        if channels_last:
            self.module = to_channels_last(self.module)
        self.phases = CudaPhases()
        self.forward = self._captured(channels_last, self.phases)
        self.lanes = tuple(Lane(torch.cuda.Stream(), self._captured(channels_last)) for _ in range(STREAMS))

    def _phases_finished(self) -> None:
        """Ends the call's CUDA phases (set together with ``forward`` by ``prepare_device``)."""
        if self.phases is not None:
            self.phases.finish()

    def set_threads(self, threads: int) -> None:
        """PyTorch's intra-op pool takes a new size between calls."""
        import torch

        torch.set_num_threads(threads)
        self.threads = threads

    def _captured(self, channels_last: bool, phases: CudaPhases | None = None) -> CapturedForward:
        return CapturedForward(self.module, self.dtype, takes_pixels=self.metadata.takes.prepared,
                               channels_last=channels_last, phases=phases)

    def input_of(self, pixels: np.ndarray) -> np.ndarray:
        """On CUDA the prepared uint8 batch itself, in pinned memory (``cuda_graph.pinned``): its layout, scale and
        cast are done on the GPU."""
        if self.forward is None:
            return super().input_of(pixels)
        return pinned(pixels)

    def infer(self, images: np.ndarray) -> np.ndarray:
        import torch

        if self.forward is None:
            with torch.inference_mode():
                return self.module(torch.from_numpy(images).to(self.dtype)).float().numpy()
        found = self.forward(images).float().cpu().numpy()
        self._phases_finished()
        return found

    def kept(self, images: np.ndarray) -> list[np.ndarray]:
        """On CUDA the family post-processes the output where it is (``Family.kept_on_device``: NMS on the GPU), and
        only what it keeps is copied back."""
        if self.forward is None:
            return super().kept(images)
        if self._on_streams(len(images)):
            return self._kept_on_streams(images)
        found = self.family.kept_on_device(self.forward(images), self.metadata.side)
        self._phases_finished()
        return found

    def _on_streams(self, batch: int) -> bool:
        """Only when asked for by name (``--mode throughput``): on an H100, yolov5n's batches of 8 and 32 ran 29% and
        8% slower on two streams than on one, and batches of 64 as fast (bench/archive/gpu_lane/README.md)."""
        return self.mode == THROUGHPUT and batch >= len(self.lanes) > 1

    def _kept_on_streams(self, images: np.ndarray) -> list[np.ndarray]:
        """The throughput mode: the batch split over the lanes, every part's copy and graph queued on its own
        stream before any part's post-processing starts, so that a part's copy and its NMS (whose host
        synchronisation waits for its own stream only) overlap the other parts' compute. Not split by CUDA events."""
        import torch

        parts = np.array_split(images, len(self.lanes))  # views of the pinned batch
        outputs = []
        for lane, part in zip(self.lanes, parts):
            lane.stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(lane.stream):
                outputs.append(lane.forward(part))
        found: list[np.ndarray] = []
        for lane, output in zip(self.lanes, outputs):
            with torch.cuda.stream(lane.stream):
                found += self.family.kept_on_device(output, self.metadata.side)
        return found

    @property
    def timed(self) -> Callable[[np.ndarray], Any]:
        return self.kept if self.forward else self.infer

    def execution(self, batch: int) -> Execution:
        """On CUDA: how the forward ran at ``batch`` (captured or not, and why) and what a deployment sets."""
        if self.forward is None:
            return super().execution(batch)
        streams = len(self.lanes) if self._on_streams(batch) else 1
        forwards = [lane.forward for lane in self.lanes] if streams > 1 else [self.forward]
        sizes = [len(part) for part in np.array_split(np.empty(batch), streams)]  # as ``_kept_on_streams`` splits
        captured = all(forward.captured(size) for forward, size in zip(forwards, sizes))
        settings = {"cuda_graph": captured, "input": "uint8 NHWC in pinned memory, asynchronous copy",
                    "preprocess": "in the graph" if self.metadata.takes.prepared else "on the GPU (layout, /255, cast)",
                    "postprocess": "on the GPU, only what it keeps copied back", "cudnn_benchmark": True,
                    "channels_last": self.forward.channels_last, "tf32": False}
        why = next((forward.not_captured for forward in forwards if forward.not_captured), "not run yet")
        note = "" if captured else f"not captured in a CUDA graph: {why}"
        if streams == 1:
            auto = self.mode == AUTO and batch > 1
            note = note or ("one CUDA stream: two measured slower (--mode throughput runs them)" if auto else "")
            return Execution(LATENCY, 1, self.threads, batch, settings=settings, note=note)
        return Execution(THROUGHPUT, streams, self.threads, sizes[0], streams,
                         {**settings, "cuda_streams": streams}, note)

    def profile_layers(self, images: np.ndarray, runs: int, trace: Path) -> LayerProfile:
        import torch

        batch = torch.from_numpy(images).to(self.device)
        run = self.forward.forward if self.forward else (lambda b: self.module(b.to(self.dtype)))

        def forward() -> Any:
            with torch.inference_mode():
                return run(batch)

        return torch_layer_profile(forward, runs, trace, self.compute_precision)

    @property
    def weight_bytes(self) -> int | None:
        """Parameters and buffers at their stored types (eager and TorchScript alike)."""
        return sum(tensor.numel() * tensor.element_size() for tensor in self.module.state_dict().values())

    def deactivate(self) -> None:
        self.module = self.forward = None
        self.lanes = ()
