"""Saving ONNX models the way every ONNX pass here must: metadata embedded, one file, runtime-loadable."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from yolo_optimize.metadata import ArtifactMetadata

if TYPE_CHECKING:
    import onnx

MAX_IR_VERSION = 10  # onnxruntime 1.2x refuses newer IR versions that recent onnx writes by default


def save_onnx(model: onnx.ModelProto, path: Path, metadata: ArtifactMetadata) -> None:
    """Embed ``metadata`` as ``metadata_props`` (JSON values), check the graph, save one self-contained file. onnx is
    imported here, not with the module: the planner imports every stage, and a cached build saves nothing."""
    import onnx

    del model.metadata_props[:]
    for key, value in metadata.as_strings().items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    model.ir_version = min(model.ir_version, MAX_IR_VERSION)
    onnx.checker.check_model(model)
    onnx.save(model, str(path), save_as_external_data=False)
