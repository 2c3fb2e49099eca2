"""Typed results that keep raw samples, statistics and units (optimum-benchmark style): what results.json records
(``Report.to_json``; read back by results_json.py) and every report reads."""

from __future__ import annotations

import dataclasses
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yolo_optimize.evaluation.facts import ModelFacts
from yolo_optimize.evaluation.options import ROW_TIMEOUT_S
from yolo_optimize.evaluation.run_statistics import FastState, LatencyStats, fast_state
from yolo_optimize.host.busy import HostUse
from yolo_optimize.runtime.accuracy import RANGE, SHARE, Accuracy
from yolo_optimize.runtime.runners.base import AUTO

SCHEMA_VERSION = 11  # 2: interleaved rounds, per-round speedups; 3: model facts, machine limits, utilization;
#                    4: weight bytes per artifact, per-convolution utilization in profiles; 5: GPU rows' copy/compute;
#                    6: speedups from the host's fast state (Row.fast_state); 7: each batch size's execution
#                    configuration and the pipelined end-to-end path (BatchResult.execution, .end_to_end);
#                    8: the matrix typed (MatrixRow: per-batch figures under "batches", keyed by the batch size,
#                    instead of keys such as "speedup_b8"); rows and settings as in 7; 9: what else ran on the
#                    measuring CPUs (Measurement.host), the baseline's threads chosen by measurement
#                    (Row.threads_choice): optional fields, so 7 and 8 read as 9 without them; 10: the
#                    runtime's variant chosen by measurement (Row.variant_choice, optional); 11: the evaluation
#                    images an artifact was calibrated on (Row.calibration_overlap, optional: 0 before)
INFERENCE, END_TO_END = "inference", "end_to_end"  # what a figure times: the runtime's call, or the deployed path

BASELINE_TARGET = "pytorch"


def is_baseline(target: str, precision: str) -> bool:
    """The row every speedup is over: PyTorch FP32 eager (a GPU evaluation adds PyTorch FP16 eager beside it)."""
    return target == BASELINE_TARGET and precision == "fp32"


@dataclass
class BatchResult:
    batch: int
    latency: LatencyStats | None = None
    throughput_ips: float | None = None  # images per second, from the median latency
    error: str = ""  # e.g. the artifact cannot take this batch size
    phases_ms: dict[str, LatencyStats] | None = None  # GPU rows: copy_in / compute / copy_out of the same runs
    execution: dict[str, Any] | None = None  # runners.base.Execution: the configuration these runs used
    end_to_end: LatencyStats | None = None  # the pipelined deployed path: ms between consecutive batches' predictions
    end_to_end_ips: float | None = None  # images per second, from their median

    def samples_ms(self, part: str = INFERENCE) -> list[float]:
        """The raw runs of ``part``: the runtime's calls, or the end-to-end path's intervals."""
        stats = self.latency if part == INFERENCE else self.end_to_end
        return stats.samples_ms if stats else []


@dataclass
class Measurement:
    """One process's measurement of one artifact."""

    load_s: float
    first_inference_s: float
    batches: list[BatchResult]
    peak_rss_mb: float
    cuda_peak_mb: float | None
    executed_precision: str
    threads: int
    weight_bytes: int | None = None  # the weights the runtime loaded, at their stored types (runners/base.py)
    round: int = 0  # the interleaved round it was taken in
    host: HostUse | None = None  # what else ran on its CPUs while it timed its blocks (host/busy.py)

    def throughput(self, batch: int, part: str = INFERENCE) -> float | None:
        return next((b.throughput_ips if part == INFERENCE else b.end_to_end_ips
                     for b in self.batches if b.batch == batch), None)


@dataclass(frozen=True)
class ThreadChoice:
    """How many threads the CPU baseline ran on, chosen by measurement in its first process (interleave.py): a
    loaded host can make PyTorch at several threads many times slower than at one."""

    offered: int  # the evaluation's --threads
    chosen: int
    p50_ms_offered: float  # batch 1, alternating blocks at each count
    p50_ms_one: float
    busy_host: str = ""  # other processes shared the CPUs while it was chosen (or that is unknown): why to doubt it

    def describe(self) -> str:
        ratio = max(self.p50_ms_offered, self.p50_ms_one) / min(self.p50_ms_offered, self.p50_ms_one)
        slower = f"{self.offered if self.chosen == 1 else 1} measured {ratio:.2f}x slower"
        return (f"ran on {self.chosen} thread{'s' if self.chosen > 1 else ''}, chosen by measurement (b1 p50 "
                f"{self.p50_ms_offered:g} ms at {self.offered} threads, {self.p50_ms_one:g} ms at 1: {slower})"
                + chosen_while(self.busy_host))


