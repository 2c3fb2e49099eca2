"""Runner lookup through the format table."""

from __future__ import annotations

from pathlib import Path

from yolo_optimize.artifact import Manifest
from yolo_optimize.formats import format_named, imported
from yolo_optimize.runtime.runners.base import LATENCY, Runner


def runner_class(target: str) -> type[Runner]:
    """The runner class the format table names for ``target``, imported on first use."""
    found: type[Runner] = imported(format_named(target).runner)
    return found


def open_runner(folder: Path, manifest: Manifest, *, device: str = "cpu", threads: int = 1,
                mode: str = LATENCY, variant: str = "", request_batch: int = 1) -> Runner:
    """The runner for ``manifest.target`` (not yet activated; use it as a context manager), set to run as
    ``variant`` (``Runner.variants``; "": its default), ``request_batch`` images per throughput request (read by
    the runtimes with a throughput configuration)."""
    assert manifest.target, f"{manifest.node} is not a deployable artifact"
    runner = runner_class(manifest.target)(folder, manifest, device=device, threads=threads, mode=mode)
    runner.throughput_request_batch = request_batch
    if variant:
        runner.use_variant(variant)
    return runner
