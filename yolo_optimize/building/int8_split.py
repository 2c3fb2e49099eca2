"""INT8's images split by job: the calibration images, and the gate's images that share none of them (half of
--calib-data held out, or --gate-data), checked for labels where the family's gate metric needs them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from yolo_optimize.building.contents import Digests
from yolo_optimize.building.options import BuildOptions
from yolo_optimize.building.request import GateConfig
from yolo_optimize.errors import UserError
from yolo_optimize.families.base import Family


def int8_inputs(family: Family, options: BuildOptions, digests: Digests) -> dict[str, Any]:
    """Calibration images and a gate set that shares none of them (labelled, where the family's gate metric needs
    labels), checked: half of --calib-data held out (``held_out.py``) unless --gate-data names another set; images
    compared by content (``digests``)."""
    from yolo_optimize.building.gate import gate_metric_class
    from yolo_optimize.building.held_out import HeldOutSplit, ImageSet, check_disjoint, split_held_out
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
