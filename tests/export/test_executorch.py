"""ExecuTorch programs: lowered to XNNPACK at batch 1, what XNNPACK left recorded, the metadata beside them."""

from __future__ import annotations

import json
from pathlib import Path

from yolo_optimize.artifact import Manifest


def test_a_program_passes_parity_and_records_what_xnnpack_did_not_take(built_edge: Path) -> None:
    manifest = Manifest.read(built_edge / "executorch-fp32")
    assert manifest.parity and manifest.parity["passed"] and manifest.parity["tolerance"]["precision"] == "fp32"
    assert manifest.info["xnnpack_partitions"] >= 1
    fallback = manifest.info["fallback"]
    assert "aten.convolution.default" not in fallback and all(count > 0 for count in fallback.values())
    executed = manifest.parity["executed_precision"]
    assert executed == "fp32" if not fallback else executed.startswith(f"fp32 ({sum(fallback.values())} ops outside "
                                                                       "XNNPACK: ")
    beside = json.loads((built_edge / "executorch-fp32" / str(manifest.entry)).with_suffix(".json").read_text())
    assert beside == manifest.metadata and beside["format"] == "executorch" and beside["batch"]["max"] == 1

