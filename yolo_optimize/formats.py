"""The format table: the single source of truth for what the code asks about a format, its targets, precisions,
file names, build steps, runner and snippets.

A format is one row here, or one row another package registers under the ``yolo_optimize.formats`` entry point
group (``formats``): the build plans it, evaluation measures it and ``recommend`` ships it with no other code. Rows
name their stages and runners as "module:Class" strings, imported when first used, so the table imports nothing
(tests/test_formats.py resolves every one); the built-in rows' deployment snippets are code files in ``snippets/``."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import import_module
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

from yolo_optimize.declaring import listed_names
from yolo_optimize.errors import UserError

PRECISIONS = ("fp32", "fp16", "bf16", "int8")
LOAD = "load"  # the node every plan starts from: the model itself
ENTRY_POINT_GROUP = "yolo_optimize.formats"  # where another package registers its Format rows
UNVERIFIED_ON_GPU = ("experimental: written against TensorRT 10/11 but never run on a GPU with TensorRT "
                     "(docs/tensorrt.md)")


@dataclass(frozen=True, kw_only=True)
class Step:
    """One node of a format's build plan: the stage that makes it and the node it is made from (pipeline.plan)."""

    precision: str  # the precision it makes
    stage: str  # "module:Class", a Stage with a classmethod ``planned(request, precision)`` that configures it
    parent: str = LOAD  # the node it is made from: LOAD (the model) or another step's node
    intermediate: str = ""  # the node's name when not deployable (kept under .cache/); "": {target}-{precision}
    gated: bool = False  # INT8: planned only when the build has calibration images and an accuracy gate

    def node_of(self, target: str) -> str:
        """The node it makes for the format ``target``."""
        return self.intermediate or f"{target}-{self.precision}"


@dataclass(frozen=True, kw_only=True)
class Runtime:
    """What runs a format's files: the distribution whose version every report lists, and, for a CPU runtime whose
    measured peaks bound its rows (the matrix's utilization), the module of kernels ``optimize info`` times in it
    (limits/peaks.py; the package names the peaks)."""

    package: str
    kernels: str = ""  # module with ``unavailable_reason(precision)`` and ``kernel(shape, precision, threads)``
    on_arm: bool = False  # its aarch64 wheel runs on an emulated ARM core: --check-on checks its files there (arm/)


TORCH = Runtime(package="torch", kernels="yolo_optimize.limits.torch_kernels")
ONNXRUNTIME = Runtime(package="onnxruntime", kernels="yolo_optimize.limits.onnxruntime_kernels", on_arm=True)
OPENVINO = Runtime(package="openvino", kernels="yolo_optimize.limits.openvino_kernels")


@dataclass(frozen=True, kw_only=True)
class Format:
    """One deployment format: how its artifact is named, which runner executes it, and how a deployment loads it."""

    target: str
    aliases: tuple[str, ...] = ()  # other names --targets takes
    entry: str  # artifact entry point, relative to the artifact dir; {model} is the model id
    precisions: tuple[str, ...]
    runner: str  # "module:Class" implementing runtime.runners.base.Runner
    runtime: Runtime
    # Lines that load {path} with the plain runtime as measured in the latency configuration, and (runtimes with one)
    # in the throughput configuration. {config}: the runtime's settings as measured; {threads}, {requests}: threads
    # of the latency request, requests at once; {input}: what the images are; {dtype}: a PyTorch file's input type.
    snippet: str = ""
    throughput_snippet: str = ""
    experimental: str = ""  # why its results are not yet to be trusted (shown in --help, the README and the matrix)
    default: bool = False  # built when --targets is not given
    uint8_input: bool = False  # built and checked with --input uint8 too (the layout and /255 inside the graph)
    nms_inside: bool = False  # built and checked with --nms too (NMS inside the graph: its runtime runs the op)
    foreign_suffix: str = ""  # how a model file this tool did not build is recognized (eval --add), "" for none
    description: str = ""  # its files in a few words, for eval --add's help (default: foreign_suffix)
    companions: tuple[str, ...] = ()  # suffixes of the files its entry needs beside it (an OpenVINO .xml's .bin)
    steps: tuple[Step, ...] = ()  # how a build makes it, parents before children (none: it is not built)
    runs: str = ""  # a runtime configuration of another format's files (an execution provider): that format's target

    def entry_for(self, model_id: str) -> str:
        return self.entry.format(model=model_id)

    @property
    def kernels(self) -> str | None:
        """The runtime whose measured peaks bound its rows (limits/peaks.py); None: no peaks measured for it."""
        return self.runtime.package if self.runtime.kernels else None

    @property
    def buildable(self) -> bool:
        """False for the evaluation baseline (run from the checkpoint itself) and for runtime configurations."""
        return bool(self.steps)