def chosen_while(busy_host: str) -> str:
    """What a choice made while the host was busy (``HostUse.describe``) adds to its description."""
    return "; chosen while the host was busy or its load unknown: doubtful" if busy_host else ""


@dataclass(frozen=True)
class VariantChoice:
    """How a row's runtime ran, chosen by measurement among the ways its runner offers (``Runner.variants``,
    interleave.py) in a process of the row's own before its first round, and kept for every round: which is faster
    depends on the host (ONNX Runtime's idle threads sleeping or spinning: runners/onnxruntime.py)."""

    batch: int  # the batch size timed: the smallest measured
    p50_ms: dict[str, float]  # each variant's p50 over alternating blocks, in the runner's order (first: default)
    chosen: str
    busy_host: str = ""  # as ThreadChoice's
    failed: str = ""  # why the choosing process gave no answer: the row runs the runner's default (``chosen``)

    @property
    def timings(self) -> str:
        return f"b{self.batch} p50: " + ", ".join(f"{variant} {ms:g} ms" for variant, ms in self.p50_ms.items())

    def describe(self) -> str:
        if self.failed:
            return f"ran with {self.chosen}, its runner's default: choosing by measurement failed ({self.failed})"
        return f"ran with {self.chosen}, chosen by measurement ({self.timings})" + chosen_while(self.busy_host)


