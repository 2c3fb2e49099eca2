"""``optimize build`` as a function: checked options in, one DAG per model and input size run, typed results out.

The CLI shows its progress live; the Python API passes a callback or nothing. Everything the user got
wrong is found before anything is written (a ``UserError``); a node that fails does not stop the others.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from yolo_optimize.artifact import check_writable
from yolo_optimize.config import BuildOptions
from yolo_optimize.dag import FAILED, NodeResult
from yolo_optimize.errors import UserError
from yolo_optimize.families.base import Family
from yolo_optimize.loading import UINT8_INPUT
from yolo_optimize.pipeline import BuildRequest

VERDICTS = ".checkpoints"  # under --out: the family verdicts of the checkpoints built there (checkpoint.remember_family)

UINT8_TARGETS = ("torchscript", "aoti", "onnx", "openvino")  # the targets --input uint8 is built and checked for
OnEvent = Callable[[str, NodeResult | None], None]  # (node, None) when it starts, (node, result) when it ends


@dataclass
class ModelBuild:
    """One model folder built at one input size: every node's result."""

    model: str
    folder: Path
    imgsz: int
    nodes: list[NodeResult] = field(default_factory=list)

    @property
    def failed(self) -> list[str]:
        return [result.node for result in self.nodes if result.status == FAILED]


@dataclass
class BuildResult:
    out: Path
    models: list[ModelBuild]

    @property
    def failed(self) -> list[str]:
        """``model/node`` of every node that failed."""
        return [f"{model.model}/{node}" for model in self.models for node in model.failed]

    @property
    def ok(self) -> bool:
        return not self.failed


def requests_for(options: BuildOptions) -> list[BuildRequest]:
    """One request per input size, every input checked (bad input is a UserError before anything is written)."""
    from yolo_optimize.checkpoint import resolve_source
    from yolo_optimize.devices import resolve_device
    from yolo_optimize.families import family_named
    from yolo_optimize.images import list_images

    if not options.model:
        raise UserError("no model: name one (yolov5n, a .pt path...) on the command line or as 'model' in the config")
    check_input_form(options.input, options.targets)
    source = resolve_source(options.model, random_weights=options.random_weights, weights_dir=options.weights_dir,
                            verdicts=options.out / VERDICTS)
    family = family_named(source.family)
    sizes = options.imgsz or (family.default_imgsz,)
    images = list_images(options.parity_data or family.sample_images())[:options.parity_images]
    int8 = int8_inputs(family, options) if "int8" in options.precisions else {}
    requests = [BuildRequest(
        source=replace(source, model_id=model_id(source.model_id, size if len(sizes) > 1 else None, options.input)),
        targets=options.targets, precisions=options.precisions, imgsz=size, batch_sizes=options.batch_sizes,
        opset=options.opset, device=resolve_device(options.device),
        parity_images=tuple(str(p.resolve()) for p in images), input_form=options.input, **int8,
    ) for size in sizes]
    for request in requests:
        check_writable(options.out / request.source.model_id)
    return requests


def run_build(options: BuildOptions, on_event: OnEvent | None = None,
              on_model: Callable[[BuildRequest, list[str]], Any] | None = None) -> BuildResult:
    """Build every request of ``options``; ``on_model(request, nodes)`` returns a context the model's nodes are built
    in (the CLI's live table, whose ``event`` then receives the nodes' events)."""
    from yolo_optimize.checkpoint import load_model, remember_family
    from yolo_optimize.dag import Build
    from yolo_optimize.pipeline import plan

    built = []
    for request in requests_for(options):
        nodes = plan(request)
        folder = options.out / request.source.model_id
        dag = Build(nodes, request.source, folder, device=request.device, jobs=options.jobs, force=options.force,
                    verify=options.verify)
        if "load" in dag.pending():
            load_model(request.source)  # a bad checkpoint stops here, before anything is written
        with on_model(request, [n.name for n in nodes]) if on_model else _Quiet(on_event) as display:
            results = dag.run(display.event)
        remember_family(request.source, options.out / VERDICTS)
        built.append(ModelBuild(request.source.model_id, folder, request.imgsz, results))
    return BuildResult(options.out, built)


class _Quiet:
    """The nodes' events to a callback (or nowhere): the API's display."""

    def __init__(self, on_event: OnEvent | None) -> None:
        self.on_event = on_event

    def __enter__(self) -> _Quiet:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def event(self, node: str, result: NodeResult | None) -> None:
        if self.on_event:
            self.on_event(node, result)


def model_id(model: str, size: int | None, input_form: str) -> str:
    """The model's folder: ``<model>[-<size>][-uint8]``, so builds of several sizes or input forms sit side by side
    (and are evaluated side by side) instead of replacing each other's views."""
    return model + (f"-{size}" if size else "") + ("-uint8" if input_form == UINT8_INPUT else "")


def check_input_form(input_form: str, targets: tuple[str, ...]) -> None:
    """TensorRT engines take float input here (their uint8 input handling is unverified without a GPU)."""
    other = [t for t in targets if t not in UINT8_TARGETS]
    if input_form == UINT8_INPUT and other:
        raise UserError(f"--input uint8 is built for {', '.join(UINT8_TARGETS)}, not {', '.join(other)}: build "
                        f"those with --input float")


def int8_inputs(family: Family, options: BuildOptions) -> dict[str, Any]:
    """Calibration images and a gate set (labelled, where the family's gate metric needs labels), checked first, and
    what the building CPU decides of the INT8 arithmetic (weight bits, OpenVINO's float parts)."""
    from yolo_optimize.cpu import has_native_bf16, has_vnni
    from yolo_optimize.images import list_images
    from yolo_optimize.optimize.gate import GateConfig, gate_metric_class
    from yolo_optimize.runtime.dataset import load_dataset

    if options.calib_data is None:
        raise UserError("INT8 needs real calibration images: pass --calib-data DIR (e.g. ../shared/assets/coco128)")
    calibration = list_images(options.calib_data)[:options.calib_images]
    gate_root = (options.gate_data or options.calib_data).resolve()
    gate = load_dataset(gate_root, max_images=options.gate_images)
    if gate.ground_truth is None and gate_metric_class(family).needs_labels:
        raise UserError(f"the INT8 accuracy gate needs labels and {gate_root} has none: pass --gate-data with a "
                        f"labelled set (YOLO labels/ beside images/)")
    return {"calib_images": tuple(str(p.resolve()) for p in calibration),
            "int8_weight_bits": 8 if has_vnni() else 7, "int8_float_precision": "bf16" if has_native_bf16() else "fp32",
            "gate": GateConfig(str(gate_root), options.gate_images, options.max_map_drop)}