EXPORT, OPTIMIZE, RUNNERS = "yolo_optimize.export", "yolo_optimize.optimize", "yolo_optimize.runtime.runners"
SNIPPETS = Path(__file__).parent / "snippets"  # the built-in rows' deployment snippets, one text file each


def _snippet(*names: str) -> str:
    """The snippet made of ``SNIPPETS``' files ``names`` in order (each ends with its newline; the snippet does not):
    code kept as code files, read once when the table is made."""
    return "".join((SNIPPETS / f"{name}.txt").read_text() for name in names).removesuffix("\n")


_BUILT_IN: tuple[Format, ...] = (
    Format(target="pytorch", entry="", precisions=("fp32",), runner=f"{RUNNERS}.torch_eager:TorchEagerRunner",
           runtime=TORCH, snippet=_snippet("pytorch.latency")),
    Format(target="torchscript", aliases=("ts",), entry="{model}.torchscript", precisions=("fp32", "fp16"),
           runner=f"{RUNNERS}.torchscript:TorchScriptRunner", runtime=TORCH,
           snippet=_snippet("torchscript.latency"),
           default=True, uint8_input=True, nms_inside=True, foreign_suffix=".torchscript",
           steps=(Step(precision="fp32", stage=f"{EXPORT}.torchscript:TorchScriptExport"),
                  Step(precision="fp16", stage=f"{EXPORT}.torchscript:TorchScriptExport"))),
    Format(target="aoti", aliases=("aotinductor", "pt2"), entry="{model}.pt2", precisions=("fp32", "bf16", "int8"),
           runner=f"{RUNNERS}.aoti:AotiRunner", runtime=TORCH, snippet=_snippet("aoti.latency"),
           default=True, uint8_input=True, nms_inside=True, foreign_suffix=".pt2", description="AOTInductor .pt2",
           steps=(Step(precision="fp32", stage=f"{EXPORT}.aoti:AotiCompile"),
                  Step(precision="bf16", stage=f"{EXPORT}.aoti:AotiCompile"),
                  Step(precision="int8", stage=f"{OPTIMIZE}.int8_aoti:AotiInt8", parent="aoti-fp32", gated=True))),
    Format(target="onnx", entry="{model}.onnx", precisions=("fp32", "fp16", "int8"),
           runner=f"{RUNNERS}.onnxruntime:OnnxRuntimeRunner", runtime=ONNXRUNTIME,
           snippet=_snippet("onnx.latency"), throughput_snippet=_snippet("onnx.throughput"),
           default=True, uint8_input=True, nms_inside=True, foreign_suffix=".onnx",
           steps=(Step(precision="fp32", stage=f"{EXPORT}.onnx:OnnxExport", intermediate="onnx-export"),
                  Step(precision="fp32", stage=f"{OPTIMIZE}.simplify:OnnxSimplify", parent="onnx-export"),
                  Step(precision="fp16", stage=f"{OPTIMIZE}.fp16:OnnxFp16", parent="onnx-fp32"),
                  Step(precision="int8", stage=f"{OPTIMIZE}.int8_onnx:OnnxInt8", parent="onnx-fp32", gated=True))),
    Format(target="openvino", aliases=("ov",), entry="{model}_openvino_model/{model}.xml",
           precisions=("fp32", "fp16", "bf16", "int8"), runner=f"{RUNNERS}.openvino:OpenVinoRunner",
           runtime=OPENVINO, snippet=_snippet("openvino.latency"), throughput_snippet=_snippet("openvino.throughput"),
           default=True, uint8_input=True, nms_inside=True, foreign_suffix=".xml",
           description="an OpenVINO .xml or its folder", companions=(".bin",),
           steps=(*(Step(precision=p, stage=f"{EXPORT}.openvino:OpenVinoExport", parent="onnx-fp32")
                    for p in ("fp32", "fp16", "bf16")),
                  Step(precision="int8", stage=f"{OPTIMIZE}.int8_openvino:OpenVinoInt8", parent="openvino-fp32",
                       gated=True))),
    Format(target="ncnn", entry="{model}_ncnn_model/model.ncnn.param", precisions=("fp32", "fp16", "int8"),
           runner=f"{RUNNERS}.ncnn:NcnnRunner", runtime=Runtime(package="ncnn", on_arm=True),
           snippet=_snippet("ncnn.load", "ncnn.latency"),
           throughput_snippet=_snippet("thread_pool", "ncnn.load", "ncnn.throughput"),
           uint8_input=True, foreign_suffix=".param", description="an NCNN .param or its folder",
           companions=(".bin",),
           steps=(Step(precision="fp32", stage=f"{EXPORT}.ncnn:NcnnExport"),
                  Step(precision="fp16", stage=f"{EXPORT}.ncnn:NcnnExport"),
                  Step(precision="int8", stage=f"{OPTIMIZE}.int8_ncnn:NcnnInt8", parent="ncnn-fp32", gated=True))),
    Format(target="executorch", aliases=("et", "pte"), entry="{model}.pte", precisions=("fp32", "fp16", "int8"),
           runner=f"{RUNNERS}.executorch:ExecuTorchRunner", runtime=Runtime(package="executorch"),
           snippet=_snippet("executorch.latency"),
           uint8_input=True, foreign_suffix=".pte", description="an ExecuTorch .pte or its folder",
           steps=(Step(precision="fp32", stage=f"{EXPORT}.executorch:ExecuTorchExport"),
                  Step(precision="fp16", stage=f"{EXPORT}.executorch:ExecuTorchExport"),
                  Step(precision="int8", stage=f"{OPTIMIZE}.int8_executorch:ExecuTorchInt8",
                       parent="executorch-fp32", gated=True))),
    Format(target="tensorrt", aliases=("trt", "engine"), entry="{model}.engine", precisions=("fp32", "fp16", "int8"),
           runner=f"{RUNNERS}.tensorrt:TensorRTRunner", runtime=Runtime(package="tensorrt"),
           snippet=_snippet("tensorrt.latency"), experimental=UNVERIFIED_ON_GPU,
           steps=(Step(precision="int8", stage=f"{OPTIMIZE}.int8_tensorrt:TensorRTInt8Qdq", parent="onnx-fp32",
                       intermediate="onnx-int8-tensorrt", gated=True),
                  Step(precision="fp32", stage=f"{EXPORT}.tensorrt:TensorRTBuild", parent="onnx-fp32"),
                  Step(precision="fp16", stage=f"{EXPORT}.tensorrt:TensorRTBuild", parent="onnx-fp16"),
                  Step(precision="int8", stage=f"{EXPORT}.tensorrt:TensorRTBuild", parent="onnx-int8-tensorrt",
                       gated=True))),
    Format(target="torch-tensorrt", aliases=("torch_tensorrt", "torchtrt"), entry="{model}_torchtrt.ep",
           precisions=("fp32", "fp16"), runner=f"{RUNNERS}.torch_tensorrt:TorchTensorRTRunner",
           runtime=Runtime(package="torch-tensorrt"), snippet=_snippet("torch-tensorrt.latency"),
           experimental=UNVERIFIED_ON_GPU,
           steps=(Step(precision="fp32", stage=f"{EXPORT}.torch_tensorrt:TorchTensorRTCompile"),
                  Step(precision="fp16", stage=f"{EXPORT}.torch_tensorrt:TorchTensorRTCompile"))),
)

