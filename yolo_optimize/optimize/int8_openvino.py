"""INT8 OpenVINO IR with NNCF: MIXED preset (symmetric weights, asymmetric activations), Detect head in float.

When the accuracy gate fails, NNCF's own accuracy-aware route
(``quantize_with_accuracy_control``) reverts the most harmful quantizers until the drop fits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from yolo_optimize.export.openvino import embed_metadata
from yolo_optimize.optimize.calibration import Gate, GateRecord, Int8Config, calibration_inputs, candidate_manifest
from yolo_optimize.optimize.head import openvino_head_ops
from yolo_optimize.stage import Stage, StageContext, StageOutput

PARENT = "openvino-fp32"
ACCURACY_CONTROL_ITERATIONS = 8  # these two bound the time the accuracy-aware route may take:
RANKING_IMAGES = 32  # NNCF re-validates once per quantizer group (about 70 for yolov5) on this many images


@dataclass(frozen=True)
class OpenVinoInt8Config(Int8Config):
    precision: str = "int8"


class OpenVinoInt8(Stage):
    name = "openvino-int8"
    revision = 2  # 2: the Detect output convolutions stay in float too
    tools = ("openvino", "nncf")
    target = "openvino"

    def run(self, ctx: StageContext) -> StageOutput:
        import nncf
        import openvino as ov

        parent = ctx.parent_manifest(PARENT)
        entry = str(parent.entry)
        model = ov.Core().read_model(str(ctx.parent_entry(PARENT)))
        head = openvino_head_ops(model)
        calibration = nncf.Dataset(calibration_inputs(self.config.calib_images, self.config.imgsz))
        settings: dict[str, Any] = {"preset": nncf.QuantizationPreset.MIXED, "subset_size": len(self.config.calib_images),
                                    "ignored_scope": nncf.IgnoredScope(names=head, validate=False)}
        gate = Gate(self.config.gate, self.config.imgsz, ctx.threads)
        try:
            record = GateRecord(self.config.gate, gate.map_of(ctx.parents[PARENT], parent))
            quantized = nncf.quantize(model, calibration, **settings)
            if not record.add("NNCF MIXED, Detect head in float", self._score(quantized, ctx, gate, entry)):
                quantized = self._with_accuracy_control(model, calibration, gate, settings)
                record.add("accuracy-aware: nncf.quantize_with_accuracy_control", self._score(quantized, ctx, gate, entry))
        finally:
            gate.close()
        record.require_pass()
        metadata = {**parent.metadata, "precision": "int8", "kept_in_float": head}
        self._save(quantized, ctx, entry, metadata)
        return StageOutput(entry=entry, metadata=metadata, info={"gate": record.result(), "kept_in_float": head})

    def _save(self, model: Any, ctx: StageContext, entry: str, metadata: dict[str, Any]) -> None:
        import openvino as ov

        embed_metadata(model, metadata)
        (ctx.out_dir / entry).parent.mkdir(parents=True, exist_ok=True)
        ov.save_model(model, str(ctx.out_dir / entry), compress_to_fp16=False)

    def _score(self, quantized: Any, ctx: StageContext, gate: Gate, entry: str) -> float:
        """Save the candidate into the staging folder and measure it like any artifact."""
        manifest = candidate_manifest(ctx.parent_manifest(PARENT), node=self.name, precision="int8", entry=entry)
        self._save(quantized, ctx, entry, manifest.metadata)
        return gate.map_of(ctx.out_dir, manifest)

    def _with_accuracy_control(self, model: Any, calibration: Any, gate: Gate, settings: dict[str, Any]) -> Any:
        import nncf
        from nncf.quantization.advanced_parameters import AdvancedAccuracyRestorerParameters

        def validate(compiled: Any, inputs: Any) -> float:
            outputs = [np.asarray(compiled(x)[0]) for x in inputs]
            from yolo_optimize.evaluate.accuracy import detections

            return gate.map_of_outputs([d for output in outputs for d in detections(output)])

        return nncf.quantize_with_accuracy_control(
            model, calibration, nncf.Dataset(gate.inputs()), validate, max_drop=self.config.gate.max_map_drop / 100,
            drop_type=nncf.DropType.ABSOLUTE, **settings,
            advanced_accuracy_restorer_parameters=AdvancedAccuracyRestorerParameters(
                max_num_iterations=ACCURACY_CONTROL_ITERATIONS, ranking_subset_size=RANKING_IMAGES))
