"""Evaluation options: one typed record, each field the option's one declaration, from which ``optimize eval``,
``yo.evaluate`` and TOML config files take it (declaring.py: the declaration, config files and precedence), as
``BuildOptions`` is for the build. The session turns it into the settings every measuring process
runs with (``session.EvalRequest``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from yolo_optimize.cluster.nodes import parse_selectors
from yolo_optimize.declaring import (
    EXECUTORS,
    LOCAL,
    FilePath,
    Flag,
    Listed,
    OneOf,
    Real,
    Repeated,
    Text,
    Whole,
    checked_values,
    layered,
    option,
    parse_batch_sizes,
)
from yolo_optimize.errors import UserError
from yolo_optimize.formats import foreign_files_help
from yolo_optimize.host.devices import DEVICES
from yolo_optimize.runtime.runners.base import AUTO, MODES

COMMAND_OUT = Path("reports")  # where optimize eval writes by default (yo.evaluate writes only where asked)
ROW_TIMEOUT_S = 600.0  # a row's measuring process silent this long (a hung runtime) is stopped; the others go on


@dataclass(frozen=True)
class EvalOptions:
    """Everything ``optimize eval`` takes: each field is the option's one declaration (``declaring.option``)."""

    root: Path | None = option(None, FilePath(), on_command_line=False)  # the command's DIRECTORY argument
    data: Path | None = option(None, FilePath(), "YOLO dataset folder or COCO instances_*.json.",
                               shown_default="the model package's sample images, no accuracy")
    out: Path | None = option(None, FilePath(), shown_default=str(COMMAND_OUT))  # None: not written (the API's)
    batch_sizes: tuple[int, ...] = option((1, 8), Listed(parse_batch_sizes, "a list of batch sizes"))
    device: str = option("auto", OneOf(DEVICES), shown_default="auto: cuda where a GPU is visible, as for build")
    threads: int | None = option(None, Whole(1), "Threads every runtime gets.",
                                 shown_default="the CPUs this process may use: its affinity and cgroup quota")
    min_time: float = option(1.0, Real(), "Seconds per batch size.")
    repeats: int = option(3, Whole(1), "Interleaved rounds: processes per artifact and per baseline.")
    max_images: int | None = option(None, Whole(1), "Evaluate accuracy on the first N images only.")
    accuracy: bool = option(True, Flag(), "Measure speed and memory only.")
    imgsz: int | None = option(None, Whole(32), "Refuse artifacts built for another input size; the input size of "
                                                "--add files whose input shape is not fixed.")
    mode: str = option(AUTO, OneOf(MODES), "How each batch size runs: auto = latency at batch 1 (one request on every "
                                           "thread), throughput above (the runtime's own: OpenVINO's THROUGHPUT hint, "
                                           "concurrent ONNX Runtime requests on one-thread sessions; PyTorch as it "
                                           "is, on a GPU one CUDA stream, two with throughput); or one of them for "
                                           "every batch size.")
    end_to_end: bool = option(True, Flag(), "Time inference only, not also the pipelined path from image files to "
                                            "kept predictions.")
    profile: bool = option(False, Flag(), "Explain the numbers: model facts against this machine's measured peaks "
                                          "(optimize info), the roofline, and per artifact per-layer time, a trace, "
                                          "the end-to-end breakdown, threads, energy.")
    add: tuple[str, ...] = option((), Repeated("a list of model files"),
                                  lambda: f"A model file this tool did not build ({foreign_files_help()}), measured "
                                          "beside the artifacts of its model under DIRECTORY; repeatable. DIRECTORY "
                                          "may itself be such a file.", metavar="[FAMILY=]PATH")
    family: str | None = option(None, Text(), "The model family of --add files that name none (yolov5, yolov7, "
                                              "ultralytics, torchvision).")
    checkpoint: Path | None = option(None, FilePath(), "The PyTorch checkpoint of --add files that join no model "
                                                       "under DIRECTORY: their baseline.")
    row_timeout: float = option(ROW_TIMEOUT_S, Real(1), "Seconds a row's measuring process may stay silent (a hung "
                                                        "runtime) before it is stopped and the row marked 'timed "
                                                        "out'; the other rows go on.")
    executor: str = option(LOCAL, OneOf(EXECUTORS), "ray: the whole evaluation once per --on selector, each on a Ray "
                                                     "node with that label, alone there (pip install -e \".[ray]\"; "
                                                     "DIRECTORY, --data and --out at the same path on every node).")
    ray_address: str = option("auto", Text(), "The Ray cluster to connect to.")
    on: tuple[str, ...] = option((), Listed(parse_selectors, "label=value selectors"),
                                 "With --executor ray: one measuring node per label=value selector, comma list "
                                 "(kind=avx2,kind=avx512); reports go to OUT/kind-avx2/...")

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
        return replace(self, **checked_values(named, EvalOptions, origin))


def eval_options(config: Path | Mapping[str, Any] | None, given: Mapping[str, Any], given_from: str) -> EvalOptions:
    """The defaults, overridden by ``config`` (a TOML file or a mapping), overridden by ``given``."""
    return layered(EvalOptions(), config, given, given_from)
