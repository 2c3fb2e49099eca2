"""An artifact run on an emulated core reads back what that core offers and what its runtime executed there: NCNN
computes an FP16 file in FP16 on the Pi 5's core and in FP32 on the Pi 4's, which lacks the instructions; the
emulator offers each core its own instructions only (dot product and FP16 arithmetic on the A76, neither on the
A72). Needs the ARM side (``sudo optimize arm-setup``; CI makes it)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.conftest import EDGE_SIZE, VAL_DATA, arm_side_missing
from yolo_optimize.arm.cores import CORES
from yolo_optimize.arm.runs import run_on_arm
from yolo_optimize.artifact import Manifest
from yolo_optimize.images import list_images
from yolo_optimize.metadata import ArtifactMetadata

pytestmark = pytest.mark.skipif(bool(arm_side_missing()), reason=f"the ARM side is not ready here: "
                                                                   f"{arm_side_missing()} (sudo optimize arm-setup)")


@pytest.mark.parametrize(("core", "half"), [("cortex-a72", False), ("cortex-a76", True)])
def test_ncnn_fp16_computes_in_fp16_only_on_a_core_with_fp16_arithmetic(built_edge: Path, core: str,
                                                                       half: bool) -> None:
    folder = built_edge / "ncnn-fp16"
    manifest = Manifest.read(folder)
    image = list_images(VAL_DATA)[0]
    run = run_on_arm(CORES[core], folder, manifest, EDGE_SIZE, images=(image,))
    features = run.facts["features"]
    assert features["asimddp"] is half and features["asimdhp"] is half and features["ncnn_asimdhp"] is half
    assert not features["i8mm"] and not features["sve"]
    assert run.facts["compute_precision"] == ("fp16" if half else "fp32"), run.facts
    here = ArtifactMetadata.of(manifest).model_family().preprocess(image, EDGE_SIZE).pixels
    assert run.pixels is not None and run.pixels.shape == (1, *here.shape) and run.outputs.shape[0] == 1
    assert np.isfinite(run.outputs).all() and run.outputs.max() > 0.25  # a detection, not an all-zero output
