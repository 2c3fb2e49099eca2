"""The artifact metadata as a typed record: what a build wrote, and what earlier versions wrote, is read into it and
written back key for key, in the same order, so files, manifests and cache keys do not change."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from yolo_optimize.artifact import MANIFEST, Manifest
from yolo_optimize.metadata import ArtifactMetadata, BatchRange

# What the first release wrote (its loading.artifact_metadata): no family, no task-specific input description
OLDER = {
    "producer": "yolo-optimize 0.1.0", "model": "yolov5n", "architecture": None, "pretrained": True, "task": "detect",
    "names": ["person", "bicycle"], "nc": 2, "stride": 32, "strides": [8, 16, 32], "parameters": 1872157,
    "gflops_at_640": 4.5, "format": "onnx", "precision": "fp32", "imgsz": [640, 640], "batch": {"min": 1, "max": None},
    "input": {"name": "images", "layout": "NCHW", "dtype": "float32",
              "preprocess": "letterbox to imgsz (pad 114), RGB, /255"},
    "output": {"name": "output0", "shape": ["batch", "anchors", 7], "layout": "xywh, objectness, classes"},
}


def written_back(data: dict[str, Any]) -> str:
    """The JSON of ``data`` after a trip through the record, keys in the order it gives them."""
    return json.dumps(ArtifactMetadata.from_dict(data).to_dict())


def test_every_manifest_of_a_build_writes_its_metadata_back_exactly(built: Path) -> None:
    """The artifacts' and the intermediate nodes' (the load node's facts, the raw ONNX export's), as read from
    manifests (keys sorted at every level)."""
    manifests = sorted(built.glob(f"*/{MANIFEST}")) + sorted(built.glob(f".cache/*/{MANIFEST}"))
    assert len(manifests) >= 8
    for path in manifests:
        metadata = Manifest.read(path.parent).metadata
        assert written_back(metadata) == json.dumps(metadata), path.parent.name


def test_the_metadata_a_file_embeds_is_written_back_byte_for_byte(built: Path) -> None:
    """TorchScript keeps the whole dict as one JSON text, in the order the build wrote its keys."""
    with zipfile.ZipFile(built / "torchscript-fp32" / "yolov5n.torchscript") as archive:
        (name,) = [n for n in archive.namelist() if n.endswith("extra/config.txt")]
        embedded = archive.read(name).decode()
    assert written_back(json.loads(embedded)) == embedded


def test_a_built_artifacts_metadata_reads_as_typed_fields(built: Path) -> None:
    metadata = ArtifactMetadata.of(Manifest.read(built / "openvino-fp16"))
    assert (metadata.family, metadata.task, metadata.format, metadata.precision) == ("yolov5", "detect", "openvino",
                                                                                        "fp16")
    assert metadata.names and metadata.names[0] == "person" and metadata.pretrained is True
    assert metadata.side == 640 and metadata.batch == BatchRange(min=1, max=None)
    assert metadata.input is not None and not metadata.input.prepared and metadata.input.dtype == "float32"
    assert metadata.compile_config == {"INFERENCE_PRECISION_HINT": "f32"}
    assert metadata.extra["stride"] == 32 and metadata.model_family().name == "yolov5"


def test_an_older_metadata_is_written_back_exactly_and_says_it_has_no_family() -> None:
    metadata = ArtifactMetadata.from_dict(OLDER)
    assert written_back(OLDER) == json.dumps(OLDER)
    assert metadata.family is None and metadata.kept_in_float is None and metadata.compile_config is None
    assert metadata.extra["gflops_at_640"] == 4.5 and metadata.side == 640
    with pytest.raises(ValueError, match="no model family"):
        metadata.model_family()


def test_a_metadata_without_an_input_takes_float32_nchw_as_the_pytorch_baseline_does() -> None:
    baseline = ArtifactMetadata.from_dict({"family": "yolov5", "names": ["person"]})
    assert baseline.input is None and baseline.takes.dtype == "float32" and not baseline.takes.prepared
    assert baseline.to_dict() == {"family": "yolov5", "names": ["person"]}, "nothing added on the way back"


def test_a_stages_facts_keep_the_place_of_keys_already_there_and_follow_the_others() -> None:
    quantized = ArtifactMetadata.from_dict(OLDER).with_facts({"precision": "int8", "kept_in_float": ["head"],
                                                              "requires_vnni": False, "weight_bits": 7})
    assert list(quantized.to_dict()) == [*OLDER, "kept_in_float", "requires_vnni", "weight_bits"]
    assert quantized.precision == "int8" and quantized.requires_vnni is False and quantized.extra["weight_bits"] == 7
