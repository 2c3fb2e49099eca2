"""ONNX Runtime: the CPU execution provider; with ``--device cuda``, its TensorRT and CUDA providers.

For an INT8 file, what ONNX Runtime executes is read back from the graph it optimized: it
computes a convolution in int8 only where it could fuse ``DequantizeLinear -> Conv ->
QuantizeLinear`` into an integer kernel; elsewhere it dequantizes and convolves in float.

On CUDA the row runs on the TensorRT provider when this onnxruntime has it, else on the CUDA provider
(the row says which), never silently on the CPU: an onnxruntime without either (the CPU build) skips the
row. FP32 stays FP32 (TF32 off: the CUDA provider's ``use_tf32``, and ``NVIDIA_TF32_OVERRIDE=0`` for the
TensorRT provider's engine builds, whose TF32 flag ONNX Runtime does not expose). The input is copied by
PyTorch and bound to the session (I/O binding) on the runner's stream, so CUDA events split each call into
copy in, compute and copy out.

A runtime configuration of ``onnx`` (a format row with ``runs="onnx"``: one execution provider, its own matrix
row over the same files) is this runner with ``execution_providers`` pinned in a subclass: the session gets
exactly those providers, on either device, and the row is skipped where this onnxruntime lacks one.

On the CPU, the latency configuration runs a call as one request on a session with every thread;
the throughput configuration runs it as concurrent requests of one image each, one per thread, on a
session with one thread (ONNX Runtime's ``run`` releases the GIL and a session takes concurrent runs),
each writing its output straight into its slice of the call's output array (I/O binding).

On the CPU, how the session's idle threads wait between parallel sections is chosen on the host by measurement
(``IDLE_THREADS``, ``variants``): the deployed path reads and prepares the next images on a thread of its own while
the session infers on every usable CPU, and ONNX Runtime's default, threads that spin, kept that thread off the
cores. On the 2-core AVX2 VM, yolov5n's onnx-int8 at batch 1 ran end to end 1.10x and 1.15x as fast with them
sleeping, inference alone 0.97x and 1.07x; spinning only while a run lasts (``session.force_spinning_stop``) was
level with sleeping in inference and lost end to end. On the Zen 4 VM spinning only while a run lasts beat sleeping
by 1.07-1.09x in inference and 1.07-1.08x end to end (bench/archive/int8_peers/README.md). So the two are timed
against each other at the smallest batch size in a process of the row's own, sleeping kept on a tie: on both VMs the
inference-only winner also won end to end. Spinning all the time is not offered: it lost end to end on both.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from yolo_optimize.runtime.layers import LayerProfile, timed_ms
from yolo_optimize.runtime.runners.base import LATENCY, THROUGHPUT, Execution, Runner, wanted_mode
from yolo_optimize.runtime.runners.cuda_phases import CudaPhases
from yolo_optimize.runtime.runners.onnxruntime_profile import node_times

X86 = ("x86_64", "AMD64", "i686")
GPU_PROVIDERS = ("TensorrtExecutionProvider", "CUDAExecutionProvider")  # preferred first
PROVIDER_LABELS = {"TensorrtExecutionProvider": "TensorRT EP", "CUDAExecutionProvider": "CUDA EP"}
NUMPY_TYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(uint8)": np.uint8}
# How a CPU session's idle intra-op threads wait, as its config entries (module docstring); the first is kept on a tie
IDLE_THREADS = {"sleeping": {"session.intra_op.allow_spinning": "0"},
                "spinning within runs": {"session.intra_op.allow_spinning": "1", "session.force_spinning_stop": "1"}}
SLEEPING = next(iter(IDLE_THREADS))

# a 1x1 convolution as MatMulIntegerToFloat (optimize/integer_head.py)
INTEGER_CONVOLUTION_SUFFIX = "_as_integer_matmul"


class OnnxRuntimeRunner(Runner):
    session: Any = None
    _stream: Any = None  # the CUDA stream the GPU providers compute on (None on CPU)
    _concurrent: Any = None  # the throughput configuration's one-thread session and its request threads
    has_throughput_mode = True
    execution_providers: tuple[str, ...] = ()  # pinned by a runtime configuration's subclass; (): by the device
    idle_threads = SLEEPING  # on the CPU: an IDLE_THREADS key, chosen by measurement (``variants``)

    @classmethod
    def unavailable_reason(cls, device: str) -> str | None:
        """Pinned providers must all be present; on CUDA a GPU provider is required: without one ONNX Runtime would
        quietly run on the CPU."""
        import onnxruntime as ort

        missing = [p for p in cls.execution_providers if p not in ort.get_available_providers()]
        if missing:
            return f"this onnxruntime {ort.__version__} has no {', '.join(missing)}"
        if device != "cuda" or cls.execution_providers:
            return None
        if not set(GPU_PROVIDERS) & set(ort.get_available_providers()):
            return (f"this onnxruntime {ort.__version__} has no CUDA or TensorRT execution provider (the CPU "
                    "build): install onnxruntime-gpu instead of onnxruntime to measure ONNX files on the GPU")
        return None

    def activate(self) -> None:
        import onnxruntime as ort

        if self.device == "cuda":
            self._prepare_cuda()
        options = self._options(ort)
        with tempfile.TemporaryDirectory(prefix="yolo-optimize-ort-") as work:
            if self.file_precision == "int8" and self.device == "cpu":  # GPU providers' compiled nodes cannot be saved
                options.optimized_model_filepath = str(Path(work) / "optimized.onnx")
                options.log_severity_level = 3  # its warning that the copy is hardware-specific: it is only read here
            self.session = ort.InferenceSession(str(self.entry), options, providers=self._providers(ort))
            self.convolutions = _convolution_kernels(options.optimized_model_filepath)
        self._io = self.session.get_inputs()[0], self.session.get_outputs()[0]
        self.input_name = self._io[0].name
        self._outputs: dict[int, np.ndarray] = {}

    def _options(self, ort: Any, threads: int | None = None) -> Any:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or self.threads
        options.inter_op_num_threads = 1
        for key, value in self._config_entries().items():
            options.add_session_config_entry(key, value)
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        return options

    def execution(self, batch: int) -> Execution:
        if self.device != "cuda" and wanted_mode(self.mode, batch) == THROUGHPUT:
            return Execution(THROUGHPUT, self.threads, 1, self.throughput_request_batch, self.threads,
                             {"intra_op_num_threads": 1, "inter_op_num_threads": 1})
        note = "" if wanted_mode(self.mode, batch) == LATENCY else "on CUDA: one request per call"
        return Execution(LATENCY, 1, self.threads, batch, 1,
                         {"intra_op_num_threads": self.threads, "inter_op_num_threads": 1, **self._config_entries()},
                         note)

    def _config_entries(self) -> dict[str, str]:
        """The session config entries this device's sessions get (and the latency configuration records)."""
        return IDLE_THREADS[self.idle_threads] if self.device == "cpu" else {}

    def variants(self, batch: int) -> tuple[str, ...]:
        """How idle threads wait (``IDLE_THREADS``), on the CPU in the latency configuration: the throughput one's
        sessions have one thread each, with none to wait."""
        latency = self.device == "cpu" and wanted_mode(self.mode, batch) == LATENCY
        return tuple(IDLE_THREADS) if latency and self.threads > 1 else ()

    def use_variant(self, variant: str) -> None:
        """A loaded session is made again (config entries are read when a session is made), the old one dropped
        first. Remaking still raises the process's peak memory, so the evaluator switches only in a process it
        discards (``evaluator._choose_variants``)."""
        if variant not in IDLE_THREADS:
            raise ValueError(f"{variant!r} is not one of {', '.join(IDLE_THREADS)}")
        if variant == self.idle_threads:
            return
        self.idle_threads = variant
        if self.session is not None and self.device == "cpu":
            import onnxruntime as ort

            self.session = None
            self.session = ort.InferenceSession(str(self.entry), self._options(ort), providers=self._providers(ort))

    def profile_layers(self, images: np.ndarray, runs: int, trace: Path) -> LayerProfile:
        """ONNX Runtime's own profiler: its JSON is a Chrome trace; node times over the last ``runs`` model runs."""
        import onnxruntime as ort

        options = self._options(ort)
        with tempfile.TemporaryDirectory(prefix="yolo-optimize-ort-profile-") as work:
            options.enable_profiling = True
            options.profile_file_prefix = str(Path(work) / "ort")
            session = ort.InferenceSession(str(self.entry), options, providers=self._providers(ort))
            for _ in range(2):
                session.run(None, {self.input_name: images})
            passes = [timed_ms(lambda: session.run(None, {self.input_name: images})) for _ in range(runs)]
            shutil.copy(session.end_profiling(), trace)
        return LayerProfile(node_times(json.loads(trace.read_text()), runs, self.compute_precision), runs,
                            "ONNX Runtime's own profile: every node of every run, warm-up runs included", passes)

    def _prepare_cuda(self) -> None:
        import torch

        reason = self.unavailable_reason(self.device)
        if reason:
            raise RuntimeError(reason)
        os.environ["NVIDIA_TF32_OVERRIDE"] = "0"  # read by TensorRT's builder and cuDNN/cuBLAS in this process
        self._torch, self._stream = torch, torch.cuda.Stream(torch.device("cuda", 0))
        self.phases = CudaPhases(self._stream)

    def _providers(self, ort: Any) -> list[Any]:
        if self.execution_providers:
            return list(self.execution_providers)
        if self.device != "cuda":
            return ["CPUExecutionProvider"]
        from yolo_optimize.host.environment import user_cache_dir

        return gpu_providers(ort.get_available_providers(), self._stream.cuda_stream,
                             user_cache_dir() / "onnxruntime-tensorrt", int8=self.file_precision == "int8")

    @property
    def compute_precision(self) -> str:
        """x86 CPU kernels have no FP16 convolutions: ORT inserts casts and computes FP16 graphs in FP32."""
        if self.file_precision == "int8" or (self.file_precision == "fp16" and self._on_x86_cpu):
            return "fp32"
        return self.file_precision

    @property
    def executed_precision(self) -> str:
        if self.file_precision != "int8":
            return super().executed_precision
        if self.device == "cuda":
            return f"int8 file ({self.precision_note}: its kernels' precision is not read back)"
        integer, total = self.convolutions
        if integer == 0:
            return "fp32 (int8 file, convolutions dequantized to float)"
        return "int8+fp32" if integer == total else f"int8+fp32 ({integer} of {total} convolutions in int8)"

    @property
    def precision_note(self) -> str:
        if self.device == "cuda":
            return PROVIDER_LABELS.get(self.session.get_providers()[0], self.session.get_providers()[0])
        return "fp16 cast up" if self.file_precision == "fp16" and self.compute_precision == "fp32" else ""

    @property
    def _on_x86_cpu(self) -> bool:
        return self.session.get_providers()[0] == "CPUExecutionProvider" and platform.machine() in X86

    def infer(self, images: np.ndarray) -> np.ndarray:
        if self._stream is not None:
            return self._infer_cuda(images)
        if wanted_mode(self.mode, len(images)) == THROUGHPUT:
            return self._infer_concurrently(images)
        return self.session.run(None, {self.input_name: images})[0]

    def _infer_concurrently(self, images: np.ndarray) -> np.ndarray:
        """Requests of ``throughput_request_batch`` images run at once, one per thread, on the one-thread session,
        each bound to its slice of one output array (valid until the next call at this batch size)."""
        session, pool = self._concurrent_session()
        size = self.throughput_request_batch
        inputs, outputs = self._io
        starts = range(0, len(images), size)
        if not all(isinstance(dim, int) for dim in outputs.shape[1:]):  # no slice to bind: gather ONNX Runtime's own
            return np.concatenate(list(pool.map(
                lambda start: session.run(None, {inputs.name: images[start:start + size]})[0], starts)))
        output = self._output(len(images))

        def request(start: int) -> None:
            end = start + size
            binding = session.io_binding()
            binding.bind_cpu_input(inputs.name, np.ascontiguousarray(images[start:end]))
            part = output[start:end]
            binding.bind_output(outputs.name, "cpu", 0, part.dtype, part.shape, part.ctypes.data)
            session.run_with_iobinding(binding)

        list(pool.map(request, starts))
        return output

    def _concurrent_session(self) -> tuple[Any, ThreadPoolExecutor]:
        if self._concurrent is None:
            import onnxruntime as ort

            session = ort.InferenceSession(str(self.entry), self._options(ort, threads=1),
                                           providers=["CPUExecutionProvider"])
            self._concurrent = session, ThreadPoolExecutor(self.threads, thread_name_prefix="ort-request")
        return self._concurrent

    def _output(self, batch: int) -> np.ndarray:
        if batch not in self._outputs:
            outputs = self._io[1]
            self._outputs[batch] = np.empty([batch, *outputs.shape[1:]], NUMPY_TYPES[outputs.type])
        return self._outputs[batch]

    def _infer_cuda(self, images: np.ndarray) -> np.ndarray:
        """Copy in with PyTorch, bind input and output buffers on the GPU, run, copy out: all on one stream."""
        torch, phases = self._torch, self.phases
        assert phases is not None
        inputs, outputs = self._io
        if not all(isinstance(dim, int) for dim in outputs.shape[1:]):  # no buffer to bind: ONNX Runtime copies
            return self.session.run(None, {self.input_name: images})[0]
        with torch.cuda.stream(self._stream):
            phases.start()
            batch = torch.from_numpy(images).to("cuda", _torch_type(torch, inputs.type))
            phases.mark()
            shape = [len(images), *outputs.shape[1:]]
            output = torch.empty(shape, dtype=_torch_type(torch, outputs.type), device="cuda")
            binding = self.session.io_binding()
            binding.bind_input(inputs.name, "cuda", 0, NUMPY_TYPES[inputs.type], tuple(batch.shape), batch.data_ptr())
            binding.bind_output(outputs.name, "cuda", 0, NUMPY_TYPES[outputs.type], tuple(shape), output.data_ptr())
            self.session.run_with_iobinding(binding)
            phases.mark()
            found = output.float().cpu().numpy()
            phases.finish()
        return found

    @property
    def weight_bytes(self) -> int:
        """The ONNX file's initializers (where ONNX keeps weights), at their stored types."""
        import onnx
        from onnx import numpy_helper

        graph = onnx.load(str(self.entry)).graph
        return sum(numpy_helper.to_array(tensor).nbytes for tensor in graph.initializer)

    def deactivate(self) -> None:
        if self._concurrent is not None:
            self._concurrent[1].shutdown()
        self.session, self._concurrent, self._outputs = None, None, {}


