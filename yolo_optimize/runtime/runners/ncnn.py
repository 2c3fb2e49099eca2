"""NCNN (export/ncnn.py): ``ncnn.Net`` on the CPU, one extractor per image.

An NCNN graph takes one image (its blobs have no batch axis). In the latency configuration a batch is its images one
after the other, each on every thread: what a phone does with a stream of camera frames; in the throughput one they
run at once, one per thread (``NcnnRunner``). ``ncnn-fp32`` runs with FP16 storage, packing and
arithmetic off; ``ncnn-fp16`` with NCNN's defaults, whose FP16 arithmetic exists on ARM CPUs with half-precision
vector instructions only: on x86 NCNN stores in FP16 and computes in FP32, and "runs in" says so. ``ncnn-int8``
runs NCNN's INT8 inference (on by default) for the convolutions its .param gives int8 scales, and the rest in FP32
like ``ncnn-fp32``. An artifact built with ``--input uint8`` is the same graph fed the prepared uint8 image through
NCNN's own conversion (``ncnn_input``).

The .param reader (``NcnnLayer``, ``read_layers``) lives here, with the runtime whose format it is: the runner counts
the convolutions NCNN loaded with int8 scales, the export and ``ncnn-int8`` read and write the same lines. Per-layer
times come from NCNN's own timer, which only an ncnn built with ``NCNN_BENCHMARK`` has (``benchmark_layers``)."""

from __future__ import annotations

import json
import re
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from yolo_optimize.host.processes import native_output_to
from yolo_optimize.runtime.layers import LayerProfile, LayerTime, timed_ms
from yolo_optimize.runtime.runners.base import THROUGHPUT, Execution, Runner, wanted_mode


@dataclass(frozen=True)
class NcnnLayer:
    """One line of a .param: ``type name #bottoms #tops bottoms... tops... key=value...``."""

    kind: str
    name: str
    bottoms: tuple[str, ...]
    tops: tuple[str, ...]
    params: tuple[str, ...]  # "key=value", as written (arrays are "-23300=n,a,b...")

    @classmethod
    def parse(cls, line: str) -> NcnnLayer:
        """The layer a line writes; a ValueError where it lacks its counts or as many blob names as they say."""
        kind, name, bottoms, tops, *rest = line.split()
        inputs, outputs = int(bottoms), int(tops)
        blobs = rest[:inputs + outputs]
        if len(blobs) < inputs + outputs or any("=" in blob for blob in blobs):
            raise ValueError(f"{name}: {inputs} inputs and {outputs} outputs named by {len(blobs)} blobs")
        return cls(kind, name, tuple(blobs[:inputs]), tuple(blobs[inputs:]), tuple(rest[inputs + outputs:]))

    def param(self, key: int, default: int = 0) -> int:
        """An integer parameter, or ``default`` where the line has none (as ncnn's ParamDict)."""
        for item in self.params:
            name, _, value = item.partition("=")
            if name == str(key):
                return int(value)
        return default

    def line(self) -> str:
        return " ".join([f"{self.kind:<24}", f"{self.name:<24}", str(len(self.bottoms)), str(len(self.tops)),
                         *self.bottoms, *self.tops, *self.params])


def read_layers(param: Path) -> list[NcnnLayer]:
    """The layers of a .param (a magic line, the layer and blob counts, then a layer a line)."""
    return [NcnnLayer.parse(line) for line in param.read_text().splitlines()[2:] if line.strip()]


NCNN_MAGIC = "7767517"  # the first line of every .param NCNN loads
# Layer types that read weights from the .bin (an empty .bin cannot serve a graph holding one)
WEIGHTED = ("Convolution", "ConvolutionDepthWise", "Deconvolution", "DeconvolutionDepthWise", "InnerProduct",
            "BatchNorm", "MemoryData")


