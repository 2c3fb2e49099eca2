"""TensorRT export: build a serialized engine from the ONNX export (runtime/runners/tensorrt.py runs it).

Written against the TensorRT 10.x and 11.x Python APIs; TensorRT is imported lazily (runtime/tensorrt_api.py).

Every network is strongly typed, on 10 as on 11 (where it is the only mode and ``BuilderFlag.FP16`` is gone): an
engine computes in the types of its ONNX graph, so the fp16 engine is built from the fp16 ONNX, and FP32 means
FP32 (TF32, on by default, is cleared). One optimization profile per requested batch size, each with its own
optimum (NVIDIA: a profile tuned for its largest batch penalizes the small ones); the runner picks the profile
of each batch. A timing cache beside the artifacts, keyed like the engine, makes rebuilds fast.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from filelock import FileLock

from yolo_optimize.artifact import host_id
from yolo_optimize.building.stage import REFERENCE, SOURCE, Stage, StageContext, StageOutput
from yolo_optimize.errors import StageSkipped
from yolo_optimize.formats import format_named
from yolo_optimize.metadata import ArtifactMetadata, BatchRange
from yolo_optimize.runtime.tensorrt_api import (
    INSTALL_HINT,
    engine_environment,
    fresh_logger,
    gpu_build_unavailable,
    logged_errors,
    require_tensorrt,
    tensorrt_unavailable_reason,
)

if TYPE_CHECKING:
    from yolo_optimize.building.request import BuildRequest

PRECISIONS = ("fp32", "fp16", "int8")
METADATA_FILE = "metadata.json"  # engines cannot carry metadata; it sits beside the plain engine


def build_engine(
    onnx_path: Path,
    engine_path: Path,
    *,
    precision: str,
    batch_sizes: tuple[int, ...],
    imgsz: int,
    timing_cache: Path,
    workspace_gib: float = 4.0,
) -> dict[str, object]:
    """Build a plain serialized engine (no metadata prefix, so trtexec can load it) and return manifest info."""
    _check_request(precision, batch_sizes, imgsz, workspace_gib)
    trt = require_tensorrt()
    logger = fresh_logger()
    builder = trt.Builder(logger)
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))  # ignored on 11
    parser = trt.OnnxParser(network, logger)  # stays referenced until the build: the network uses its weights
    if not parser.parse_from_file(str(onnx_path)):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise RuntimeError(f"TensorRT could not parse {onnx_path}: {errors}")
    _check_precision(trt, network, precision)
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(workspace_gib * (1 << 30)))
    if hasattr(trt.BuilderFlag, "TF32"):
        config.clear_flag(trt.BuilderFlag.TF32)  # on by default: FP32 convolutions would round inputs to 10 bits
    profiles = _add_batch_profiles(builder, config, network, profile_plan(batch_sizes, imgsz))
    with FileLock(f"{timing_cache}.lock"):
        cache = config.create_timing_cache(timing_cache.read_bytes() if timing_cache.is_file() else b"")
        config.set_timing_cache(cache, ignore_mismatch=False)
        serialized = builder.build_serialized_network(network, config)
        if serialized is None:
            raise RuntimeError(f"TensorRT engine build failed for {onnx_path}: {logged_errors()}")
        timing_cache.parent.mkdir(parents=True, exist_ok=True)
        # a killed build never leaves a torn cache; on a store several machines share, whose FileLock none of the
        # others sees, each writes its own temporary file and the last complete one wins
        partial = timing_cache.with_name(f"{timing_cache.name}.{host_id()}-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        partial.write_bytes(bytes(config.get_timing_cache().serialize()))
        partial.replace(timing_cache)
    engine_path.parent.mkdir(parents=True, exist_ok=True)
    engine_path.write_bytes(serialized)
    return _engine_info(trt, config, network, profiles, precision, workspace_gib, serialized.nbytes)


def _check_request(precision: str, batch_sizes: tuple[int, ...], imgsz: int, workspace_gib: float) -> None:
    """Reject bad arguments before the slow TensorRT work starts."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if not batch_sizes or min(batch_sizes) < 1:
        raise ValueError(f"batch_sizes must be positive integers, got {batch_sizes!r}")
    if imgsz < 1 or workspace_gib <= 0:
        raise ValueError(f"imgsz and workspace_gib must be positive, got {imgsz!r} and {workspace_gib!r}")


@dataclass(frozen=True)
class ProfileShape:
    """One optimization profile: the batch range it serves and the batch it is tuned for."""

    min_batch: int
    opt_batch: int
    max_batch: int
    imgsz: int

    def shapes(self) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        low, tuned, high = ((batch, 3, self.imgsz, self.imgsz) for batch in (self.min_batch, self.opt_batch,
                                                                              self.max_batch))
        return low, tuned, high


def profile_plan(batch_sizes: tuple[int, ...], imgsz: int) -> list[ProfileShape]:
    """One profile per requested batch size, tuned for it, covering the sizes down to the previous one's + 1: every
    batch 1..max runs, each requested size on kernels chosen for it."""
    sizes = sorted(set(batch_sizes))
    return [ProfileShape(previous + 1, size, size, imgsz) for previous, size in zip([0, *sizes], sizes)]


