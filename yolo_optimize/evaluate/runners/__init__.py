"""Runner lookup through the format table."""

from __future__ import annotations

from importlib import import_module
from pathlib import Path

from yolo_optimize.artifact import Manifest
from yolo_optimize.evaluate.runners.base import Runner
from yolo_optimize.formats import FORMATS


def open_runner(folder: Path, manifest: Manifest, *, device: str = "cpu", threads: int = 1) -> Runner:
    """The runner for ``manifest.target`` (not yet activated; use it as a context manager)."""
    assert manifest.target, f"{manifest.node} is not a deployable artifact"
    module, _, name = FORMATS[manifest.target].runner.partition(":")
    runner_class: type[Runner] = getattr(import_module(module), name)
    return runner_class(folder, manifest, device=device, threads=threads)
