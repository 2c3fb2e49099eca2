"""INT8 OpenVINO IR with NNCF (the recipe in optimize/nncf_int8.py); OpenVINO picks its own int8 kernels per CPU."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from yolo_optimize.export.openvino import embed_metadata
from yolo_optimize.families.base import Family
from yolo_optimize.optimize.calibration import Int8Config
from yolo_optimize.optimize.nncf_int8 import NncfInt8


@dataclass(frozen=True)
class OpenVinoInt8Config(Int8Config):
    precision: str = "int8"


class OpenVinoInt8(NncfInt8):
    name = "openvino-int8"
    revision = 4  # 2: Detect output convs in float; 3: the gate's bootstrap interval; 4: the gate's metric per task
    tools = ("openvino", "nncf")
    target = "openvino"

    def read(self, path: Path) -> Any:
        import openvino as ov

        return ov.Core().read_model(str(path))

    def float_ops(self, family: Family, model: Any) -> list[str]:
        return family.openvino_float_ops(model)

    def save(self, model: Any, path: Path, metadata: dict[str, Any]) -> None:
        import openvino as ov

        embed_metadata(model, metadata)
        path.parent.mkdir(parents=True, exist_ok=True)
        ov.save_model(model, str(path), compress_to_fp16=False)

    def outputs(self, model: Any, inputs: list[Any]) -> list[np.ndarray]:
        return [np.asarray(model(x)[0]) for x in inputs]
