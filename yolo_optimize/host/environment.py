"""Process-wide settings applied before any third-party import, in the processes that need them only.

yolov5, ultralytics, ONNX Runtime and OpenVINO/NNCF reach the network, install
packages or write into ``$HOME`` unless told not to. The ``optimize`` command and every
process this package starts (build and measurement workers: ``processes.configured_child`` as the
initializer) apply them first thing; the Python API applies them only while a call runs
(``configured``), so importing or calling it leaves the caller's process as it was.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path


def scratch_dir() -> Path:
    """Per-user directory outside ``$HOME`` for the config/font caches of third-party tools."""
    return Path(tempfile.gettempdir()) / f"yolo-optimize-{os.getuid()}"


def user_cache_dir() -> Path:
    """Where this package keeps what it fetched or measured once (weights, machine peaks): ``$XDG_CACHE_HOME``."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "yolo-optimize"


CPP_EXTENSION_LOGGER = "torch.utils.cpp_extension"  # warns "No CUDA runtime is found" on every import without CUDA


def configure() -> None:
    """Keep yolov5/ultralytics offline and out of ``$HOME``; turn telemetry off."""
    scratch = scratch_dir()
    defaults = {
        "YOLO_OFFLINE": "1",
        "YOLO_AUTOINSTALL": "false",
        "YOLOv5_AUTOINSTALL": "false",
        "YOLOv5_VERBOSE": "false",
        "YOLO_VERBOSE": "false",
        "YOLOV5_CONFIG_DIR": str(scratch / "yolov5"),
        "YOLO_CONFIG_DIR": str(scratch / "ultralytics"),
        "MPLCONFIGDIR": str(scratch / "matplotlib"),
        "ORT_DISABLE_TELEMETRY": "1",
        "NNCF_CI": "1",
    }
    for key, value in defaults.items():
        os.environ.setdefault(key, value)
    for key in ("YOLOV5_CONFIG_DIR", "YOLO_CONFIG_DIR", "MPLCONFIGDIR"):
        Path(os.environ[key]).mkdir(parents=True, exist_ok=True)
    # OpenVINO and NNCF fall back to their built-in telemetry stubs when this
    # module cannot be imported; it has no off switch that avoids writing to $HOME.
    sys.modules.setdefault("openvino_telemetry", None)  # type: ignore[arg-type]  # None: import refused
    warnings.filterwarnings("ignore", message="pkg_resources is deprecated")
    # Said once per measuring process otherwise: the TorchScript row is measured as the README says it is deprecated,
    # and a CPU machine has no CUDA runtime to find.
    warnings.filterwarnings("ignore", message="`torch.jit.load` is deprecated")
    logging.getLogger(CPP_EXTENSION_LOGGER).setLevel(logging.ERROR)


@contextlib.contextmanager
def configured() -> Iterator[None]:
    """``configure`` for the length of a call: the environment, the telemetry stub and the warning filters as they
    were afterwards (the processes started inside inherit the settings)."""
    environment, stub = dict(os.environ), "openvino_telemetry" in sys.modules
    level = logging.getLogger(CPP_EXTENSION_LOGGER).level
    with warnings.catch_warnings():
        configure()
        try:
            yield
        finally:
            os.environ.clear()
            os.environ.update(environment)
            logging.getLogger(CPP_EXTENSION_LOGGER).setLevel(level)
            if not stub:
                sys.modules.pop("openvino_telemetry", None)
