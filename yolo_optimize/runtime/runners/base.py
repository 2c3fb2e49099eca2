"""The one interface every runtime implements; nothing else in the evaluator is format-specific."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from functools import cached_property
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from yolo_optimize.artifact import Manifest
from yolo_optimize.images import model_input
from yolo_optimize.metadata import ArtifactMetadata
from yolo_optimize.runtime.layers import LayerProfile
from yolo_optimize.runtime.runners.cuda_phases import CudaPhases

if TYPE_CHECKING:
    from yolo_optimize.families.base import Family

LATENCY, THROUGHPUT, AUTO = "latency", "throughput", "auto"
MODES = (AUTO, LATENCY, THROUGHPUT)


def wanted_mode(policy: str, batch: int) -> str:
    """The mode a call of ``batch`` images runs in: ``auto`` is latency for one image, throughput for more (how
    each is deployed: one request answered as fast as possible, or a stream of images served at the best rate)."""
    if policy == AUTO:
        return LATENCY if batch == 1 else THROUGHPUT
    return policy


@dataclass(frozen=True)
class Execution:
    """How a runner runs a call of one batch size: everything a deployment must set to get the measured speed.

    Latency: the whole batch is one request computed by one stream on every thread. Throughput: the
    batch is split into requests of ``request_batch`` images that ``streams`` streams of
    ``threads_per_stream`` threads compute at once (OpenVINO's THROUGHPUT hint and its request queue,
    concurrent ONNX Runtime requests): one thread per stream needs no synchronisation between threads,
    which some hosts make slow. ``settings`` are the runtime's own, as passed to it.
    """

    mode: str
    streams: int
    threads_per_stream: int
    request_batch: int
    requests: int = 1  # requests in flight at once
    settings: dict[str, Any] = field(default_factory=dict)
    note: str = ""  # why the mode differs from the one asked for (a runtime without a throughput mode)

    @property
    def label(self) -> str:
        """``throughput 2x1`` (streams x threads per stream) or ``latency 1x2``, as the matrix shows it."""
        return f"{self.mode} {self.streams}x{self.threads_per_stream}"

    @classmethod
    def recorded(cls, values: Mapping[str, Any]) -> Execution:
        """The execution as results.json records it (its fields and their ``label``: ``measure.execution_of``), typed
        again; a field not recorded (a row whose batch recorded none) is one latency request's on one thread."""
        named = {item.name for item in fields(cls)}
        return cls(**{"mode": LATENCY, "streams": 1, "threads_per_stream": 1, "request_batch": 1,
                      **{key: value for key, value in values.items() if key in named}})