def files_problem(param: Path) -> str | None:
    """What keeps NCNN from loading ``param`` and the .bin beside it, found before it tries (None: they look whole).
    NCNN reads a malformed .param into a net without inputs (an IndexError later) and runs a graph whose weights it
    could not read into a SIGSEGV: so the text is checked (the magic line, the counts line, as many layer lines as
    it counts, each with its inputs and outputs) and the .bin too (there; not empty where a layer has weights)."""
    lines = [line for line in param.read_text(errors="replace").splitlines() if line.strip()]
    if not lines or lines[0].strip() != NCNN_MAGIC:
        return f"its first line is not NCNN's magic number {NCNN_MAGIC}: not an NCNN .param"
    counts = lines[1].split() if len(lines) > 1 else []
    if len(counts) != 2 or not all(count.isdigit() for count in counts):
        return "its second line is not '<layer count> <blob count>'"
    if int(counts[0]) != len(lines) - 2:
        return f"it counts {counts[0]} layers but has {len(lines) - 2} layer lines (cut short?)"
    layers = []
    for number, line in enumerate(lines[2:], 3):
        try:
            layers.append(NcnnLayer.parse(line))
        except ValueError:
            return f"line {number} is not '<type> <name> <inputs> <outputs> <input names> <output names> <k=v>...'"
    return _weights_problem(param.with_suffix(".bin"), layers)


def _weights_problem(weights: Path, layers: list[NcnnLayer]) -> str | None:
    if not weights.is_file():
        return f"its weights {weights.name} are missing beside it"
    if weights.stat().st_size == 0 and any(layer.kind in WEIGHTED for layer in layers):
        return f"its weights {weights.name} are empty, and its layers have weights"
    return None


def write_layers(param: Path, original: str, layers: list[NcnnLayer]) -> None:
    """``layers`` written as a .param with ``original``'s first two lines (same layers and blobs)."""
    param.write_text("\n".join([*original.splitlines()[:2], *(layer.line() for layer in layers)]) + "\n")


CONVOLUTIONS = ("Convolution", "ConvolutionDepthWise")  # pnnx writes a grouped nn.Conv2d as the second
# NCNN_BENCHMARK's line for a layer: "type name 1.23ms | [w, h, c *pack] -> [w, h, c *pack] ..." (the shapes only
# for one-input layers, benchmark.cpp)
BENCHMARK_LINE = re.compile(r"^(?P<kind>\S+)\s+(?P<name>\S+)\s+(?P<ms>[\d.]+)ms\s+\|"
                            r"(?:\s+\[[^\]]*\]\s+->\s+\[(?P<out>[^\]]*)\])?")
TRACE_NOTE = "NCNN_BENCHMARK's per-layer times, laid end to end in the order the layers ran (not a timeline)"
UINT8_PREPROCESS = "RGB; uint8 HWC as prepared, one image a call: NCNN's Mat.from_pixels and " \
    "substract_mean_normalize (x 1/255) make the float CHW input, as an app hands NCNN a camera frame"


def ncnn_input(image: np.ndarray) -> Any:
    """One image as NCNN takes it: a float CHW array as it is; a prepared uint8 HWC RGB image through NCNN's own
    conversion (``UINT8_PREPROCESS``). Why not in the graph, as other formats do it: an NCNN blob is float, so the
    bytes become floats in NCNN's C++, where a deployment converts them. ``ncnn.Mat(array)`` only points at the
    array's buffer, read as C-ordered float32 whatever its strides and type: the float image is made so and held
    until NCNN has copied it (a temporary freed before the copy gave garbage, or a crash at 640)."""
    import ncnn

    if image.dtype != np.uint8:
        pixels = np.ascontiguousarray(image, dtype=np.float32)
        return ncnn.Mat(pixels).clone()
    height, width = image.shape[:2]
    mat = ncnn.Mat.from_pixels(np.ascontiguousarray(image), ncnn.Mat.PixelType.PIXEL_RGB, width, height)
    mat.substract_mean_normalize([], [1 / 255] * 3)
    return mat


