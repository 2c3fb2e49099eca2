"""The deployed path, image files in and kept predictions out, pipelined as a service runs it.

While batch N is inferred, the next batches are read and prepared (the family's decoder and resize, then the
artifact's input form: ``Runner.input_of``); batch N's raw output is then post-processed (``Family.postprocess``:
NMS at 0.25 for detectors) before batch N+1 is inferred. Its rate is the wall time between consecutive batches'
predictions.

On a CPU the reader and the post-processing each get one thread (OpenCV single-threaded; the detectors' NMS is
numpy, ``families/host_nms.py``; PyTorch, where the process loaded it without computing on it, single-threaded): on
two cores a second OpenCV or PyTorch pool competes with the runtime's own threads, and the post-processing of a
runtime's output then took 8 ms instead of 0.8 (issue 21, when the NMS was PyTorch's). A GPU row's runtime leaves
the cores free: there a pool of decoders (every usable CPU but two: the inferring thread and the one assembling
batches) reads the images of the next batches at once, one image per task (OpenCV releases the GIL), and enough
batches are read ahead to keep every decoder busy; one reader bounded yolov5n on an H100 at ~200 img/s at every
batch size (issue 33). ``EndToEnd.settings`` is recorded beside every end-to-end figure, with the stage that bounded
it: how long the inferring thread waited for each batch's images against how long it inferred and post-processed.
"""

from __future__ import annotations

import functools
import math
import sys
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from yolo_optimize.families.base import Family
from yolo_optimize.host.cpu import usable_cpus
from yolo_optimize.runtime.runners.base import Runner

POSTPROCESS = "after each batch, on the inferring thread; PyTorch single-threaded unless the artifact computes on it"
BOUND_SHARE = 0.1  # of a batch's interval spent waiting for its images, from which reading bounds the path


def single_threaded_helpers(runner: Runner) -> None:
    """This process's OpenCV and (where loaded, unless the runner computes on it) PyTorch pools down to one thread
    (the module's docstring): the runtime keeps the cores. An ONNX Runtime or OpenVINO row on a CPU never imports
    PyTorch (seconds)."""
    import cv2

    cv2.setNumThreads(1)
    if not runner.computes_with_torch and "torch" in sys.modules:
        import torch

        torch.set_num_threads(1)


def decoders_for(runner: Runner) -> int:
    """Threads decoding images for ``runner``'s deployed path: one on a CPU (the runtime needs the cores), every
    usable CPU but two for a GPU row (the module's docstring)."""
    return max(1, usable_cpus() - 2) if runner.device == "cuda" else 1


class EndToEnd:
    """``batch`` image files at a time, from ``files`` in turn, through read, prepare, infer and postprocess;
    ``decoders`` threads read images (one: a single reader prepares whole batches)."""

    def __init__(self, family: Family, runner: Runner, files: tuple[Path, ...], imgsz: int, batch: int,
                 decoders: int = 1) -> None:
        self.family, self.runner, self.files, self.imgsz, self.batch = family, runner, files, imgsz, batch
        self.ahead = math.ceil(2 * decoders / batch) if decoders > 1 else 1  # batches read ahead
        self._reader = ThreadPoolExecutor(1, thread_name_prefix="reader")  # assembles batches in order
        self._decoders = ThreadPoolExecutor(decoders, thread_name_prefix="decoder") if decoders > 1 else None
        self._next: deque[Future[np.ndarray]] = deque()
        self._index = 0
        self.decoders = decoders
        self.waits: list[float] = []  # per timed batch: seconds the inferring thread waited for its images
        self.runs: list[float] = []  # and seconds of inference and post-processing

    def settings(self) -> dict[str, Any]:
        """How this path read images and, once batches were timed, which stage bounded it: reading (the inferring
        thread waited for images for at least BOUND_SHARE of each batch's interval, in the median) or the runtime."""
        found: dict[str, Any] = {"decoder_threads": self.decoders, "prefetched_batches": self.ahead,
                                 "opencv_threads": 1, "postprocess": POSTPROCESS}
        if self.waits:
            wait, run = float(np.median(self.waits)), float(np.median(self.runs))
            reading = wait >= BOUND_SHARE * (wait + run)
            found |= {"waited_for_images_ms": round(wait * 1e3, 3), "inference_and_postprocess_ms": round(run * 1e3, 3),
                      "bound_by": "reading images (decode, letterbox)" if reading else "the runtime (inference, NMS)"}
        return found

    def step(self) -> list[np.ndarray]:
        """The next batch's kept predictions, the batches after it already being read."""
        while len(self._next) < self.ahead + 1:
            self._next.append(self._submit())
        started = time.perf_counter()
        images = self._next.popleft().result()
        read = time.perf_counter()
        kept = self.runner.kept(images)
        self.waits.append(read - started)
        self.runs.append(time.perf_counter() - read)
        return kept

    def block(self, seconds: float) -> list[float]:
        """One warm-up batch (its read was not overlapped), then batches until their intervals add up to
        ``seconds``: each interval is the wall time from one batch's predictions to the next's."""
        self.step()
        del self.waits[-1], self.runs[-1]  # the warm-up batch
        intervals: list[float] = []
        last = time.perf_counter()
        while sum(intervals) < seconds:
            self.step()
            now = time.perf_counter()
            intervals.append(now - last)
            last = now
        return intervals

    def close(self) -> None:
        self._reader.shutdown(wait=True, cancel_futures=True)
        if self._decoders:
            self._decoders.shutdown(wait=True, cancel_futures=True)

    def _submit(self) -> Future[np.ndarray]:
        """The batch after the last one submitted: its images to the decoders, its assembly to the reader."""
        start, self._index = self._index * self.batch, self._index + 1
        chunk = [self.files[(start + k) % len(self.files)] for k in range(self.batch)]
        if self._decoders is None:
            return self._reader.submit(self._assembled, [functools.partial(self._prepared, path) for path in chunk])
        images = [self._decoders.submit(self._prepared, path) for path in chunk]
        return self._reader.submit(self._assembled, [image.result for image in images])

    def _prepared(self, path: Path) -> np.ndarray:
        return prepare(self.family, path, self.imgsz)

    def _assembled(self, images: list[Callable[[], np.ndarray]]) -> np.ndarray:
        return self.runner.input_of(np.stack([image() for image in images]))


def prepare(family: Family, path: Path, imgsz: int) -> np.ndarray:
    """One image file as the family's own repository feeds it to the model (uint8 HWC RGB)."""
    return family.prepare(family.read_image(path), imgsz).pixels


def sequential(family: Family, runner: Runner, files: tuple[Path, ...], imgsz: int, batch: int) -> list[np.ndarray]:
    """The same path one step after the other, no thread: what the pipeline must give, image by image."""
    kept: list[np.ndarray] = []
    for start in range(0, len(files), batch):
        pixels = np.stack([prepare(family, path, imgsz) for path in files[start:start + batch]])
        kept += runner.kept(runner.input_of(pixels))
    return kept
