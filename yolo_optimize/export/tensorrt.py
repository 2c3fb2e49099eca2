"""TensorRT export: build a serialized engine from the ONNX export and run it through torch CUDA buffers.

Written against the TensorRT 10.x and 11.x Python APIs. ``tensorrt`` and ``torch`` are imported lazily so
the module imports everywhere; callers ask ``tensorrt_unavailable_reason()`` before building or running.

TensorRT 11 builds strongly typed networks only (``BuilderFlag.FP16`` is gone): there an fp16 engine needs an
ONNX graph that already computes in fp16, while TensorRT 10 turns fp16 on with the builder flag.
"""

from __future__ import annotations

import functools
import json
import logging
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any

import numpy as np

from yolo_optimize.errors import StageSkipped
from yolo_optimize.formats import FORMATS
from yolo_optimize.stage import REFERENCE, SOURCE, Stage, StageContext, StageOutput

PRECISIONS = ("fp32", "fp16")
MIN_TENSORRT_MAJOR = 10
INSTALL_HINT = "pip install 'yolo-optimize[tensorrt]'"
METADATA_FILE = "metadata.json"  # engines cannot carry metadata; it sits beside the plain engine

_LOG = logging.getLogger(__name__)

Shape = tuple[int, ...]


def tensorrt_unavailable_reason() -> str | None:
    """None when TensorRT can build here; else one sentence why not, so callers can skip instead of crash."""
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed, so no CUDA device is visible for TensorRT."
    if not torch.cuda.is_available():
        return "No CUDA device is visible to torch; TensorRT needs an NVIDIA GPU."
    try:
        import tensorrt as trt
    except ModuleNotFoundError:
        return f"TensorRT is not installed: {INSTALL_HINT}."
    except (ImportError, OSError) as exc:
        return f"TensorRT is installed but its libraries failed to load ({exc})."
    if _major(trt.__version__) < MIN_TENSORRT_MAJOR:
        return f"TensorRT {trt.__version__} is too old; TensorRT >= {MIN_TENSORRT_MAJOR} is needed: {INSTALL_HINT}."
    return None


def build_engine(
    onnx_path: Path,
    engine_path: Path,
    *,
    precision: str,
    batch_sizes: tuple[int, ...],
    imgsz: int,
    workspace_gib: float = 4.0,
) -> dict[str, object]:
    """Build a plain serialized engine (no metadata prefix, so trtexec can load it) and return manifest info.

    One optimization profile covers batch 1..max(batch_sizes) with opt = max; 3 x imgsz x imgsz is fixed.
    """
    _check_request(precision, batch_sizes, imgsz, workspace_gib)
    trt = _require_tensorrt()
    logger = _fresh_logger()
    builder = trt.Builder(logger)
    network = builder.create_network(0)  # explicit batch is the only mode since 10; strongly typed by default in 11
    parser = trt.OnnxParser(network, logger)  # stays referenced until the build: the network uses its weights
    if not parser.parse_from_file(str(onnx_path)):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise RuntimeError(f"TensorRT could not parse {onnx_path}: {errors}")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(workspace_gib * (1 << 30)))
    profile = _add_batch_profile(builder, config, network, max(batch_sizes), imgsz)
    _apply_precision(trt, config, network, precision)
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise RuntimeError(f"TensorRT engine build failed for {onnx_path}: {_logged_errors()}")
    engine_path.parent.mkdir(parents=True, exist_ok=True)
    engine_path.write_bytes(serialized)
    return _engine_info(trt, config, network, profile, precision, workspace_gib, serialized.nbytes)