def _convolution_gflops(layer: NcnnLayer | None, output: str | None) -> float | None:
    """2 x multiply-adds of one image through a convolution: every output pixel of every output channel takes one
    multiply-add per weight of that channel, so its weight count (``6=``, for grouped ones too) x the output's
    width x height; None for other layers. ``output`` is the printed shape, ``w, h, c *elempack``."""
    if layer is None or layer.kind not in CONVOLUTIONS or not output:
        return None
    width, height = (int(size) for size in output.split(",")[:2])
    return 2 * layer.param(6) * width * height / 1e9


def benchmark_layers(printed: str, param: Path, float_precision: str, runs: int) -> tuple[list[LayerTime],
                                                                                           list[dict[str, Any]]]:
    """NCNN_BENCHMARK's lines (``printed``, other text ignored) from ``runs`` passes of the graph in ``param``: each
    layer's mean time per pass, in the order the layers first ran, with its precision (int8 for a convolution the
    .param gives int8 scales, else ``float_precision``) and a convolution's operations; and the trace's events, the
    layers laid end to end (NCNN keeps no timeline)."""
    loaded = {layer.name: layer for layer in read_layers(param)}
    totals: dict[str, tuple[str, float, float | None]] = {}
    events, clock = [], 0.0
    for match in filter(None, map(BENCHMARK_LINE.match, printed.splitlines())):
        name, kind, ms = match["name"], match["kind"], float(match["ms"])
        gflops = _convolution_gflops(loaded.get(name), match["out"])
        _, total_ms, total_gflops = totals.get(name, (kind, 0.0, None))
        totals[name] = (kind, total_ms + ms, None if gflops is None else (total_gflops or 0.0) + gflops)
        events.append({"name": name, "cat": kind, "ph": "X", "ts": clock, "dur": ms * 1e3, "pid": 0, "tid": 0})
        clock += ms * 1e3

    def precision(name: str) -> str:
        layer = loaded.get(name)
        return "int8" if layer is not None and layer.kind in CONVOLUTIONS and layer.param(8) else float_precision

    layers = [LayerTime(name, kind, round(ms / runs, 4), precision(name), "", None if gflops is None else gflops / runs)
              for name, (kind, ms, gflops) in totals.items()]
    return layers, events


