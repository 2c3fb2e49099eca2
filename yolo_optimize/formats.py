"""The format table: the single source of truth for what the code asks about a format, its targets, precisions,
file names, build steps, runner and snippets.

A format is one row here, or one row another package registers under the ``yolo_optimize.formats`` entry point
group (``formats``): the build plans it, evaluation measures it and ``recommend`` ships it with no other code. Rows
name their stages and runners as "module:Class" strings, imported when first used, so the table imports nothing."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import import_module
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from yolo_optimize.declaring import listed_names
from yolo_optimize.errors import UserError

PRECISIONS = ("fp32", "fp16", "bf16", "int8")
LOAD = "load"  # the node every plan starts from: the model itself
ENTRY_POINT_GROUP = "yolo_optimize.formats"  # where another package registers its Format rows
UNVERIFIED_ON_GPU = ("experimental: written against TensorRT 10/11 but never run on a GPU with TensorRT "
                     "(docs/tensorrt.md)")


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class Runtime:
    """What runs a format's files: the distribution whose version every report lists, and, for a CPU runtime whose
    measured peaks bound its rows (the matrix's utilization), the module of kernels ``optimize info`` times in it
    (machine/peaks.py; the package names the peaks)."""

    package: str
    kernels: str = ""  # module with ``unavailable_reason(precision)`` and ``kernel(shape, precision, threads)``


TORCH = Runtime("torch", "yolo_optimize.machine.torch_kernels")
ONNXRUNTIME = Runtime("onnxruntime", "yolo_optimize.machine.onnxruntime_kernels")
OPENVINO = Runtime("openvino", "yolo_optimize.machine.openvino_kernels")


@dataclass(frozen=True)
class Format:
    """One deployment format: how its artifact is named, which runner executes it, and how a deployment loads it."""

    target: str
    aliases: tuple[str, ...]
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
        """The runtime whose measured peaks bound its rows (machine/peaks.py); None: no peaks measured for it."""
        return self.runtime.package if self.runtime.kernels else None

    @property
    def buildable(self) -> bool:
        """False for the evaluation baseline (run from the checkpoint itself) and for runtime configurations."""
        return bool(self.steps)


EXPORT, OPTIMIZE = "yolo_optimize.export", "yolo_optimize.optimize"
# An NCNN file loaded as measured, and ``detect``: one image (no batch axis) as NCNN takes it (runners.ncnn_input)
NCNN_LOAD = (
    "import ncnn, numpy as np\nnet = ncnn.Net()\n"
    "for option, value in {config}.items():  # as measured\n    setattr(net.opt, option, value)\n"
    "net.load_param(\"{path}\"); net.load_model(\"{path}\".replace(\".param\", \".bin\"))\n"
    "def detect(image):  # image is {input}, without the batch axis\n"
    "    if image.dtype != np.uint8:  # NCNN reads the buffer as C-ordered float32, held while it runs\n"
    "        image = np.ascontiguousarray(image, dtype=np.float32)\n        pixels = ncnn.Mat(image)\n"
    "    else:  # NCNN's own conversion of the prepared image, and /255\n"
    "        pixels = ncnn.Mat.from_pixels(image, ncnn.Mat.PixelType.PIXEL_RGB, image.shape[1], image.shape[0])\n"
    "        pixels.substract_mean_normalize([], [1 / 255] * 3)\n"
    "    with net.create_extractor() as extractor:\n"
    "        extractor.input(\"in0\", pixels)\n"
    "        return np.array(extractor.extract(\"out0\")[1])\n")
_BUILT_IN: tuple[Format, ...] = (
    Format("pytorch", (), "", ("fp32",), "yolo_optimize.runtime.runners.torch_eager:TorchEagerRunner",
           TORCH, "# the PyTorch checkpoint itself ({path}): nothing exported to load;\n"
           "# ship the checkpoint with its family's own code (yolov5, ultralytics, torchvision)\n"
           "# and run model(torch.from_numpy(images)) under torch.inference_mode() ({threads} threads)"),
    Format("torchscript", ("ts",), "{model}.torchscript", ("fp32", "fp16"),
           "yolo_optimize.runtime.runners.torchscript:TorchScriptRunner", TORCH,
           "import torch\ntorch.set_num_threads({threads})\nmodel = torch.jit.load(\"{path}\").eval()\n"
           "outputs = model(torch.from_numpy(images))  # images: {dtype} NCHW in [0, 1]",
           default=True, uint8_input=True, nms_inside=True, foreign_suffix=".torchscript",
           steps=(Step("fp32", f"{EXPORT}.torchscript:TorchScriptExport"),
                  Step("fp16", f"{EXPORT}.torchscript:TorchScriptExport"))),
    Format("aoti", ("aotinductor", "pt2"), "{model}.pt2", ("fp32", "bf16", "int8"),
           "yolo_optimize.runtime.runners.aoti:AotiRunner", TORCH,
           "import torch\ntorch.set_num_threads({threads})\n"
           "model = torch._inductor.aoti_load_package(\"{path}\")  # compiled C++ and weights, no model code\n"
           "outputs = model(torch.from_numpy(images))  # images: {input}",
           default=True, uint8_input=True, nms_inside=True, foreign_suffix=".pt2", description="AOTInductor .pt2",
           steps=(Step("fp32", f"{EXPORT}.aoti:AotiCompile"), Step("bf16", f"{EXPORT}.aoti:AotiCompile"),
                  Step("int8", f"{OPTIMIZE}.int8_aoti:AotiInt8", "aoti-fp32", gated=True))),
    Format("onnx", (), "{model}.onnx", ("fp32", "fp16", "int8"),
           "yolo_optimize.runtime.runners.onnxruntime:OnnxRuntimeRunner", ONNXRUNTIME,
           "import onnxruntime as ort\noptions = ort.SessionOptions(); options.intra_op_num_threads = {threads}\n"
           "for key, value in {config}.items():  # as measured: how idle threads wait, chosen on this host\n"
           "    if key.startswith(\"session.\"):\n        options.add_session_config_entry(key, value)\n"
           "session = ort.InferenceSession(\"{path}\", options, providers=[\"CPUExecutionProvider\"])\n"
           "outputs = session.run(None, {{session.get_inputs()[0].name: images}})[0]  # images: {input}",
           "import onnxruntime as ort\nfrom concurrent.futures import ThreadPoolExecutor\n"
           "options = ort.SessionOptions(); options.intra_op_num_threads = 1  # one thread per request\n"
           "session = ort.InferenceSession(\"{path}\", options, providers=[\"CPUExecutionProvider\"])\n"
           "name = session.get_inputs()[0].name\n"
           "with ThreadPoolExecutor({requests}) as pool:  # {requests} one-image requests at once\n"
           "    outputs = list(pool.map(lambda image: session.run(None, {{name: image[None]}})[0], images))"
           "  # images: {input}",
           default=True, uint8_input=True, nms_inside=True, foreign_suffix=".onnx",
           steps=(Step("fp32", f"{EXPORT}.onnx:OnnxExport", intermediate="onnx-export"),
                  Step("fp32", f"{OPTIMIZE}.simplify:OnnxSimplify", "onnx-export"),
                  Step("fp16", f"{OPTIMIZE}.fp16:OnnxFp16", "onnx-fp32"),
                  Step("int8", f"{OPTIMIZE}.int8_onnx:OnnxInt8", "onnx-fp32", gated=True))),
    Format("openvino", ("ov",), "{model}_openvino_model/{model}.xml", ("fp32", "fp16", "bf16", "int8"),
           "yolo_optimize.runtime.runners.openvino:OpenVinoRunner", OPENVINO,
           "import openvino as ov\nmodel = ov.Core().compile_model(\"{path}\", \"CPU\", {config})\n"
           "outputs = model(images)[0]  # images: {input}",
           "import openvino as ov\nmodel = ov.Core().compile_model(\"{path}\", \"CPU\", {config})\n"
           "queue, outputs = ov.AsyncInferQueue(model, {requests}), [None] * len(images)"
           "  # one request per stream\n"
           "queue.set_callback(lambda request, i: outputs.__setitem__(i, "
           "request.get_output_tensor(0).data.copy()))\n"
           "for i, image in enumerate(images):  # images: {input}, one per request\n"
           "    queue.start_async({{0: image[None]}}, i)\nqueue.wait_all()",
           default=True, uint8_input=True, nms_inside=True, foreign_suffix=".xml",
           description="an OpenVINO .xml or its folder", companions=(".bin",),
           steps=(*(Step(p, f"{EXPORT}.openvino:OpenVinoExport", "onnx-fp32") for p in ("fp32", "fp16", "bf16")),
                  Step("int8", f"{OPTIMIZE}.int8_openvino:OpenVinoInt8", "openvino-fp32", gated=True))),
    Format("ncnn", (), "{model}_ncnn_model/model.ncnn.param", ("fp32", "fp16", "int8"),
           "yolo_optimize.runtime.runners.ncnn:NcnnRunner", Runtime("ncnn"), NCNN_LOAD + "outputs = detect(image)",
           "from concurrent.futures import ThreadPoolExecutor\n" + NCNN_LOAD
           + "with ThreadPoolExecutor({requests}) as pool:  # {requests} images at once, one thread each\n"
           "    outputs = list(pool.map(detect, images))",
           uint8_input=True, foreign_suffix=".param", description="an NCNN .param or its folder",
           companions=(".bin",),
           steps=(Step("fp32", f"{EXPORT}.ncnn:NcnnExport"), Step("fp16", f"{EXPORT}.ncnn:NcnnExport"),
                  Step("int8", f"{OPTIMIZE}.int8_ncnn:NcnnInt8", "ncnn-fp32", gated=True))),
    Format("executorch", ("et", "pte"), "{model}.pte", ("fp32", "fp16", "int8"),
           "yolo_optimize.runtime.runners.executorch:ExecuTorchRunner", Runtime("executorch"),
           "import torch\nfrom executorch.extension.pybindings import portable_lib\n"
           "from executorch.runtime import Runtime\n"
           "portable_lib._unsafe_reset_threadpool({threads})  # XNNPACK's pool (its default takes every CPU)\n"
           "method = Runtime.get().load_program(\"{path}\").load_method(\"forward\")\n"
           "outputs = method.execute([torch.from_numpy(image[None])])[0]  # one image a call: image is {input}",
           uint8_input=True, foreign_suffix=".pte", description="an ExecuTorch .pte or its folder",
           steps=(Step("fp32", f"{EXPORT}.executorch:ExecuTorchExport"),
                  Step("fp16", f"{EXPORT}.executorch:ExecuTorchExport"),
                  Step("int8", f"{OPTIMIZE}.int8_executorch:ExecuTorchInt8", "executorch-fp32", gated=True))),
    Format("tensorrt", ("trt", "engine"), "{model}.engine", ("fp32", "fp16", "int8"),
           "yolo_optimize.runtime.runners.tensorrt:TensorRTRunner", Runtime("tensorrt"),
           "import tensorrt as trt\nengine = trt.Runtime(trt.Logger()).deserialize_cuda_engine("
           "open(\"{path}\", \"rb\").read())\n"
           "context = engine.create_execution_context()  # bind device buffers, context.execute_async_v3(stream)",
           experimental=UNVERIFIED_ON_GPU,
           steps=(Step("int8", f"{OPTIMIZE}.int8_tensorrt:TensorRTInt8Qdq", "onnx-fp32",
                       intermediate="onnx-int8-tensorrt", gated=True),
                  Step("fp32", f"{EXPORT}.tensorrt:TensorRTBuild", "onnx-fp32"),
                  Step("fp16", f"{EXPORT}.tensorrt:TensorRTBuild", "onnx-fp16"),
                  Step("int8", f"{EXPORT}.tensorrt:TensorRTBuild", "onnx-int8-tensorrt", gated=True))),
    Format("torch-tensorrt", ("torch_tensorrt", "torchtrt"), "{model}_torchtrt.ep", ("fp32", "fp16"),
           "yolo_optimize.runtime.runners.torch_tensorrt:TorchTensorRTRunner", Runtime("torch-tensorrt"),
           "import torch, torch_tensorrt\nmodel = torch_tensorrt.load(\"{path}\").module()\n"
           "outputs = model(torch.from_numpy(images).cuda())  # images: {dtype} NCHW in [0, 1]",
           experimental=UNVERIFIED_ON_GPU,
           steps=(Step("fp32", f"{EXPORT}.torch_tensorrt:TorchTensorRTCompile"),
                  Step("fp16", f"{EXPORT}.torch_tensorrt:TorchTensorRTCompile"))),
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