class TensorRTSession:
    """Runs a serialized engine on CUDA through torch buffers, so no pycuda is needed.

    ``infer`` takes float32 NCHW and returns float32 [batch, anchors, 85]; the input shape is set per call so any
    batch inside the engine's profile works. Use as a context manager: ``close`` frees context and engine.
    """

    def __init__(self, engine_path: Path, device: int = 0) -> None:
        """Deserialize on ``device`` and bind one input and one output by name (TensorRT 10+ tensor API)."""
        trt = _require_tensorrt()
        import torch

        self._torch = torch
        self._device = torch.device("cuda", device)
        with torch.cuda.device(self._device):
            self._runtime = trt.Runtime(_fresh_logger())
            self._engine = self._runtime.deserialize_cuda_engine(Path(engine_path).read_bytes())
            if self._engine is None:
                raise RuntimeError(f"TensorRT could not deserialize {engine_path}: {_logged_errors()}")
            self._context = self._engine.create_execution_context()
            self._stream = torch.cuda.Stream(self._device)  # a non-default stream avoids TensorRT's extra syncs
        self.input_name, self.output_name = _io_names(trt, self._engine)
        self._input_dtype = _torch_dtype(trt, torch, self._engine.get_tensor_dtype(self.input_name))
        self._output_dtype = _torch_dtype(trt, torch, self._engine.get_tensor_dtype(self.output_name))

    def infer(self, images: np.ndarray) -> np.ndarray:
        """Run one batch; raises ValueError when its shape lies outside the engine's optimization profile."""
        if self._context is None:
            raise RuntimeError("TensorRTSession is closed")
        torch = self._torch
        _fresh_logger()
        with torch.cuda.device(self._device), torch.cuda.stream(self._stream):
            batch = torch.from_numpy(np.ascontiguousarray(images, dtype=np.float32))
            batch = batch.to(self._device, self._input_dtype)
            if not self._context.set_input_shape(self.input_name, tuple(batch.shape)):
                raise ValueError(f"input shape {tuple(batch.shape)} is outside the engine profile {self._profile()}")
            out_shape = tuple(self._context.get_tensor_shape(self.output_name))
            output = torch.empty(out_shape, dtype=self._output_dtype, device=self._device)
            self._context.set_tensor_address(self.input_name, batch.data_ptr())
            self._context.set_tensor_address(self.output_name, output.data_ptr())
            if not self._context.execute_async_v3(stream_handle=self._stream.cuda_stream):
                raise RuntimeError(f"TensorRT execution failed: {_logged_errors()}")
            self._stream.synchronize()
            return output.float().cpu().numpy()

    def close(self) -> None:
        """Drop context, engine and runtime in that order; TensorRT 10+ frees them when unreferenced."""
        self._context = None
        self._engine = None
        self._runtime = None

    def __enter__(self) -> TensorRTSession:
        """The session itself, closed again by ``__exit__``."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Release TensorRT objects even when inference raised."""
        self.close()

    def _profile(self) -> list[Shape]:
        """Profile 0's min/opt/max input shapes, to explain a rejected batch."""
        return [tuple(dims) for dims in self._engine.get_tensor_profile_shape(self.input_name, 0)]


def _major(version: str) -> int:
    return int(version.split(".", 1)[0])


def _require_tensorrt() -> ModuleType:
    """Import tensorrt, turning every unavailability into a RuntimeError that carries the skip reason."""
    reason = tensorrt_unavailable_reason()
    if reason is not None:
        raise RuntimeError(reason)
    import tensorrt

    return tensorrt


@functools.cache
def _logger() -> Any:
    """One process-wide logger (TensorRT warns when builder and runtime get different ones) that keeps errors.

    Kept errors let a failed build or run say why; all messages go to Python logging.
    """
    import tensorrt as trt

    severity = trt.ILogger.Severity
    levels = {
        severity.INTERNAL_ERROR: logging.ERROR,
        severity.ERROR: logging.ERROR,
        severity.WARNING: logging.WARNING,
        severity.INFO: logging.DEBUG,
        severity.VERBOSE: logging.DEBUG,
    }

    class _RecordingLogger(trt.ILogger):
        def __init__(self) -> None:
            trt.ILogger.__init__(self)
            self.errors: list[str] = []

        def log(self, level: Any, msg: str) -> None:
            level_number = levels.get(level, logging.DEBUG)
            if level_number == logging.ERROR:
                self.errors.append(msg)
            _LOG.log(level_number, "TensorRT: %s", msg)

    return _RecordingLogger()


def _fresh_logger() -> Any:
    """The shared logger with its kept errors cleared, so the next failure reports only its own errors."""
    logger = _logger()
    logger.errors.clear()
    return logger


def _logged_errors() -> str:
    """Errors TensorRT logged since the last reset: its return values alone never say why."""
    return "; ".join(_logger().errors) or "TensorRT logged no error"


def _check_request(precision: str, batch_sizes: tuple[int, ...], imgsz: int, workspace_gib: float) -> None:
    """Reject bad arguments before the slow TensorRT work starts."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if not batch_sizes or min(batch_sizes) < 1:
        raise ValueError(f"batch_sizes must be positive integers, got {batch_sizes!r}")
    if imgsz < 1 or workspace_gib <= 0:
        raise ValueError(f"imgsz and workspace_gib must be positive, got {imgsz!r} and {workspace_gib!r}")


def _add_batch_profile(builder: Any, config: Any, network: Any, max_batch: int, imgsz: int) -> dict[str, object]:
    """Add the single profile: batch 1..max_batch, opt at max_batch, other axes fixed to 3 x imgsz x imgsz."""
    if network.num_inputs != 1 or network.num_outputs != 1:
        raise RuntimeError(f"expected one input and one output, got {network.num_inputs} and {network.num_outputs}")
    tensor = network.get_input(0)
    low, high = (1, 3, imgsz, imgsz), (max_batch, 3, imgsz, imgsz)
    shape = tuple(tensor.shape)
    if len(shape) != 4 or any(d != -1 and not lo == d == hi for d, lo, hi in zip(shape, low, high)):
        raise RuntimeError(f"ONNX input {tensor.name} {shape} cannot serve batch 1..{max_batch} at {imgsz}px")
    profile = builder.create_optimization_profile()
    profile.set_shape(tensor.name, min=low, opt=high, max=high)
    config.add_optimization_profile(profile)
    return {"input": tensor.name, "min": list(low), "opt": list(high), "max": list(high)}


def _apply_precision(trt: ModuleType, config: Any, network: Any, precision: str) -> None:
    """fp16 via BuilderFlag.FP16 on TensorRT 10; TensorRT 11 removed it, so the graph's own types must match."""
    wants_fp16 = precision == "fp16"
    if hasattr(trt.BuilderFlag, "FP16"):
        if wants_fp16:
            config.set_flag(trt.BuilderFlag.FP16)
        return
    if wants_fp16 != _graph_has_fp16(trt, network):
        fix = "convert the ONNX to fp16 first, e.g. with ModelOpt AutoCast" if wants_fp16 else "export it in fp32"
        raise RuntimeError(
            f"TensorRT {trt.__version__} builds strongly typed networks only, so the engine takes the ONNX graph's "
            f"own precision and cannot be {precision} here: {fix}"
        )


