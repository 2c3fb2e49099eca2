"""FP16 ONNX of a model with NMS inside: its per-class regions stay float32, so suppression is exact; the parity check
refuses the file the plain conversion makes (near-duplicates of one class kept)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

from tests.conftest import VAL_DATA, brief, build_args, optimize, statuses
from yolo_optimize.artifact import Manifest
from yolo_optimize.families import family_named
from yolo_optimize.images import list_images
from yolo_optimize.metadata import ArtifactMetadata
from yolo_optimize.optimize.fp16 import named_nodes, nms_box_nodes, without_round_trips

if TYPE_CHECKING:
    import onnx

pytestmark = pytest.mark.slow


def detections(model: onnx.ModelProto, images: list[Path], imgsz: int) -> list[np.ndarray]:
    """The [max_det, 6] detections of an ONNX model (a ModelProto) on each image, letterboxed as yolov5 does."""
    import onnxruntime

    family = family_named("yolov5")
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    found = []
    for image in images:
        pixels = family.preprocess(image, imgsz).pixels
        found.append(session.run(None, {"images": pixels.transpose(2, 0, 1)[None].astype(np.float32) / 255})[0])
    return found


def test_fp16_nms_is_exact_and_the_plain_conversion_is_refused_by_parity(tmp_path: Path) -> None:
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    result = optimize(*build_args(tmp_path, "--targets", "onnx", "--precisions", "fp32,fp16", "--nms",
                                  "--batch-sizes", "1", "--parity-images", "8"))
    assert result.returncode == 0, brief(result)
    assert statuses(result)["onnx-fp16"] == "built"
    folder = tmp_path / "yolov5n-nms"
    manifest = Manifest.read(folder / "onnx-fp16")
    assert manifest.parity is not None and manifest.parity["violations"] == 0
    facts = ArtifactMetadata.of(manifest).to_dict()
    nms = ArtifactMetadata.of(manifest).model_family()
    images = list_images(VAL_DATA)[:12]
    fp32 = onnx.load(str(folder / "onnx-fp32" / "yolov5n-nms.onnx"))
    fp16 = onnx.load(str(folder / "onnx-fp16" / "yolov5n-nms.onnx"))
    exact, want = detections(fp16, images, 640), detections(fp32, images, 640)
    assert sum(nms.violations(out, facts) for out in exact) == 0
    assert [int((out[0, :, 4] > 0).sum()) for out in exact] == [int((out[0, :, 4] > 0).sum()) for out in want]
    plain = detections(convert_float_to_float16(fp32, keep_io_types=True), images, 640)
    assert sum(nms.violations(out, facts) for out in plain) > 0, "the regions in FP16 keep near-duplicates"
    source = named_nodes(fp32)
    kept = nms_box_nodes(source)
    assert {n.op_type for n in source.graph.node if n.name in kept} >= {"Add", "Mul", "Cast", "Clip"}
    blocked = convert_float_to_float16(source, keep_io_types=True, node_block_list=kept)
    assert sum(nms.violations(out, facts) for out in detections(blocked, images, 640)) > 0, \
        "blocked alone, the converter's casts to FP16 and back between the kept nodes still round the regions"
    exact_again = detections(without_round_trips(blocked, kept), images, 640)
    assert sum(nms.violations(out, facts) for out in exact_again) == 0
