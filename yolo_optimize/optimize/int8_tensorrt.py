"""INT8 for TensorRT: an explicitly quantized ONNX graph (Q/DQ) of the only form TensorRT 11 builds INT8 from.

TensorRT's explicit quantization takes symmetric, signed int8 Q/DQ pairs (zero points 0) for
activations and weights and keeps biases in float; implicit calibrators are gone in 11. The graph
is written by ONNX Runtime's ``quantize_static`` in that form: Q/DQ on the inputs of the convolutions only
(NVIDIA's recommended placement), per-channel weights, activation ranges at the 99.999th percentile of
their absolute values over the calibration images (histograms taken a few images at a time and merged, so
memory stays bounded: otherwise ONNX Runtime holds every image's activations at once), what the family keeps
in float (a detector's Detect head) excluded, and gated like every INT8 artifact: the Q/DQ graph runs in
ONNX Runtime on the CPU and is scored with the family's metric on the gate set before any engine is built
from it. The choice is measured (bench/archive/int8_recipes/onnx_int8_routes.py, README "Which INT8 ONNX recipe").
NNCF, the project's other INT8 tool, cannot write it: its CPU hardware configuration refuses signed
activations (``signedness_to_force``) and makes non-negative tensors unsigned, which TensorRT rejects.
"""

from __future__ import annotations

import contextlib
import io
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from yolo_optimize.building.gate import Gate, GateRecord
from yolo_optimize.building.stage import (
    REFERENCE,
    SOURCE,
    Stage,
    StageContext,
    StageOutput,
    recorded_float_part,
)
from yolo_optimize.metadata import ArtifactMetadata
from yolo_optimize.optimize.calibration import (
    Int8Config,
    calibration_inputs,
    candidate_manifest,
)
from yolo_optimize.optimize.int8_onnx import float_nodes
from yolo_optimize.optimize.onnx_io import save_onnx

if TYPE_CHECKING:
    from yolo_optimize.building.request import BuildRequest

ROUTE = ("ONNX Runtime quantize_static: symmetric signed int8 on the convolutions' inputs, per-channel weights, "
         "99.999th-percentile ranges, float bias")
RANGES = "percentile:99.999"  # how activation ranges are chosen (quantize_symmetric);
#                                bench/archive/int8_recipes/onnx_int8_routes.py measured min-max, entropy and
#                                percentiles: this one lost least on both image sets
QUANTIZED_OPS = ("Conv",)  # Q/DQ on the convolutions' inputs only: NVIDIA's recommended placement for TensorRT
#                             (weighted layers' inputs); SiLU, Concat, Add, MaxPool and Resize stay in float
HELD_IMAGES = 4  # calibration images whose every activation is held at once: ONNX Runtime keeps them all by
#                  default, which for yolov5n at 640 exhausts 24 GiB before 128 images
NOTE = "Q/DQ for TensorRT explicit quantization: symmetric signed int8 activations and weights, float bias"


@dataclass(frozen=True)
class TensorRTInt8Config(Int8Config):
    precision: str = "int8"


class TensorRTInt8Qdq(Stage):
    """The Q/DQ ONNX a TensorRT INT8 engine is built from (an intermediate: not a CPU deployment target)."""

    name = "onnx-int8-tensorrt"
    revision = 2  # 2: Q/DQ on the convolutions' inputs only, 99.999th-percentile ranges (1: every op, min-max)
    inputs = (SOURCE, REFERENCE)
    tools = ("onnx", "onnxruntime")
    target = "onnx"  # ONNX Runtime runs it for its gate and its parity check
    config: TensorRTInt8Config

    @classmethod
    def planned(cls, request: BuildRequest, precision: str) -> TensorRTInt8Qdq:
        return cls(TensorRTInt8Config(request.imgsz, request.calib_images, request.int8_gate))

    def run(self, ctx: StageContext) -> StageOutput:
        import onnx

        parent = ctx.manifest(SOURCE)
        entry = str(parent.entry)
        inherited = ArtifactMetadata.of(parent)
        family = inherited.model_family()
        head = float_nodes(onnx.load(str(ctx.entry(SOURCE))), recorded_float_part(parent))
        images = calibration_inputs(family, self.config.calib_images, self.config.imgsz, inherited.takes)
        metadata = replace(inherited, precision="int8", kept_in_float=head).with_facts({"quantization": NOTE})
        gate = Gate(self.config.gate.images, family, self.config.imgsz, ctx.threads)
        try:
            record = GateRecord(self.config.gate, gate.score(ctx.inputs[SOURCE], parent), gate)
            quantize_symmetric(ctx.entry(SOURCE), ctx.out_dir / entry, images, head, metadata)
            candidate = candidate_manifest(parent, node=self.name, metadata=metadata)
            record.add(ROUTE, gate.score(ctx.out_dir, candidate))
        finally:
            gate.close()
        record.require_pass()
        return StageOutput(entry=entry, metadata=metadata.to_dict(),
                           info={"gate": record.result(self.config.calib_images), "kept_in_float": head})


def quantize_symmetric(source: Path, out: Path, images: list[np.ndarray], float_nodes: list[str],
                       metadata: ArtifactMetadata, ranges: str = RANGES,
                       op_types: tuple[str, ...] | None = QUANTIZED_OPS) -> None:
    """Write ``source`` as a TensorRT-ready Q/DQ graph to ``out``, calibrated on ``images``, ``float_nodes`` kept.

    ``ranges`` is how an activation's range is chosen from its calibration values: ``minmax``, ``entropy``
    (the threshold minimizing the KL divergence of the quantized histogram) or ``percentile:P`` (the P-th
    percentile of the absolute values). Every method runs on a few images at a time (``HELD_IMAGES``): the
    histograms merge across chunks, the raw activations are dropped after each. ``op_types``: the operators whose
    inputs are quantized (None: every operator ONNX Runtime can quantize)."""
    import onnx
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Images(CalibrationDataReader):
        """The calibration images, served in the ranges ONNX Runtime's strided calibration asks for."""

        def __init__(self) -> None:
            self.set_range(0, len(images))

        def __len__(self) -> int:
            return len(images)

        def set_range(self, start_index: int, end_index: int) -> None:
            self.remaining = iter(images[start_index:end_index])

        def get_next(self) -> dict[str, np.ndarray] | None:
            found = next(self.remaining, None)
            return None if found is None else {input_name: found}

    stride = max(size for size in range(1, HELD_IMAGES + 1) if len(images) % size == 0)  # it must divide the count
    name, _, percentile = ranges.partition(":")
    method = {"minmax": CalibrationMethod.MinMax, "entropy": CalibrationMethod.Entropy,
              "percentile": CalibrationMethod.Percentile}[name]
    options = {"CalibPercentile": float(percentile)} if percentile else {}

    input_name = onnx.load(str(source), load_external_data=False).graph.input[0].name
    with tempfile.TemporaryDirectory(prefix="yolo-optimize-qdq-") as work:
        written = Path(work) / out.name
        with contextlib.redirect_stdout(io.StringIO()):  # the histogram calibrators print their progress
            quantize_static(str(source), str(written), Images(), quant_format=QuantFormat.QDQ,
                            activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, per_channel=True,
                            nodes_to_exclude=float_nodes, calibrate_method=method,
                            op_types_to_quantize=list(op_types) if op_types else None,
                            extra_options={"ActivationSymmetric": True, "WeightSymmetric": True,
                                           "QuantizeBias": False, "CalibStridedMinMax": stride, **options})
        save_onnx(onnx.load(str(written)), out, metadata)