def _add_batch_profiles(builder: Any, config: Any, network: Any, plan: list[ProfileShape]) -> list[dict[str, int]]:
    """Add the planned profiles to the single input (its other axes fixed to 3 x imgsz x imgsz)."""
    if network.num_inputs != 1 or network.num_outputs != 1:
        raise RuntimeError(f"expected one input and one output, got {network.num_inputs} and {network.num_outputs}")
    tensor = network.get_input(0)
    shape, planned_shapes = tuple(tensor.shape), [s for planned in plan for s in planned.shapes()]
    if len(shape) != 4 or any(d != -1 and any(s[axis] != d for s in planned_shapes) for axis, d in enumerate(shape)):
        raise RuntimeError(f"ONNX input {tensor.name} {shape} cannot serve batch 1..{plan[-1].max_batch} at "
                           f"{plan[-1].imgsz}px")
    for planned in plan:
        profile = builder.create_optimization_profile()
        low, best, high = planned.shapes()
        profile.set_shape(tensor.name, min=low, opt=best, max=high)
        config.add_optimization_profile(profile)
    return [asdict(planned) for planned in plan]


def _check_precision(trt: ModuleType, network: Any, precision: str) -> None:
    """A strongly typed engine computes in its graph's types: the fp16 engine needs the fp16 ONNX, the int8 one a
    Q/DQ graph (explicit quantization), fp32 an fp32 graph."""
    found = graph_precision(trt, network)
    if found != precision:
        raise RuntimeError(f"the ONNX graph computes in {found}, not {precision}: TensorRT builds strongly typed "
                           "networks, so build the engine from the ONNX of the same precision")


def graph_precision(trt: ModuleType, network: Any) -> str:
    """int8 where the parsed network quantizes (Q/DQ layers), fp16 where a layer produces fp16 tensors, else fp32."""
    layers = [network.get_layer(i) for i in range(network.num_layers)]
    if any(layer.type == trt.LayerType.QUANTIZE for layer in layers):
        return "int8"
    fp16 = any(layer.get_output(j).dtype == trt.float16 for layer in layers for j in range(layer.num_outputs))
    return "fp16" if fp16 else "fp32"


def _engine_info(
    trt: ModuleType,
    config: Any,
    network: Any,
    profiles: list[dict[str, int]],
    precision: str,
    workspace_gib: float,
    nbytes: int,
) -> dict[str, object]:
    """Manifest facts: TensorRT and GPU, the profiles, the builder flags read back (TF32 must be off), tensor names."""
    return {
        "environment": engine_environment(),
        "precision": precision,
        "strongly_typed": network.get_flag(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
        if hasattr(network, "get_flag") else True,
        "builder_flags": sorted(name for name, flag in trt.BuilderFlag.__members__.items() if config.get_flag(flag)),
        "profiles": profiles,
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
    exclusive_gpu = True
    revision = 2  # strongly typed on 10 too, TF32 off, one profile per batch size, timing cache

    @classmethod
    def planned(cls, request: BuildRequest, precision: str) -> TensorRTBuild:
        return cls(TensorRTConfig(request.imgsz, precision, request.batch_sizes))

    def environment(self) -> dict[str, str]:
        """An engine is valid only for the TensorRT version and GPU that built it: they enter its key."""
        return engine_environment()

    def unavailable_reason(self, device: str) -> str | None:
        return gpu_build_unavailable("TensorRT", "tensorrt", INSTALL_HINT, device)

    def run(self, ctx: StageContext) -> StageOutput:
        reason = tensorrt_unavailable_reason()
        if reason:
            raise StageSkipped(reason)
        entry = format_named(self.target).entry_for(ctx.source.model_id)
        assert ctx.shared_dir is not None, "the DAG gives every stage the model's shared folder"
        info = build_engine(ctx.entry(SOURCE), ctx.out_dir / entry, precision=self.config.precision,
                            batch_sizes=self.config.batch_sizes, imgsz=self.config.imgsz,
                            timing_cache=timing_cache_path(ctx.shared_dir, self.environment()),
                            workspace_gib=self.config.workspace_gib)
        metadata = replace(ArtifactMetadata.of(ctx.manifest(SOURCE)), format=self.target,
                           batch=BatchRange(min=1, max=max(self.config.batch_sizes))).to_dict()
        (ctx.out_dir / METADATA_FILE).write_text(json.dumps(metadata, indent=2))
        return StageOutput(entry=entry, metadata=metadata, info=info)


def timing_cache_path(shared_dir: Path, environment: dict[str, str]) -> Path:
    """The timing cache of this TensorRT version and GPU (kernel timings are valid for nothing else)."""
    digest = hashlib.sha256(json.dumps(environment, sort_keys=True).encode()).hexdigest()[:16]
    return shared_dir / "tensorrt-timing" / f"{digest}.cache"
