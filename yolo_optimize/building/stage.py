"""The build-step interface: a typed config, the tools it depends on, one ``run``."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

from yolo_optimize.artifact import Manifest
from yolo_optimize.checkpoint import ModelSource

# The roles in which a stage receives its inputs; the planner decides which node fills each.
MODEL = "model"  # the load node: the model's facts (a stage that exports from PyTorch loads the model itself)
SOURCE = "source"  # the artifact this stage transforms (the ONNX file an OpenVINO export converts...)
REFERENCE = "reference"  # the PyTorch outputs a deployable artifact's parity is checked against
# A manifest's info key: the ops of its file inside the module the family keeps in float (Family.float_module), in
# the format's own terms, recorded by the export that can still tell (export/onnx.py, export/openvino.py)
FLOAT_PART = "float_part"


def recorded_float_part(parent: Manifest) -> list[str]:
    """The float part ``parent``'s export recorded (FLOAT_PART); its absence is a stage's bug, not the user's."""
    if FLOAT_PART not in parent.info:
        raise RuntimeError(f"{parent.node} records no {FLOAT_PART}: its stage must pass on its source's")
    return list(parent.info[FLOAT_PART])


@dataclass(frozen=True)
class StageContext:
    """What a running stage may use: its model source, its inputs' folders by role, where to write."""

    source: ModelSource
    out_dir: Path  # private staging folder, renamed into place on success
    inputs: dict[str, Path]  # role -> the verified folder of the node the planner wired to it
    device: str
    threads: int
    shared_dir: Path | None = None  # the model's folder for state stages share across builds (a timing cache)

    def manifest(self, role: str) -> Manifest:
        return Manifest.read(self.inputs[role])

    def entry(self, role: str) -> Path:
        manifest = self.manifest(role)
        assert manifest.entry, f"the {role} input ({manifest.node}) has no entry file"
        return self.inputs[role] / manifest.entry


@dataclass
class StageOutput:
    """What a stage reports back: the file to deploy, its embedded metadata, extra facts."""

    entry: str | None
    metadata: dict[str, Any]
    info: dict[str, Any] = field(default_factory=dict)


class Stage(ABC):
    """One node's work. Subclasses declare ``name``, ``tools`` and a frozen dataclass config."""

    name: ClassVar[str]
    inputs: ClassVar[tuple[str, ...]]  # the roles it reads (MODEL, SOURCE, REFERENCE); deployable ones need REFERENCE
    tools: ClassVar[tuple[str, ...]]  # distributions whose versions enter the cache key
    target: ClassVar[str | None] = None  # the format of the deployable artifact; None: intermediate
    # Enters the cache key: bump it when the stage's output changes for the same config and tool
    # versions, so artifacts cached by the older code are rebuilt instead of trusted.
    revision: ClassVar[int] = 1
    # One at a time per GPU, across every build on the machine: a builder that times kernels (TensorRT) measures
    # wrong when another one shares the GPU.
    exclusive_gpu: ClassVar[bool] = False

    def __init__(self, config: Any) -> None:
        self.config = config

    @property
    def precision(self) -> str | None:
        return getattr(self.config, "precision", None)

    @cached_property
    def params(self) -> dict[str, Any]:
        return json.loads(json.dumps(asdict(self.config), default=str))

    def environment(self) -> dict[str, str]:
        """Facts of this machine its output is valid for only (they enter the cache key): empty for portable
        files; a TensorRT engine's TensorRT version and GPU."""
        return {}

    def unavailable_reason(self, device: str) -> str | None:
        """Why this stage cannot run here (checked before scheduling, cheaply); None if it can."""
        return None

    @abstractmethod
    def run(self, ctx: StageContext) -> StageOutput:
        """Write the node's files into ``ctx.out_dir``."""


def without_cpu_device(params: dict[str, Any]) -> dict[str, Any]:
    """A config's parameters without its ``device`` where that is the CPU: a stage whose config learned the device
    when it learned to build on a GPU keeps the cache keys its CPU builds had."""
    return {k: v for k, v in params.items() if k != "device"} if params.get("device") == "cpu" else params