@dataclass
class Row:
    """One artifact (or the PyTorch baseline) across its repeated measurements."""

    name: str  # target-precision
    model: str
    target: str
    precision: str
    folder: str
    file_mb: float | None
    pretrained: bool
    entry: str = ""  # the file a deployment loads (the baseline's: its checkpoint; "" for random weights)
    task: str = ""  # the family's task ("detect", "classify"): which accuracy columns apply
    measurements: list[Measurement] = field(default_factory=list)
    accuracy: Accuracy | None = None
    cpu_note: str = ""  # what the artifact's arithmetic assumes of the CPU, and whether this one has it
    facts: ModelFacts | None = None  # the model's at the row's input size (None: could not be counted)
    profile: dict[str, Any] | None = None  # eval --profile: profiles.ArtifactProfile less its layers (profile.json)
    error: str = ""  # set when the row could not be measured at all
    skipped: str = ""  # why the row is not measured on purpose (a GPU-only format on a CPU evaluation)
    input_form: str = ""  # what the artifact takes (metadata.InputSpec.describe of its metadata's input)
    external: dict[str, Any] | None = None  # a model file this tool did not build: its path, sha256, what was read
    threads_choice: ThreadChoice | None = None  # the CPU baseline: the threads it ran on, chosen by measurement
    variant_choice: VariantChoice | None = None  # how its runtime ran, where the runner offers a choice
    calibration_overlap: int = 0  # evaluation images it was calibrated on (by path or content): no accuracy evidence

    def busy_host(self) -> str:
        """Why the row's figures cannot be trusted because other processes shared its CPUs: the busiest of its
        processes measured on a busy host (``HostUse.busy``), one that could not read the host's load, or its threads
        or variant chosen on a busy host; "" when none was."""
        busy = [m.host for m in self.measurements if m.host and m.host.busy]
        if busy:
            worst = max(busy, key=lambda use: use.others_cores + use.steal_share * use.cpus)
            return f"busy host in {len(busy)} of its {len(self.measurements)} processes: {worst.describe()}"
        unknown = next((m.host for m in self.measurements if m.host and m.host.unknown), None)
        if unknown is not None:
            return f"the host's load is {unknown.describe()}"
        choice = next((c for c in (self.threads_choice, self.variant_choice) if c and c.busy_host), None)
        if choice is None:
            return ""
        what = "threads were" if choice is self.threads_choice else "variant was"
        return f"its {what} chosen while the host was busy or its load unknown: {choice.busy_host}"

    def calibration_note(self) -> str:
        """Why the row's accuracy is no evidence of the artifact's: it was measured on images the artifact was
        calibrated on (its quantization scales fitted to them); "" when it was not."""
        if not self.calibration_overlap:
            return ""
        of = f" of its {self.accuracy.images}" if self.accuracy else ""
        return (f"accuracy measured on {self.calibration_overlap}{of} evaluation images that it was calibrated on: "
                "not evidence of its accuracy")

    def process_spread(self, batch: int, part: str = INFERENCE) -> float | None:
        """How far the row's processes disagree on ``part`` at ``batch``: the highest over the lowest of their
        throughputs in the host's fast state, less one; None with fewer than two processes measured there."""
        rates = [found.throughput_ips for m in self.measurements
                 if (found := fast_state([b.samples_ms(part) for b in m.batches
                                          if b.batch == batch and b.samples_ms(part)], batch))]
        return max(rates) / min(rates) - 1 if len(rates) > 1 else None

    def round_throughputs(self, batch: int, part: str = INFERENCE) -> dict[int, float]:
        """Images per second of ``part`` at ``batch`` in each interleaved round the row was measured in."""
        return {m.round: t for m in self.measurements if (t := m.throughput(batch, part))}

    def round_ratios(self, other: Row, batch: int, part: str = INFERENCE) -> list[float]:
        """This row's throughput over ``other``'s, round by round (the rounds both were measured in): a host's
        drift from one round to the next cancels in each ratio."""
        mine, theirs = self.round_throughputs(batch, part), other.round_throughputs(batch, part)
        return [mine[r] / theirs[r] for r in sorted(mine) if r in theirs]

    def fast_state(self, batch: int, part: str = INFERENCE) -> FastState | None:
        """The row's runs of ``part`` at ``batch`` in the host's fast state (run_statistics.fast_state); None if never
        measured."""
        return fast_state([b.samples_ms(part) for m in self.measurements for b in m.batches
                           if b.batch == batch and b.samples_ms(part)], batch)

    def execution(self, batch: int) -> dict[str, Any] | None:
        """The configuration the row's runs at ``batch`` used (the same in every process)."""
        return next((b.execution for m in self.measurements for b in m.batches if b.batch == batch and b.execution),
                    None)

    def median_latency(self, batch: int, statistic: str = "p50_ms") -> float | None:
        """The median over the row's processes of their ``p50_ms``/``p99_ms``... at ``batch``."""
        values = [getattr(b.latency, statistic) for m in self.measurements for b in m.batches
                  if b.batch == batch and b.latency]
        return statistics.median(values) if values else None

    def median_phases(self, batch: int) -> dict[str, float] | None:
        """GPU rows: the median over the row's processes of each phase's p50 at ``batch`` (copy in, compute, copy
        out, by CUDA events); None for rows without that split."""
        splits = [b.phases_ms for m in self.measurements for b in m.batches if b.batch == batch and b.phases_ms]
        if not splits:
            return None
        return {phase: round(statistics.median(s[phase].p50_ms for s in splits), 4) for phase in splits[0]}

    def median_memory_mb(self) -> float:
        """Peak resident memory of the row's processes (host RSS), median over them."""
        return statistics.median(m.peak_rss_mb for m in self.measurements)

    def median_gpu_memory_mb(self) -> float | None:
        """A GPU row's memory on the GPU as the driver counts it per process (NVML), median over its processes;
        None for a row measured on the CPU."""
        found = [m.cuda_peak_mb for m in self.measurements if m.cuda_peak_mb is not None]
        return statistics.median(found) if found else None

    def deployed_memory_mb(self) -> float:
        """The memory a deployment of the row must budget for: on the GPU its GPU memory, else host RSS."""
        gpu = self.median_gpu_memory_mb()
        return gpu if gpu is not None else self.median_memory_mb()