class NcnnRunner(Runner):
    """Latency: one image at a time on every thread. Throughput (a batch, under ``auto``): the images at once, one per
    thread, each through its own extractor of a one-thread net, as NCNN's multi-instance use has it (no
    synchronisation between threads inside a layer). Measured at 0.99-1.32x latency's images/s on yolov5n at 320 on a
    2-core AVX2 host (bench/archive/edge_runtimes/ncnn_concurrency.py)."""

    takes_one_image = True
    _concurrent: tuple[Any, ThreadPoolExecutor] | None = None  # the one-thread net and its request threads

    def activate(self) -> None:
        import ncnn

        self.net = self._loaded(self.runtime_settings)
        self.input_name, self.output_name = self.net.input_names()[0], self.net.output_names()[0]
        self.fp16_arithmetic = self.file_precision == "fp16" and bool(ncnn.cpu_support_arm_asimdhp())

    def _loaded(self, settings: dict[str, Any]) -> Any:
        import ncnn

        net = ncnn.Net()
        for option, value in settings.items():
            setattr(net.opt, option, value)
        if net.load_param(str(self.entry)):  # NCNN says -1 and goes on: a net it could not load crashes the process
            raise RuntimeError(f"NCNN could not read the graph {self.entry.name} (malformed .param)")
        if net.load_model(str(self.weights)):
            raise RuntimeError(f"NCNN could not read the weights {self.weights.name} (missing, cut short, or not "
                               f"this graph's)")
        return net

    @property
    def weights(self) -> Path:
        """The .bin beside the .param (pnnx and Ultralytics name them alike)."""
        return self.entry.with_suffix(".bin")

    def execution(self, batch: int) -> Execution:
        if self._concurrently(batch):
            return Execution(THROUGHPUT, self.threads, 1, 1, self.threads, {**self.runtime_settings, "num_threads": 1})
        return super().execution(batch)

    def _concurrently(self, batch: int) -> bool:
        return batch > 1 and self.threads > 1 and wanted_mode(self.mode, batch) == THROUGHPUT

    def infer(self, images: np.ndarray) -> np.ndarray:
        if self._concurrently(len(images)):
            net, pool = self._concurrent_net()
            return np.stack(list(pool.map(lambda image: self._one(net, image), images)))
        return np.stack([self._one(self.net, image) for image in images])

    def _one(self, net: Any, image: np.ndarray) -> np.ndarray:
        with net.create_extractor() as extractor:
            extractor.input(self.input_name, ncnn_input(image))
            _, output = extractor.extract(self.output_name)
            return np.array(output)

    def _concurrent_net(self) -> tuple[Any, ThreadPoolExecutor]:
        if self._concurrent is None:
            self._concurrent = (self._loaded({**self.runtime_settings, "num_threads": 1}),
                                ThreadPoolExecutor(self.threads, thread_name_prefix="ncnn-request"))
        return self._concurrent

    def _close_concurrent(self) -> None:
        if self._concurrent is not None:
            net, pool = self._concurrent
            pool.shutdown()
            net.clear()
            self._concurrent = None

    def profile_layers(self, images: np.ndarray, runs: int, trace: Path) -> LayerProfile:
        """NCNN's own per-layer timer: an ncnn built with ``NCNN_BENCHMARK`` prints each layer's type, name, wall time
        (to 0.01 ms) and output shape to stderr as the layer runs; the PyPI wheel is built without it
        (bench/archive/edge_runtimes/README.md, "Where ncnn-int8's time goes", builds one). The images run one after the
        other on every thread, the latency configuration, so no two layers' lines interleave."""
        def one_by_one() -> None:
            for image in images:
                self._one(self.net, image)

        with tempfile.TemporaryDirectory(prefix="ncnn-benchmark-") as scratch:
            with native_output_to(Path(scratch) / "warm-up.log", (2,)):
                one_by_one()
            printed = Path(scratch) / "profiled.log"
            with native_output_to(printed, (2,)):
                passes = [timed_ms(one_by_one) for _ in range(runs)]
            layers, events = benchmark_layers(printed.read_text(), self.entry, self.compute_precision, runs)
        if not layers:
            raise NotImplementedError("this ncnn is built without NCNN_BENCHMARK, NCNN's per-layer timer (as the PyPI "
                                      "wheel is: bench/archive/edge_runtimes/README.md, \"Where ncnn-int8's time "
                                      "goes\", builds one), and its Python API offers no other")
        trace.write_text(json.dumps({"traceEvents": events, "otherData": {"source": TRACE_NOTE}}))
        return LayerProfile(layers, runs, TRACE_NOTE, passes)

    @property
    def runtime_settings(self) -> dict[str, Any]:
        half = self.file_precision == "fp16"
        return {"num_threads": self.threads, "use_fp16_storage": half, "use_fp16_packed": half,
                "use_fp16_arithmetic": half}

    def set_threads(self, threads: int) -> None:
        self.threads = self.net.opt.num_threads = threads
        self._close_concurrent()  # its request threads were as many as the old count

    @property
    def compute_precision(self) -> str:
        return "fp16" if self.fp16_arithmetic else "fp32"

    @property
    def executed_precision(self) -> str:
        """An INT8 model's label with its share of convolutions in int8: those whose .param line, as NCNN loaded it,
        carries int8 scales (``8=``); the others, the Detect head's, run in float."""
        label = super().executed_precision
        if self.file_precision != "int8":
            return label
        convolutions = [layer for layer in read_layers(self.entry) if layer.kind in CONVOLUTIONS]
        integer = sum(1 for layer in convolutions if layer.param(8))
        return label if integer == len(convolutions) else f"{label} ({integer} of {len(convolutions)} convolutions " \
            "in int8)"

    @property
    def precision_note(self) -> str:
        if self.file_precision == "fp16" and not self.fp16_arithmetic:
            return "fp16 storage: NCNN computes in fp32 on a CPU without fp16 arithmetic"
        return ""

    @property
    def weight_bytes(self) -> int:
        return self.weights.stat().st_size

    def deactivate(self) -> None:
        self._close_concurrent()
        self.net.clear()