def _graph_has_fp16(trt: ModuleType, network: Any) -> bool:
    """Whether any layer of the parsed, strongly typed network produces fp16 tensors."""
    layers = (network.get_layer(i) for i in range(network.num_layers))
    return any(layer.get_output(j).dtype == trt.float16 for layer in layers for j in range(layer.num_outputs))


def _engine_info(
    trt: ModuleType,
    config: Any,
    network: Any,
    profile: dict[str, object],
    precision: str,
    workspace_gib: float,
    nbytes: int,
) -> dict[str, object]:
    """Manifest facts: version, profile, builder flags actually set (TF32 is on by default), tensor names."""
    import torch

    return {
        "tensorrt_version": trt.__version__,
        "gpu": torch.cuda.get_device_name(),
        "precision": precision,
        "strongly_typed": not hasattr(trt.BuilderFlag, "FP16"),
        "builder_flags": sorted(name for name, flag in trt.BuilderFlag.__members__.items() if config.get_flag(flag)),
        "profile": profile,
        "inputs": [network.get_input(i).name for i in range(network.num_inputs)],
        "outputs": [network.get_output(i).name for i in range(network.num_outputs)],
        "workspace_gib": workspace_gib,
        "engine_bytes": nbytes,
    }


def _io_names(trt: ModuleType, engine: Any) -> tuple[str, str]:
    """The engine's single input and single output, found by the name-based I/O API."""
    names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
    inputs = [name for name in names if engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT]
    outputs = [name for name in names if name not in inputs]
    if len(inputs) != 1 or len(outputs) != 1:
        raise RuntimeError(f"expected one input and one output tensor, got inputs {inputs} and outputs {outputs}")
    return inputs[0], outputs[0]


def _torch_dtype(trt: ModuleType, torch: ModuleType, dtype: Any) -> Any:
    """torch dtype for an engine I/O tensor; fp16 I/O appears when the ONNX graph itself was exported in fp16."""
    dtypes = {trt.float32: torch.float32, trt.float16: torch.float16}
    if dtype not in dtypes:
        raise RuntimeError(f"unsupported engine I/O dtype {dtype}")
    return dtypes[dtype]


@dataclass(frozen=True)
class TensorRTConfig:
    imgsz: int
    precision: str
    batch_sizes: tuple[int, ...]
    workspace_gib: float = 4.0


class TensorRTBuild(Stage):
    """Engine from the ONNX of the same precision (TensorRT 11 takes precision from the graph)."""

    name = "tensorrt"
    inputs = (SOURCE, REFERENCE)
    tools = ("tensorrt",)
    target = "tensorrt"

    def unavailable_reason(self, device: str) -> str | None:
        if device != "cuda":
            return f"TensorRT needs a CUDA device; this build runs on {device}"
        if find_spec("tensorrt") is None:
            return f"TensorRT is not installed: {INSTALL_HINT}"
        return None

    def run(self, ctx: StageContext) -> StageOutput:
        reason = tensorrt_unavailable_reason()
        if reason:
            raise StageSkipped(reason)
        entry = FORMATS[self.target].entry_for(ctx.source.model_id)
        info = build_engine(ctx.entry(SOURCE), ctx.out_dir / entry, precision=self.config.precision,
                            batch_sizes=self.config.batch_sizes, imgsz=self.config.imgsz,
                            workspace_gib=self.config.workspace_gib)
        metadata = {**ctx.manifest(SOURCE).metadata, "format": self.target,
                    "batch": {"min": 1, "max": max(self.config.batch_sizes)}}
        (ctx.out_dir / METADATA_FILE).write_text(json.dumps(metadata, indent=2))
        return StageOutput(entry=entry, metadata=metadata, info=info)
