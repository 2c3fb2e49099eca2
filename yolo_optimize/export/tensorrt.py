"""TensorRT export: build a serialized engine from the ONNX export (evaluate/runners/tensorrt.py runs it).

Written against the TensorRT 10.x and 11.x Python APIs; TensorRT is imported lazily (yolo_optimize/tensorrt_api.py).

TensorRT 11 builds strongly typed networks only (``BuilderFlag.FP16`` is gone): there an fp16 engine needs an
ONNX graph that already computes in fp16, while TensorRT 10 turns fp16 on with the builder flag.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from types import ModuleType
from typing import Any

from yolo_optimize.errors import StageSkipped
from yolo_optimize.formats import FORMATS
from yolo_optimize.stage import REFERENCE, SOURCE, Stage, StageContext, StageOutput
from yolo_optimize.tensorrt_api import (
    INSTALL_HINT,
    fresh_logger,
    logged_errors,
    require_tensorrt,
    tensorrt_unavailable_reason,
)

PRECISIONS = ("fp32", "fp16")
METADATA_FILE = "metadata.json"  # engines cannot carry metadata; it sits beside the plain engine


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
    trt = require_tensorrt()
    logger = fresh_logger()
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
        raise RuntimeError(f"TensorRT engine build failed for {onnx_path}: {logged_errors()}")
    engine_path.parent.mkdir(parents=True, exist_ok=True)
    engine_path.write_bytes(serialized)
    return _engine_info(trt, config, network, profile, precision, workspace_gib, serialized.nbytes)


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
