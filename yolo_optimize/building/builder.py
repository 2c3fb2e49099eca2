"""``optimize build`` as a function: checked options in, one DAG per model and input size run, typed results out.

The CLI shows its progress live; the Python API passes a callback or nothing. Everything the user got
wrong is found before anything is written (a ``UserError``); a node that fails does not stop the others.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from yolo_optimize.artifact import check_writable
from yolo_optimize.building.contents import RECORD, Digests, data_contents
from yolo_optimize.building.dag import FAILED, Build, NodeResult
from yolo_optimize.building.executor import Executor, LocalExecutor
from yolo_optimize.building.options import BuildOptions
from yolo_optimize.building.request import BuildRequest, GateConfig
from yolo_optimize.declaring import LOCAL
from yolo_optimize.errors import UserError
from yolo_optimize.families.base import Family
from yolo_optimize.families.suppression import NmsSettings
from yolo_optimize.files import write_atomically
from yolo_optimize.formats import nms_targets, uint8_targets
from yolo_optimize.machine.choices import (
    BF16_RUNTIMES,
    Bf16Evidence,
    bf16_evidence,
    bf16_matters,
    float_parts_precision,
    slower_than_fp32_note,
)
from yolo_optimize.metadata import UINT8_INPUT

VERDICTS = ".checkpoints"  # under --out: the family verdicts of the checkpoints built there
#                           (checkpoint.remember_family)

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
    notes: list[str] = field(default_factory=list)  # what the build says beside its nodes (a precision slower here)

    @property
    def failed(self) -> list[str]:
        """``model/node`` of every node that failed."""
        return [f"{model.model}/{node}" for model in self.models for node in model.failed]

    @property
    def ok(self) -> bool:
        return not self.failed

    def statuses(self) -> dict[str, str]:
        """node -> status; ``model/node`` when the build made several models."""
        several = len(self.models) > 1
        return {f"{model.model}/{node.node}" if several else node.node: node.status
                for model in self.models for node in model.nodes}

    def to_json(self) -> str:
        return json.dumps(asdict(self), default=str, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> BuildResult:
        """The result ``to_json`` wrote (``optimize build --result``)."""
        found = json.loads(text)
        models = [ModelBuild(m["model"], Path(m["folder"]), m["imgsz"], [NodeResult(**n) for n in m["nodes"]])
                  for m in found["models"]]
        return cls(Path(found["out"]), models, found["notes"])


def requests_for(options: BuildOptions, executor: Executor) -> tuple[list[BuildRequest], BuildingHost]:
    """One request per input size, every input checked (bad input is a UserError before anything is written, after
    ``check_options``); what depends on the building machine (the device 'auto' means, the CPU's INT8 arithmetic,
    its measured bf16 and fp32 rates) read where it builds, and returned beside them."""
    from yolo_optimize.checkpoint import resolve_source
    from yolo_optimize.families import family_named
    from yolo_optimize.images import check_input_fits, checked_images, list_images

    source = resolve_source(options.model, random_weights=options.random_weights, weights_dir=options.weights_dir,
                            verdicts=options.out / VERDICTS, head=options.head or "", nms=options.nms_settings())
    family = family_named(source.family)
    sizes = options.imgsz or (family.default_imgsz,)
    for size in sizes:
        check_input_fits(size, max(options.batch_sizes), "--imgsz and --batch-sizes")
    images = checked_images(list_images(options.parity_data or family.sample_images())[:options.parity_images])
    digests = Digests(options.out / RECORD, full=options.verify)
    int8 = int8_inputs(family, options, digests) if "int8" in options.precisions else {}
    contents = request_contents([str(p.resolve()) for p in images], int8, digests)
    host = executor.probe(building_host, options.device, options.precisions)  # bad input is refused before it
    if int8:
        int8.update(int8_vnni=host.int8_vnni, int8_float_precision=host.int8_float_precision)
    requests = [BuildRequest(
        source=replace(source, model_id=model_id(source.model_id, size if len(sizes) > 1 else None, options.input)),
        targets=options.targets, precisions=options.precisions, imgsz=size, batch_sizes=options.batch_sizes,
        opset=options.opset, device=host.device,
        parity_images=tuple(str(p.resolve()) for p in images), input_form=options.input, contents=contents, **int8,
    ) for size in sizes]
    for request in requests:
        check_writable(options.out / request.source.model_id)
    digests.save()  # only once every input is checked: bad input writes nothing
    return requests, host


def run_build(options: BuildOptions, on_event: OnEvent | None = None,
              on_model: Callable[[BuildRequest, list[str]], Any] | None = None) -> BuildResult:
    """Build every request of ``options``; ``on_model(request, nodes)`` returns a context the model's nodes are built
    in (the CLI's live table, whose ``event`` then receives the nodes' events). On a cluster every model (input size)
    builds at once and ``on_event`` receives ``<model>/<node>`` instead."""
    check_options(options)
    executor = executor_for(options)
    try:
        return _run_build(options, executor, on_event, on_model)
    finally:
        executor.close()


def _run_build(options: BuildOptions, executor: Executor, on_event: OnEvent | None,
               on_model: Callable[[BuildRequest, list[str]], Any] | None) -> BuildResult:
    from yolo_optimize.building.pipeline import plan
    from yolo_optimize.checkpoint import check_loads

    requests, host = requests_for(options, executor)
    asked = [f"{target}-{precision}" for target in options.targets for precision in options.precisions]
    notes = [note] if (note := slower_than_fp32_note(list(host.bf16), asked)) else []
    dags = []
    for request in requests:
        dag = Build(plan(request), request.source, options.out / request.source.model_id, device=request.device,
                    executor=executor, force=options.force, verify=options.verify, contents=request.contents)
        if "load" in dag.pending():
            executor.before_nodes(check_loads, request.source)  # a bad checkpoint stops here, nothing written
        dags.append((request, dag))
    if executor.models_at_once and len(dags) > 1:
        with ThreadPoolExecutor(len(dags)) as threads:
            built = list(threads.map(lambda item: _built(item[0], item[1], options, _Quiet(on_event, item[0])), dags))
    else:
        built = [_built(request, dag, options, on_model(request, dag.order) if on_model else _Quiet(on_event))
                 for request, dag in dags]
    result = BuildResult(options.out, built, notes)
    if options.result is not None:
        write_atomically(options.result, result.to_json())
    return result


def _built(request: BuildRequest, dag: Build, options: BuildOptions, display: Any) -> ModelBuild:
    from yolo_optimize.checkpoint import remember_family

    with display:
        results = dag.run(display.event)
    remember_family(request.source, options.out / VERDICTS)
    return ModelBuild(request.source.model_id, dag.model_dir, request.imgsz, results)


class _Quiet:
    """The nodes' events to a callback (or nowhere): the API's display; with ``request``, node names carry the model."""

    def __init__(self, on_event: OnEvent | None, request: BuildRequest | None = None) -> None:
        self.on_event = on_event
        self.prefix = f"{request.source.model_id}/" if request else ""

    def __enter__(self) -> _Quiet:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def event(self, node: str, result: NodeResult | None) -> None:
        if self.on_event:
            self.on_event(self.prefix + node, result)


def executor_for(options: BuildOptions) -> Executor:
    """This machine's worker processes, or a Ray cluster's nodes (``--executor ray``: every building node must see
    --out and the inputs at the driver's paths)."""
    if options.executor == LOCAL:
        if options.on or options.ray_address:
            raise UserError("--on and --ray-address go with --executor ray")
        return LocalExecutor(options.jobs, options.threads)
    if options.threads:
        raise UserError("--threads shares this machine's CPUs: with --executor ray each node builds on its own")
    from yolo_optimize.building.ray_executor import RayExecutor

    executor = RayExecutor(options.ray_address or "auto", options.on)
    weights = Path(options.model) if Path(options.model).suffix == ".pt" else None
    executor.check_shared(options.out, {"the checkpoint": weights, "--calib-data": options.calib_data,
                                        "--gate-data": options.gate_data, "--parity-data": options.parity_data,
                                        "--weights-dir": options.weights_dir})
    return executor


@dataclass(frozen=True)
class BuildingHost:
    """What a build takes from the machine that builds: the device 'auto' stands for, the CPU's INT8 arithmetic, and
    its measured bf16 and fp32 rates where it computes bf16 natively (``machine/choices.py``)."""

    device: str
    int8_vnni: bool | None = None  # the CPU multiplies u8 x s8 without saturating (int8 builds only)
    int8_float_precision: str | None = None  # bf16 where it measures faster than fp32, else fp32 (int8 builds only)
    bf16: tuple[Bf16Evidence, ...] = ()  # per runtime that runs bf16 artifacts (builds with int8 or bf16 only)


def building_host(device: str, precisions: tuple[str, ...]) -> BuildingHost:
    """Read on the building machine (``Executor.probe``): its limits (``optimize info``, measured once per machine
    and tool versions, then cached) only where it has native bf16 and bf16 matters to this build."""
    from yolo_optimize.host.cpu import has_vnni, usable_cpus
    from yolo_optimize.host.devices import resolve_device
    from yolo_optimize.machine.peaks import machine_limits

    evidence: tuple[Bf16Evidence, ...] = ()
    if bf16_matters(precisions):
        limits = machine_limits(usable_cpus())
        evidence = tuple(bf16_evidence(limits, runtime) for runtime in BF16_RUNTIMES)
    if "int8" not in precisions:
        return BuildingHost(resolve_device(device), bf16=evidence)
    openvino = next((e for e in evidence if e.runtime == "openvino"), bf16_evidence(None, "openvino"))
    return BuildingHost(resolve_device(device), has_vnni(), float_parts_precision(openvino), evidence)


def model_id(model: str, size: int | None, input_form: str) -> str:
    """The model's folder: ``<model>[-<size>][-uint8]``, so builds of several sizes or input forms sit side by side
    (and are evaluated side by side) instead of replacing each other's views."""
    return model + (f"-{size}" if size else "") + ("-uint8" if input_form == UINT8_INPUT else "")


def check_options(options: BuildOptions) -> None:
    """What can be checked before a cluster is reached or the checkpoint is read (its family's imports take seconds):
    a model named, an input form its targets take, --out writable, the image folders present, INT8's calibration
    images given."""
    from yolo_optimize.images import list_images

    if not options.model:
        raise UserError("no model: name one (yolov5n, a .pt path...) on the command line or as 'model' in the config")
    check_input_form(options.input, options.targets)
    check_nms_targets(options.nms_settings(), options.targets)
    check_writable(options.out)
    if options.result is not None and options.result.is_dir():
        raise UserError(f"--result {options.result} is a folder: name the JSON file to write")
    for folder in (options.parity_data, options.gate_data):
        if folder is not None:
            list_images(folder)
    if "int8" in options.precisions:
        list_images(options.calibration_folder())


def check_input_form(input_form: str, targets: tuple[str, ...]) -> None:
    """TensorRT engines take float input here (their uint8 input handling is unverified without a GPU)."""
    other = [t for t in targets if t not in uint8_targets()]
    if input_form == UINT8_INPUT and other:
        raise UserError(f"--input uint8 is built for {', '.join(uint8_targets())}, not {', '.join(other)}: build "
                        f"those with --input float")


def check_nms_targets(nms: NmsSettings | None, targets: tuple[str, ...]) -> None:
    """NMS inside the graph is built for the formats whose runtimes run it here (TensorRT's is unverified without a
    GPU)."""
    other = [t for t in targets if t not in nms_targets()]
    if nms is not None and other:
        raise UserError(f"--nms is built for {', '.join(nms_targets())}, not {', '.join(other)}: build those "
                        f"without it")


def request_contents(parity: list[str], int8: dict[str, Any], digests: Digests) -> dict[str, str]:
    """The content of every data file the build reads (``contents.py``): the parity images, and with INT8 the
    calibration and gate images with their labels and annotation files (the gate's, and the tuning set's)."""
    images, annotations = [*parity, *int8.get("calib_images", ())], []
    gate: GateConfig | None = int8.get("gate")
    for image_set in (gate.images, gate.tuning) if gate else ():
        if image_set is not None:
            images += image_set.images
            annotations.append(image_set.root)
    return data_contents(images, annotations, digests)


def int8_inputs(family: Family, options: BuildOptions, digests: Digests) -> dict[str, Any]:
    """Calibration images and a gate set that shares none of them (labelled, where the family's gate metric needs
    labels), checked: half of --calib-data held out (``held_out.py``) unless --gate-data names another set; images
    compared by content (``digests``)."""
    from yolo_optimize.building.gate import gate_metric_class
    from yolo_optimize.building.held_out import HeldOutSplit, ImageSet, check_disjoint, split_held_out
    from yolo_optimize.building.request import GateConfig
    from yolo_optimize.runtime.dataset import load_dataset

    calib_root = options.calibration_folder().resolve()
    gate_root = options.gate_data.resolve() if options.gate_data else calib_root
    needs_labels = gate_metric_class(family).needs_labels
    calibration_set = load_dataset(calib_root)
    gate_set = calibration_set if gate_root == calib_root else load_dataset(gate_root)
    if gate_set.ground_truth is None and needs_labels:
        raise UserError(f"the INT8 accuracy gate needs labels and {gate_root} has none: pass --gate-data with a "
                        f"labelled set (YOLO labels/ beside images/)")
    if gate_root == calib_root:
        split = split_held_out(calibration_set)
    else:
        split = HeldOutSplit(tuple(calibration_set.images), tuple(gate_set.images),
                             "given by --gate-data, sharing no image with the calibration images (compared by content)")
    calibration = tuple(str(p.resolve()) for p in split.calibration[:options.calib_images])
    gate = tuple(str(p.resolve()) for p in split.gate[:options.gate_images])
    if needs_labels and not gate_set.subset(gate).boxes:
        raise UserError(f"the INT8 accuracy gate's {len(gate)} images from {gate_root} hold not a single labelled "
                        f"box: no mAP drop can be measured on them, so no INT8 file could pass on evidence; pass "
                        f"--gate-data with labelled images")
    check_disjoint([Path(p) for p in calibration], [Path(p) for p in gate], gate_root, digests.of,
                   held_out=gate_root == calib_root)
    labelled = calibration_set.ground_truth is not None or not needs_labels
    return {"calib_images": calibration,
            "gate": GateConfig(ImageSet(str(gate_root), gate), ImageSet(str(calib_root), calibration) if labelled
                               else None, split.rule, options.max_map_drop)}
