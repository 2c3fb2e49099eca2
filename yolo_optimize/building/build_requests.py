"""A build's options read into one checked request per input size: the checkpoint resolved, the sizes, parity
images and data files checked and their contents taken for the cache keys, INT8's image sets split, and what the
building machine says (``host_facts.py``) filled in. Bad input is a ``UserError`` before anything is written."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from yolo_optimize.arm.side import ArmSide
from yolo_optimize.artifact import check_writable
from yolo_optimize.building.contents import RECORD, Digests, data_contents
from yolo_optimize.building.executor import Executor
from yolo_optimize.building.host_facts import HostFacts, host_facts
from yolo_optimize.building.int8_split import int8_inputs
from yolo_optimize.building.options import BuildOptions
from yolo_optimize.building.request import BuildRequest, GateConfig
from yolo_optimize.metadata import UINT8_INPUT

VERDICTS = ".checkpoints"  # under --out: the family verdicts of the checkpoints built there
#                           (checkpoint.remember_family)


def requests_for(options: BuildOptions, executor: Executor) -> tuple[list[BuildRequest], HostFacts]:
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
    arm_pins = ArmSide.configured().pins if options.check_on else ()
    images = checked_images(list_images(options.parity_data or family.sample_images())[:options.parity_images])
    digests = Digests(options.out / RECORD, full=options.verify)
    int8 = int8_inputs(family, options, digests) if "int8" in options.precisions else {}
    contents = request_contents([str(p.resolve()) for p in images], int8, digests)
    host = executor.probe(host_facts, options.device, options.precisions)  # bad input is refused before it
    if int8:
        int8.update(int8_vnni=host.int8_vnni, int8_float_precision=host.int8_float_precision)
    requests = [BuildRequest(
        source=replace(source, model_id=model_id(source.model_id, size if len(sizes) > 1 else None, options.input)),
        targets=options.targets, precisions=options.precisions, imgsz=size, batch_sizes=options.batch_sizes,
        opset=options.opset, device=host.device,
        parity_images=tuple(str(p.resolve()) for p in images), input_form=options.input, contents=contents, **int8,
        check_on=options.check_on, arm_pins=arm_pins,
    ) for size in sizes]
    for request in requests:
        check_writable(options.out / request.source.model_id)
    digests.save()  # only once every input is checked: bad input writes nothing
    return requests, host


def model_id(model: str, size: int | None, input_form: str) -> str:
    """The model's folder: ``<model>[-<size>][-uint8]``, so builds of several sizes or input forms sit side by side
    (and are evaluated side by side) instead of replacing each other's views."""
    return model + (f"-{size}" if size else "") + ("-uint8" if input_form == UINT8_INPUT else "")


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
