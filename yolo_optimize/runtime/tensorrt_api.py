"""Importing TensorRT and hearing from it, shared by the engine build (export/) and the runner (runtime/runners/).

``tensorrt`` and ``torch`` are imported lazily so every module imports everywhere; callers ask
``tensorrt_unavailable_reason()`` before building or running.
"""

from __future__ import annotations

import functools
import logging
from importlib.util import find_spec
from types import ModuleType
from typing import Any

MIN_TENSORRT_MAJOR = 10
INSTALL_HINT = "pip install 'yolo-optimize[tensorrt]'"
TORCH_TENSORRT_HINT = "pip install 'yolo-optimize[torch-tensorrt]'"

_LOG = logging.getLogger(__name__)


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


def gpu_build_unavailable(tool: str, module: str, hint: str, device: str) -> str | None:
    """Why a stage that builds with ``tool`` (imported as ``module``) cannot run on ``device``, checked before the
    build starts without importing it; None when it may try (the run checks the rest)."""
    if device != "cuda":
        return f"{tool} needs a CUDA device; this build runs on {device}"
    if find_spec(module) is None:
        return f"{tool} is not installed: {hint}"
    return None


def _major(version: str) -> int:
    return int(version.split(".", 1)[0])


def require_tensorrt() -> ModuleType:
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


def fresh_logger() -> Any:
    """The shared logger with its kept errors cleared, so the next failure reports only its own errors."""
    logger = _logger()
    logger.errors.clear()
    return logger


def logged_errors() -> str:
    """Errors TensorRT logged since the last reset: its return values alone never say why."""
    return "; ".join(_logger().errors) or "TensorRT logged no error"


def engine_facts(tensorrt_version: str | None, gpu_name: str | None, capability: tuple[int, int] | None
                 ) -> dict[str, str]:
    """What a serialized engine is valid for (NVIDIA: the TensorRT version and GPU architecture that built it):
    the TensorRT version, the GPU's name and its compute capability; "absent" where there is none."""
    return {"tensorrt": tensorrt_version or "absent", "gpu": gpu_name or "absent",
            "compute_capability": ".".join(map(str, capability)) if capability else "absent"}


def engine_environment() -> dict[str, str]:
    """This machine's engine facts: TensorRT's own ``__version__`` (whichever wheel installed it: ``tensorrt``,
    ``tensorrt-cu12``...) and CUDA device 0."""
    version = None
    if tensorrt_unavailable_reason() is None:
        import tensorrt

        version = tensorrt.__version__
    try:
        import torch
    except ImportError:
        return engine_facts(version, None, None)
    if not torch.cuda.is_available():
        return engine_facts(version, None, None)
    return engine_facts(version, torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0))


def engine_refused_here(info: dict[str, Any]) -> str | None:
    """Why an artifact whose manifest ``info`` records the TensorRT and GPU it was built for cannot run on this
    machine (a TensorRT engine, a torch-tensorrt program); None when it can."""
    return engine_mismatch(info.get("environment", {}), engine_environment())


def engine_mismatch(built: dict[str, str], here: dict[str, str]) -> str | None:
    """Why an engine built with ``built`` facts cannot run ``here``, in one sentence; None when it can."""
    differences = [f"{key} {built.get(key, 'unrecorded')} (here {here[key]})" for key in here
                   if built.get(key) != here[key]]
    if not differences:
        return None
    return ("the engine was built for another TensorRT or GPU: " + ", ".join(differences)
            + "; rebuild it here with 'optimize build --targets trt'")


def profile_for(plan: list[dict[str, int]], batch: int) -> int:
    """The index of the profile that serves ``batch`` (the manifest's plan); ValueError outside every profile."""
    for index, profile in enumerate(plan):
        if profile["min_batch"] <= batch <= profile["max_batch"]:
            return index
    raise ValueError(f"batch {batch} is outside the engine's profiles (1..{plan[-1]['max_batch']})")


def torch_tensorrt_unavailable_reason() -> str | None:
    """None when torch-tensorrt can compile and run here; else one sentence why not."""
    reason = tensorrt_unavailable_reason()
    if reason:
        return reason
    if find_spec("torch_tensorrt") is None:
        return f"torch-tensorrt is not installed: {TORCH_TENSORRT_HINT}"
    return None