class Runner(ABC):
    """``activate`` loads, ``infer`` maps a batch in the artifact's input form (``input_of``) to its raw output,
    ``deactivate`` frees. ``mode`` is the policy of ``wanted_mode``: runtimes with a throughput configuration
    (``has_throughput_mode``) run batches in it when it asks for one."""

    phases: CudaPhases | None = None  # set by a runner on CUDA: each call's copies and compute (cuda_phases.py)
    has_throughput_mode: ClassVar[bool] = False
    computes_with_torch: ClassVar[bool] = False  # its inference runs on PyTorch's thread pool
    takes_one_image: ClassVar[bool] = False  # its graph has no batch axis (edge runtimes): a batch is image by image
    # images per request in the throughput configuration: one, as benchmark_app's throughput mode; a study of the
    # request size sets another through the measuring's Timing.request_batch (open_runner)
    throughput_request_batch = 1

    @classmethod
    def unavailable_reason(cls, device: str) -> str | None:
        """Why this runtime cannot run on ``device`` here (checked before any process starts); None if it can."""
        return None

    def __init__(self, folder: Path, manifest: Manifest, *, device: str = "cpu", threads: int = 1,
                 mode: str = LATENCY) -> None:
        self.folder, self.manifest, self.device, self.threads, self.mode = folder, manifest, device, threads, mode
        self.metadata = ArtifactMetadata.of(manifest)

    def input_of(self, pixels: np.ndarray) -> np.ndarray:
        """A uint8 NHWC RGB batch (what the family prepares) in the form the artifact takes (its metadata's
        ``input``: float32 NCHW in [0, 1], or the uint8 image as it is for artifacts with the preprocessing inside)."""
        return model_input(pixels, self.metadata.takes.prepared)

    def execution(self, batch: int) -> Execution:
        """How a call of ``batch`` images runs (the latency configuration unless overridden)."""
        if self.takes_one_image:
            note = f"{self.manifest.target}'s graph takes one image: a batch runs image by image" if batch > 1 else ""
            return Execution(LATENCY, 1, self.threads, 1, settings=self.runtime_settings, note=note)
        note = ("" if wanted_mode(self.mode, batch) == LATENCY
                else f"{self.manifest.target} has no throughput configuration: run as it is")
        return Execution(LATENCY, 1, self.threads, batch, settings=self.runtime_settings, note=note)

    @property
    def runtime_settings(self) -> dict[str, Any]:
        """The runtime's own settings as this runner passes them (the snippet's ``{config}``), where the format's
        runner does not report them through its own ``execution``."""
        return {}

    def variants(self, batch: int) -> tuple[str, ...]:
        """Named ways to run this file at ``batch`` whose speed depends on the host more than a rule can tell, between
        which the evaluator chooses by measurement in a process of the row's own before its first round
        (``interleave._Timed.choose_variant``); the first is the one kept on a tie. () where there is nothing to
        choose. Answered before the runner loads."""
        return ()

    def use_variant(self, variant: str) -> None:
        """Run as ``variant`` (one of ``variants``) from the next call on, loaded or not."""
        raise NotImplementedError(f"{type(self).__name__} has no variants to choose between")

    def set_threads(self, threads: int) -> None:
        """Compute on ``threads`` threads from the next call on (the evaluator's measured choice of the CPU baseline's
        threads, ``interleave._Timed.choose_threads``); a runtime that fixes them at load refuses."""
        raise NotImplementedError(f"{type(self).__name__} fixes its threads when it loads")

    @property
    def entry(self) -> Path:
        assert self.manifest.entry, f"{self.manifest.node} has no entry file"
        return self.folder / self.manifest.entry

    @property
    def file_precision(self) -> str:
        return self.manifest.precision or "fp32"

    @property
    def compute_precision(self) -> str:
        """The precision of the float arithmetic as the runtime reports it (for INT8 files: their float parts)."""
        return self.file_precision

    @property
    def precision_note(self) -> str:
        """Why the compute precision differs from the file's, when it does."""
        return ""

    @property
    def executed_precision(self) -> str:
        """The label shown everywhere: ``int8+fp32``, ``bf16``, ``fp32 (fp16 cast up)``..."""
        if self.file_precision == "int8":
            return f"int8+{self.compute_precision}"
        return f"{self.compute_precision} ({self.precision_note})" if self.precision_note else self.compute_precision

    @property
    def weight_bytes(self) -> int | None:
        """Bytes of the weights the runtime loaded, in the file's own precision (int8 weights are one byte each):
        what a deployment holds, apart from the file's size. None where the runtime cannot tell."""
        return None

    @abstractmethod
    def activate(self) -> None: ...

    @abstractmethod
    def infer(self, images: np.ndarray) -> np.ndarray: ...

    @cached_property
    def family(self) -> Family:
        return self.metadata.model_family()

    def kept(self, images: np.ndarray) -> list[np.ndarray]:
        """What a deployment keeps of a batch in the artifact's input form, on the host: ``Family.postprocess`` of
        the raw output (detections after NMS)."""
        return self.family.postprocess(self.infer(images))

    @property
    def timed(self) -> Callable[[np.ndarray], Any]:
        """The call the evaluation times per batch: ``infer`` (the raw output on the host), or ``kept`` for a runner
        whose deployment post-processes on the device (a GPU runner: only what is kept crosses the bus)."""
        return self.infer

    @abstractmethod
    def deactivate(self) -> None: ...

    def profile_layers(self, images: np.ndarray, runs: int, trace: Path) -> LayerProfile:
        """Per-layer time of ``runs`` forward passes of ``images`` (after warm-up) by the runtime's own profiler,
        and a Chrome-trace file at ``trace``. Runtimes without a per-layer profiler say so."""
        raise NotImplementedError(f"no per-layer profiler for {self.manifest.target}")

    def __enter__(self) -> Runner:
        self.activate()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.deactivate()