def _torch_type(torch: Any, onnx_type: str) -> Any:
    """The torch dtype of an ONNX tensor type (``tensor(float16)`` -> ``torch.float16``)."""
    return getattr(torch, np.dtype(NUMPY_TYPES[onnx_type]).name)


def gpu_providers(available: list[str], stream: int, cache: Path, *, int8: bool) -> list[Any]:
    """ONNX Runtime's provider list for a CUDA row: TensorRT's provider first when present (its engines and
    timing cache kept in ``cache``; INT8 on for a Q/DQ file, FP16 never switched on: a file computes in its own
    types), the CUDA provider (TF32 off), both on ``stream``; the CPU provider last for what neither takes."""
    found: list[Any] = []
    if "TensorrtExecutionProvider" in available:
        found.append(("TensorrtExecutionProvider", {
            "device_id": "0", "has_user_compute_stream": "1", "user_compute_stream": str(stream),
            "trt_engine_cache_enable": "True", "trt_engine_cache_path": str(cache),
            "trt_timing_cache_enable": "True", "trt_timing_cache_path": str(cache),
            "trt_fp16_enable": "False", "trt_int8_enable": str(int8)}))
    if "CUDAExecutionProvider" in available:
        found.append(("CUDAExecutionProvider", {
            "device_id": "0", "has_user_compute_stream": "1", "user_compute_stream": str(stream), "use_tf32": "0"}))
    return [*found, "CPUExecutionProvider"]


def _convolution_kernels(optimized: str) -> tuple[int, int]:
    """(integer, all) convolution kernels in the graph ONNX Runtime wrote after optimizing; (0, 0) if none."""
    if not optimized:
        return 0, 0
    import onnx

    integer = ("QLinearConv", "ConvInteger")
    nodes = [node for node in onnx.load(optimized, load_external_data=False).graph.node
             if "Conv" in node.op_type or node.name.endswith(INTEGER_CONVOLUTION_SUFFIX)]
    return sum(node.op_type in integer or node.name.endswith(INTEGER_CONVOLUTION_SUFFIX) for node in nodes), len(nodes)
