"""Evaluation options: one typed record shared by ``optimize eval``, ``yo.evaluate`` and TOML config files, each value
checked in one place (the parsers, config files and precedence: yolo_optimize/options.py), as ``BuildOptions`` is
for the build. The session turns it into the settings every measuring process runs with (``session.EvalRequest``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from yolo_optimize.cluster.nodes import parse_selectors
from yolo_optimize.errors import UserError
from yolo_optimize.formats import parse_batch_sizes
from yolo_optimize.host.devices import DEVICES
from yolo_optimize.options import (
    EXECUTORS,
    LOCAL,
    checked_values,
    choice,
    comma,
    flag,
    integer,
    layered,
    number,
    optional,
    path,
    text,
)
from yolo_optimize.runtime.runners.base import AUTO, MODES

ROW_TIMEOUT_S = 600.0  # a row's measuring process silent this long (a hung runtime) is stopped; the others go on


@dataclass(frozen=True)
class EvalOptions:
    """Everything ``optimize eval`` takes (``optimize eval --help`` says what each means)."""

    root: Path | None = None  # a folder of built artifacts, or a model file measured like an --add one
    data: Path | None = None
    out: Path | None = None  # where the report's files go; None: not written (the command's default: reports/)
    batch_sizes: tuple[int, ...] = (1, 8)
    device: str = "auto"
    threads: int | None = None  # None: the CPUs this process may use
    min_time: float = 1.0
    repeats: int = 3
    max_images: int | None = None
    accuracy: bool = True
    imgsz: int | None = None
    mode: str = AUTO
    end_to_end: bool = True
    profile: bool = False
    add: tuple[str, ...] = ()  # [FAMILY=]PATH of model files this tool did not build
    family: str | None = None
    checkpoint: Path | None = None
    row_timeout: float = ROW_TIMEOUT_S
    executor: str = LOCAL
    ray_address: str = "auto"
    on: tuple[str, ...] = ()  # label=value selectors of the measuring hosts (Ray)

    @property
    def out_folder(self) -> Path:
        """``out``, where the caller writes the report (the command and every evaluation on hosts do)."""
        if self.out is None:
            raise UserError("this evaluation writes its report: give it an output folder (--out)")
        return self.out

    def updated(self, values: Mapping[str, Any], origin: str) -> EvalOptions:
        """These options with ``values`` (keys as in Python or on the command line; ``directory``, the command's
        argument, for ``root``) checked and applied."""
        named = {("root" if key == "directory" else key): value for key, value in values.items()}
        return replace(self, **checked_values(named, PARSERS, origin, DESCRIPTIONS))


def eval_options(config: Path | Mapping[str, Any] | None, given: Mapping[str, Any], given_from: str) -> EvalOptions:
    """The defaults, overridden by ``config`` (a TOML file or a mapping), overridden by ``given``."""
    return layered(EvalOptions(), config, given, given_from)


def _paths(value: Any) -> tuple[str, ...]:
    return tuple(str(path(item)) for item in ([value] if isinstance(value, (str, Path)) else value))


PARSERS: dict[str, Callable[[Any], Any]] = {
    "root": path, "data": path, "out": path,
    "batch_sizes": lambda value: parse_batch_sizes(comma(value)),
    "device": choice(DEVICES), "threads": optional(integer(1)), "min_time": number(), "repeats": integer(1),
    "max_images": optional(integer(1)), "accuracy": flag, "imgsz": optional(integer(32)), "mode": choice(MODES),
    "end_to_end": flag, "profile": flag, "add": _paths, "family": optional(text), "checkpoint": path,
    "row_timeout": number(1), "executor": choice(EXECUTORS), "ray_address": text,
    "on": lambda value: parse_selectors(value if isinstance(value, list) else text(value)),
}
DESCRIPTIONS = {"batch_sizes": "a list of batch sizes", "add": "a list of model files"}