DEFAULT_TARGETS = tuple(f.target for f in _BUILT_IN if f.default)  # a registered row is built when named


@cache
def formats() -> dict[str, Format]:
    """Every format by target: the built-in rows, then the rows other packages register under ENTRY_POINT_GROUP
    (an entry point names a Format or a tuple of them), read once per process."""
    table = {f.target: f for f in _BUILT_IN}
    for point in entry_points(group=ENTRY_POINT_GROUP):
        for row in _loaded_rows(point):
            if row.target in table:
                raise UserError(f"format plugin {point.value}: target {row.target!r} is taken")
            table[row.target] = row
    _check_parents(table)
    return table


def _check_parents(table: dict[str, Format]) -> None:
    """Every step is made from the model or from a node another step makes (a registered row may name a parent that
    no row makes: one line, not a failure of the planner)."""
    made = {LOAD} | {step.node_of(row.target) for row in table.values() for step in row.steps}
    for row in table.values():
        for step in row.steps:
            if step.parent not in made:
                raise UserError(f"format {row.target!r}: its {step.precision} step is made from {step.parent!r}, "
                                f"which no format's step makes (known: {', '.join(sorted(made))})")


def imported(reference: str) -> Any:
    """What a row's "module:Class" string names (a stage or a runner), imported on first use."""
    module, _, name = reference.partition(":")
    return getattr(import_module(module), name)


