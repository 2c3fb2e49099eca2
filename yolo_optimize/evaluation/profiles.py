"""What a profile of one artifact holds (``optimize profile``, and every artifact under ``optimize eval --profile``):
per-layer time and hotspots, convolutions against the measured peak, the end-to-end breakdown, thread scaling and
energy.

Apart from the profiling itself (measuring/profiling.py) and its pages (reporting/profile_page.py) because both
read these types, and the two never import each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from yolo_optimize.evaluation.run_statistics import FAST_STATE_SPAN
from yolo_optimize.host.energy import Energy
from yolo_optimize.runtime.layers import LayerTime

PROFILE_SCHEMA = 4
TOP = 10  # hotspots kept, and convolutions on the page
STAGES = ("read", "prepare", "infer", "postprocess")  # the deployed path's stages the breakdown times


@dataclass(frozen=True)
class Hotspot:
    name: str
    kind: str
    ms: float
    share: float  # of the per-layer sum
    executed: str
    kernel: str


@dataclass(frozen=True)
class LayerRate:
    """A convolution's (or fully connected layer's) achieved rate against the measured peak of its runtime in the
    precision that layer ran in (an INT8 file's float layers against the float peak)."""

    name: str
    kind: str
    ms: float
    gflops: float  # per forward pass of the profiled batch
    achieved_gops: float
    utilization: float | None  # None where that peak was not measured
    executed: str


@dataclass(frozen=True)
class Breakdown:
    """Seconds per image in each stage of the deployed path, and the end-to-end rate next to inference alone."""

    batch: int
    seconds_per_image: dict[str, float]  # read, prepare, infer, postprocess
    shares: dict[str, float]
    end_to_end_s_per_image: float  # wall time around the whole loop
    end_to_end_ips: float
    infer_ips: float


@dataclass(frozen=True)
class ThreadPoint:
    threads: int
    latency_p50_ms: float | None
    throughput_ips: float | None
    error: str = ""


@dataclass(frozen=True)
class LayerAttempt:
    """One profile with the forward time measured without a profiler right before and right after it.

    Why: some hosts switch for seconds at a time into a slower state (README "Reproducibility"), so a
    forward time and a per-layer sum taken a second apart can differ by 1.7x with nothing wrong in
    either. The two brackets agreeing within FAST_STATE_SPAN says the host held one speed throughout.
    """

    forward_before_ms: float
    forward_after_ms: float
    layers_ms: float  # the per-layer sum of this attempt's profile
    profiled_pass_ms: float  # the mean pass under the profiler, whose time the layers account for

    @property
    def disagreement(self) -> float:
        """How far apart the brackets are: the slower over the faster, less one (infinite if one is missing)."""
        low, high = sorted((self.forward_before_ms, self.forward_after_ms))
        return high / low - 1 if low > 0 and high > 0 else float("inf")  # NaN: a bracket without runs

    @property
    def steady(self) -> bool:
        return self.disagreement <= FAST_STATE_SPAN - 1



@dataclass
class ArtifactProfile:
    schema: int
    model: str
    artifact: str
    executed_precision: str
    batch_size: int
    forward_ms: float  # median latency without a profiler, around the reported profile
    layers_ms: float  # the per-layer sum under the profiler
    profiled_pass_ms: float  # the mean pass under the profiler: the layers' share of it says what they miss
    attempts: list[LayerAttempt]  # every profile taken, in order
    reported_attempt: int  # the one reported: the first steady one, else the one whose brackets agree best
    layers: list[LayerTime]
    by_kind_ms: dict[str, float]
    hotspots: list[Hotspot]
    convolutions: list[LayerRate]  # every weighted layer, slowest first
    convolution_gflops: float  # their sum: the model's operations as the runtime's graph counts them
    convolution_utilization: float | None  # their operations over their time, against the peak of the row's precision
    peak_of: str  # the runtime and precision convolution_utilization is measured against
    trace: str  # file name in the profile folder
    trace_note: str
    breakdown: list[Breakdown]
    threads: list[ThreadPoint]
    energy: Energy
    unavailable: dict[str, str] = field(default_factory=dict)  # part -> why it was not measured