@dataclass(frozen=True)
class BatchCells:
    """A matrix row's figures at one batch size (matrix.batch_cells, roofline.roofline_cells), in the host's fast
    state; where the row has none at that size, ``error`` says why and every figure is None."""

    error: str = ""
    speedup: float | None = None  # throughput over the baseline's (None: no baseline)
    speedup_range: tuple[float, float] | None = None  # the lowest and highest per-round ratio, over all runs
    throughput_ips: float | None = None
    mode: str | None = None  # the label of the execution configuration it ran in (runners.base.Execution)
    fast_runs: tuple[int, int] | None = None  # runs kept in the fast state, of all
    end_to_end_ips: float | None = None  # the pipelined deployed path (None: not measured)
    end_to_end_share: float | None = None  # its share of throughput_ips
    gpu_ms: dict[str, float] | None = None  # GPU rows: median ms of copy in / compute / copy out (Row.median_phases)
    achieved_gops: float | None = None  # GFLOPs per image x throughput (None: the model's facts are not known)
    utilization: float | None = None  # achieved over the measured peak (eval --profile on a CPU)
    intensity: float | None = None  # operations per byte moved (eval --profile on a CPU)
    bound: str | None = None  # "memory" or "compute"

    def speedup_or_error(self) -> float | str | None:
        """What a table shows as the speedup: the figure, or why there is none at this batch size."""
        return self.error or self.speedup


NO_CELLS = BatchCells()


@dataclass(frozen=True)
class MatrixRow:
    """One line of the speedup matrix, typed: what matrix.csv, matrix.md, report.html and the console show of a row
    (matrix.matrix_row). A row not measured (skipped, failed) has its name and status only."""

    model: str
    artifact: str
    precision: str
    task: str
    note: str  # an experimental format, a model file this tool did not build
    status: str  # "ok", "skipped: why" or "failed: why"
    batches: dict[int, BatchCells] = field(default_factory=dict)  # every batch size of the evaluation, if measured
    executed_precision: str | None = None  # what the runtime reported computing in
    latency_b1_p50_ms: float | None = None
    peak_rss_mb: float | None = None
    gpu_mb: float | None = None  # a GPU row's memory on the GPU (NVML, per process)
    file_mb: float | None = None
    weights_mb: float | None = None
    map50_95: float | None = field(default=None, metadata=SHARE)
    map50: float | None = field(default=None, metadata=SHARE)
    map50_95_delta: float | None = field(default=None, metadata={RANGE: (-1.0, 1.0)})  # against the baseline
    top1_agreement: float | None = field(default=None, metadata=SHARE)
    top1: float | None = field(default=None, metadata=SHARE)
    accuracy_note: str = ""
    cpu_note: str = ""
    repeats: int = 0  # processes measured
    unstable: bool = False  # its processes disagree by more than matrix.UNSTABLE_SPREAD
    busy_host: str = ""  # why its figures are not to be trusted: other processes shared its CPUs (Row.busy_host)
    gflops_per_image: float | None = None
    peak_gops: float | None = None  # the measured peak that bounds it (eval --profile on a CPU)
    peak_of: str | None = None  # whose peak: runtime and precision

    def at(self, batch: int) -> BatchCells:
        """The row's figures at ``batch``; every one None where it has none (a row not measured)."""
        return self.batches.get(batch, NO_CELLS)


@dataclass(frozen=True)
class EvalSettings:
    """What an evaluation measured with, as results.json records it and every report reads it back."""

    data: Path | None
    batch_sizes: tuple[int, ...]
    threads: int
    device: str
    min_time_s: float
    repeats: int
    max_images: int | None
    accuracy: bool
    imgsz: int | None
    # the defaults below are what a results.json written before the field existed meant (report.load_report)
    profile_dir: Path | None = None  # eval --profile: every artifact's profile goes to <profile_dir>/<model>/<artifact>
    mode: str = AUTO  # runners.base.wanted_mode's policy: latency at batch 1 and throughput above, or one of them
    end_to_end: bool = True  # also time the pipelined deployed path (end_to_end.py) at every batch size
    row_timeout_s: float = ROW_TIMEOUT_S  # a row's process silent this long is stopped (interleave.LiveRow)


@dataclass
class Report:
    schema_version: int
    environment: dict[str, Any]
    settings: EvalSettings
    rows: list[Row]
    matrix: list[MatrixRow]
    machine_limits: dict[str, Any] | None = None  # limits/peaks.py's MachineLimits (eval --profile)

    def to_json(self) -> str:
        """results.json's text: every field as ``dataclasses.asdict`` gives it, the settings' paths as strings."""
        return json.dumps(dataclasses.asdict(self), indent=2, default=str) + "\n"