def _loaded_rows(point: EntryPoint) -> tuple[Format, ...]:
    try:
        loaded = point.load()
    except Exception as err:  # noqa: BLE001 - any failure of a plugin is the user's to fix, in one line
        raise UserError(f"format plugin {point.value} does not load: {err}") from None
    rows = tuple(loaded) if isinstance(loaded, (tuple, list)) else (loaded,)
    if not all(isinstance(row, Format) for row in rows):
        raise UserError(f"format plugin {point.value} is not a Format row (or a tuple of them)")
    return rows


def format_named(target: str) -> Format:
    """The row of ``target`` (a built-in or registered one); a KeyError names an unknown one."""
    return formats()[target]


def uint8_targets() -> tuple[str, ...]:
    return tuple(f.target for f in formats().values() if f.uint8_input)


def nms_targets() -> tuple[str, ...]:
    return tuple(f.target for f in formats().values() if f.nms_inside)


def foreign_suffixes() -> dict[str, str]:
    """The file suffix of every format eval --add recognizes, and its target."""
    return {f.foreign_suffix: f.target for f in formats().values() if f.foreign_suffix}


def runtime_configurations(target: str) -> tuple[Format, ...]:
    """The rows that run ``target``'s files another way (an execution provider of the same runtime)."""
    return tuple(f for f in formats().values() if f.runs == target)


def targets_help() -> str:
    """--targets' help, from the rows: every buildable target with its aliases, the experimental ones apart."""
    def named(f: Format) -> str:
        return f"{f.target} ({f.aliases[0]})" if f.aliases else f.target

    ready = [named(f) for f in formats().values() if f.buildable and not f.experimental]
    experimental = [named(f) for f in formats().values() if f.buildable and f.experimental]
    return (f"Comma list: {', '.join(ready)}, and EXPERIMENTAL (never run on a GPU with TensorRT): "
            f"{', '.join(experimental)}.")


def foreign_files_help() -> str:
    """What eval --add takes, from the rows."""
    return ", ".join(f.description or f.foreign_suffix for f in formats().values() if f.foreign_suffix)


def parse_targets(text: str) -> list[str]:
    """Comma list of targets (aliases allowed) in table order; unknown names are a UserError."""
    aliases = {alias: f.target for f in formats().values() if f.buildable for alias in (f.target, *f.aliases)}
    names = listed_names(text)
    unknown = [n for n in names if n not in aliases]
    if unknown:
        raise UserError(f"unknown target {', '.join(unknown)!s}; choose from {', '.join(aliases)}")
    wanted = {aliases[n] for n in names}
    return [t for t in formats() if t in wanted]


def parse_precisions(text: str) -> list[str]:
    """Comma list of precisions in canonical order; unknown names are a UserError."""
    names = listed_names(text)
    unknown = [n for n in names if n not in PRECISIONS]
    if unknown:
        raise UserError(f"unknown precision {', '.join(unknown)}; choose from {', '.join(PRECISIONS)}")
    return [p for p in PRECISIONS if p in names]
