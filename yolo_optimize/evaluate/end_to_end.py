"""The deployed path, image files in and kept predictions out, pipelined as a service runs it.

While batch N is inferred, one reader thread reads and prepares batch N+1 (the family's
decoder and resize, then the artifact's input form: ``Runner.input_of``); batch N's raw output
is then post-processed (``Family.postprocess``: NMS at 0.25 for detectors) before batch N+1 is
inferred. Its rate is the wall time between consecutive batches' predictions.

The reader and the post-processing each get one thread (OpenCV single-threaded; PyTorch, whose
NMS the detectors use, single-threaded where the artifact does not compute on PyTorch itself):
on two cores a second OpenCV or PyTorch pool competes with the runtime's own threads, and the
post-processing of a runtime's output then took 8 ms instead of 0.8 (issue 21). ``SETTINGS``
records this beside every end-to-end figure.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np

from yolo_optimize.families.base import Family
from yolo_optimize.runtime.runners.base import Runner

SETTINGS = {"reader_threads": 1, "prefetched_batches": 1, "opencv_threads": 1,
            "postprocess": "after each batch, on the inferring thread; PyTorch single-threaded unless the artifact "
                           "computes on PyTorch"}


def single_threaded_helpers(runner: Runner) -> None:
    """This process's OpenCV and (unless the runner computes on it) PyTorch pools down to one thread
    (``SETTINGS``): the runtime keeps the cores."""
    import cv2

    cv2.setNumThreads(1)
    if not runner.computes_with_torch:
        import torch

        torch.set_num_threads(1)


class EndToEnd:
    """``batch`` image files at a time, from ``files`` in turn, through read, prepare, infer and postprocess."""

    def __init__(self, family: Family, runner: Runner, files: tuple[Path, ...], imgsz: int, batch: int) -> None:
        self.family, self.runner, self.files, self.imgsz, self.batch = family, runner, files, imgsz, batch
        self._reader = ThreadPoolExecutor(1, thread_name_prefix="reader")
        self._next: Future[np.ndarray] | None = None
        self._index = 0

    def step(self) -> list[np.ndarray]:
        """The next batch's kept predictions, the batch after it already being read."""
        if self._next is None:
            self._next = self._reader.submit(self._load, self._index)
        images = self._next.result()
        self._index += 1
        self._next = self._reader.submit(self._load, self._index)
        return self.runner.kept(images)

    def block(self, seconds: float) -> list[float]:
        """One warm-up batch (its read was not overlapped), then batches until their intervals add up to
        ``seconds``: each interval is the wall time from one batch's predictions to the next's."""
        self.step()
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

    def _load(self, index: int) -> np.ndarray:
        start = index * self.batch
        chunk = [self.files[(start + k) % len(self.files)] for k in range(self.batch)]
        return self.runner.input_of(np.stack([prepare(self.family, path, self.imgsz) for path in chunk]))


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
