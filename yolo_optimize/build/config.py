"""Build options: one typed record shared by the CLI, the Python API and TOML config files, checked in one place
(the parsers, config files and precedence: options.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from yolo_optimize.cluster.nodes import parse_selectors
from yolo_optimize.devices import DEVICES
from yolo_optimize.formats import (
    DEFAULT_TARGETS,
    parse_batch_sizes,
    parse_image_sizes,
    parse_precisions,
    parse_targets,
)
from yolo_optimize.metadata import FLOAT_INPUT, INPUT_FORMS
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


@dataclass(frozen=True)
class BuildOptions:
    """Everything ``optimize build`` takes (``optimize build --help`` says what each means)."""

    model: str = ""
    targets: tuple[str, ...] = DEFAULT_TARGETS
    precisions: tuple[str, ...] = ("fp32", "fp16")
    imgsz: tuple[int, ...] = ()  # () = the family's default
    batch_sizes: tuple[int, ...] = (1, 8)
    out: Path = Path("artifacts")
    jobs: int = 2
    force: bool = False
    verify: bool = False
    random_weights: bool = False
    weights_dir: Path | None = None
    device: str = "auto"
    opset: int = 18
    parity_data: Path | None = None
    parity_images: int = 4
    calib_data: Path | None = None
    calib_images: int = 128
    gate_data: Path | None = None
    gate_images: int | None = None
    max_map_drop: float = 1.0
    input: str = FLOAT_INPUT
    executor: str = LOCAL
    ray_address: str | None = None  # None: "auto", the cluster this machine is part of
    on: tuple[str, ...] = ()  # label=value selectors of the building nodes (Ray)
    result: Path | None = None  # where every node's result is written as JSON (BuildResult.to_json)

    def updated(self, values: Mapping[str, Any], origin: str) -> BuildOptions:
        """These options with ``values`` (keys as in Python or on the command line) checked and applied."""
        return replace(self, **checked_values(values, PARSERS, origin, DESCRIPTIONS))


def build_options(config: Path | Mapping[str, Any] | None, given: Mapping[str, Any], given_from: str) -> BuildOptions:
    """The defaults, overridden by ``config`` (a TOML file or a mapping), overridden by ``given``: the CLI's and the
    API's one way to the options, each value checked and a bad one named with where it came from."""
    return layered(BuildOptions(), config, given, given_from)


PARSERS: dict[str, Callable[[Any], Any]] = {
    "model": lambda value: text(str(value)) if isinstance(value, Path) else text(value),
    "targets": lambda value: tuple(parse_targets(comma(value))),
    "precisions": lambda value: tuple(parse_precisions(comma(value))),
    "imgsz": lambda value: parse_image_sizes(comma(value)),
    "batch_sizes": lambda value: parse_batch_sizes(comma(value)),
    "out": path, "jobs": integer(1), "force": flag, "verify": flag, "random_weights": flag, "weights_dir": path,
    "device": choice(DEVICES), "opset": integer(18), "parity_data": path, "parity_images": integer(1),
    "calib_data": path, "calib_images": integer(1), "gate_data": path, "gate_images": optional(integer(1)),
    "max_map_drop": number(), "input": choice(INPUT_FORMS), "executor": choice(EXECUTORS),
    "ray_address": optional(text),
    "on": lambda value: parse_selectors(value if isinstance(value, list) else text(value)),
    "result": path,
}
DESCRIPTIONS = {"targets": "a list of targets", "precisions": "a list of precisions", "imgsz": "a list of sizes",
                "batch_sizes": "a list of batch sizes"}
