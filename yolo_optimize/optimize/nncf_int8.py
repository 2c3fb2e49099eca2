"""INT8 with NNCF, one recipe for both backends it quantizes (an ONNX graph or an OpenVINO IR).

The recipe: the MIXED preset (symmetric per-channel weights, asymmetric activations),
ranges from every calibration image, NNCF's fast bias correction, and what the family keeps
in float (its float module, as the export recorded it in the backend's names; for ONNX a detector's output
convolutions and the decode after them); a backend may change the ranges, the bias correction and what stays in float
(OpenVINO's, optimize/int8_openvino.py). The candidate is scored on the gate set with the family's
metric (building/gate.py) through the same runner as its FP32 parent; when the drop is over the limit, NNCF's
accuracy-aware route (``quantize_with_accuracy_control``) reverts the most harmful quantizers until the drop on the
labelled calibration images fits or its iterations run out, and the gate judges the result on its own images.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from yolo_optimize.building.gate import Gate, GateRecord
from yolo_optimize.building.held_out import ImageSet
from yolo_optimize.building.stage import (
    REFERENCE,
    SOURCE,
    Stage,
    StageContext,
    StageOutput,
    recorded_float_part,
)
from yolo_optimize.families.base import Family
from yolo_optimize.metadata import ArtifactMetadata
from yolo_optimize.optimize.calibration import (
    Int8Config,
    calibration_inputs,
    candidate_manifest,
)

ROUTE = "NNCF MIXED, fast bias correction"
ACCURACY_CONTROL_ROUTE = "accuracy-aware: nncf.quantize_with_accuracy_control"
ACCURACY_CONTROL_ITERATIONS = 8  # these two bound the time the accuracy-aware route may take:
RANKING_IMAGES = 32  # NNCF re-validates once per quantizer group (about 70 for yolov5) on this many images
NO_TUNING_IMAGES = ("the calibration images have no labels to tune on (the gate's images are never tuned on): give "
                    "--calib-data labels, or leave --gate-data out to hold a labelled part of it out")


class NncfInt8(Stage):
    """An INT8 stage quantizing its FP32 parent with NNCF; subclasses read, save and run one backend's models."""

    inputs = (SOURCE, REFERENCE)
    config: Int8Config
    route = ROUTE  # the first route's name in the gate record
    fast_bias_correction = True  # False: NNCF's BiasCorrection, slower to build, for every layer

    def run(self, ctx: StageContext) -> StageOutput:
        import nncf

        parent = ctx.manifest(SOURCE)
        inherited = ArtifactMetadata.of(parent)
        family = inherited.model_family()
        model, rewrites = self.rewritten(self.read(ctx.entry(SOURCE)))
        head = self.float_ops(model, recorded_float_part(parent))
        facts = {"kept_in_float": head, **rewrites, **self.cpu_metadata()}
        metadata = replace(inherited, precision="int8").with_facts(facts)
        feeds = [self.model_input(x) for x in calibration_inputs(family, self.config.calib_images, self.config.imgsz,
                                                                  inherited.takes)]
        settings = {"preset": nncf.QuantizationPreset.MIXED, "subset_size": len(self.config.calib_images),
                    "fast_bias_correction": self.fast_bias_correction,
                    "ignored_scope": nncf.IgnoredScope(names=head, validate=False)}
        gate = Gate(self.config.gate.images, family, self.config.imgsz, ctx.threads)
        try:
            record = GateRecord(self.config.gate, gate.score(ctx.inputs[SOURCE], parent), gate)
            route, advanced, candidate = self._calibrated(model, feeds, settings)
            quantized = self.for_runtime(candidate, feeds, ctx.threads)
            if not record.add(route, self._score(quantized, ctx, gate, metadata)):
                tuning = self.config.gate.tuning
                if tuning is None:
                    record.skip(ACCURACY_CONTROL_ROUTE, NO_TUNING_IMAGES)
                else:
                    candidate = self._with_accuracy_control(model, nncf.Dataset(feeds), tuning, settings, advanced,
                                                            ctx, family)
                    record.tuned = tuning
                    quantized = self.for_runtime(candidate, feeds, ctx.threads)
                    record.add(ACCURACY_CONTROL_ROUTE, self._score(quantized, ctx, gate, metadata))
        finally:
            gate.close()
        record.require_pass()
        self.save(quantized, ctx.out_dir / str(parent.entry), metadata)
        return StageOutput(entry=parent.entry, metadata=metadata.to_dict(),
                           info={"gate": record.result(self.config.calib_images), **facts})

    def _calibrated(self, model: Any, feeds: list[Any], settings: dict[str, Any]) -> tuple[str, Any, Any]:
        """(route, its advanced parameters, the quantized model) of the first of ``recipes`` NNCF can calibrate; a
        later one only when the one before raises a ValueError (numpy's histogram on a degenerate activation range:
        a random-weights model's exploding activations), named with why."""
        import nncf

        *preferred, last_resort = self.recipes()
        failed = ""
        for route, advanced in preferred:
            try:
                quantized = nncf.quantize(model, nncf.Dataset(feeds), **settings, advanced_parameters=advanced)
                return f"{route} ({failed})" if failed else route, advanced, quantized
            except ValueError as err:
                failed = f"{failed}; " if failed else ""
                failed += f"{route} could not calibrate: {err}"
        route, advanced = last_resort
        quantized = nncf.quantize(model, nncf.Dataset(feeds), **settings, advanced_parameters=advanced)
        return f"{route} ({failed})" if failed else route, advanced, quantized

    def _score(self, quantized: Any, ctx: StageContext, gate: Gate, metadata: ArtifactMetadata) -> Any:
        """Save the candidate into the staging folder and measure it like any artifact (as it will run: ``metadata``
        says how)."""
        manifest = candidate_manifest(ctx.manifest(SOURCE), node=self.name, metadata=metadata)
        self.save(quantized, ctx.out_dir / str(manifest.entry), metadata)
        return gate.score(ctx.out_dir, manifest)

    def _with_accuracy_control(self, model: Any, calibration: Any, tuning: ImageSet, settings: dict[str, Any],
                               advanced: Any, ctx: StageContext, family: Family) -> Any:
        """NNCF's accuracy-aware route, validated on the ``tuning`` images (the calibration part, never the gate's):
        the gate then judges what it produced on images it never tuned against."""
        import nncf
        from nncf.quantization.advanced_parameters import (
            AdvancedAccuracyRestorerParameters,
        )

        scorer = Gate(tuning, family, self.config.imgsz, ctx.threads)
        try:
            scorer.metric.set_reference(scorer.score(ctx.inputs[SOURCE], ctx.manifest(SOURCE)))

            def validate(candidate: Any, inputs: Any) -> float:
                return scorer.score_raw(self.outputs(candidate, list(inputs))).value

            spec = ArtifactMetadata.of(ctx.manifest(SOURCE)).takes
            return nncf.quantize_with_accuracy_control(
                model, calibration, nncf.Dataset([self.model_input(x) for x in scorer.inputs(spec)]), validate,
                max_drop=self.config.gate.max_map_drop / 100, drop_type=nncf.DropType.ABSOLUTE, **settings,
                advanced_quantization_parameters=advanced,
                advanced_accuracy_restorer_parameters=AdvancedAccuracyRestorerParameters(
                    max_num_iterations=ACCURACY_CONTROL_ITERATIONS, ranking_subset_size=RANKING_IMAGES))
        finally:
            scorer.close()

    def recipes(self) -> list[tuple[str, Any]]:
        """(route name, ``AdvancedQuantizationParameters`` or None for NNCF's defaults) to calibrate with, in order
        (``_calibrated``); the accuracy-aware route reuses the one that worked.

        ``nncf.quantize`` calls them ``advanced_parameters`` and ``quantize_with_accuracy_control``
        ``advanced_quantization_parameters``, hence a typed object rather than keyword arguments.
        """
        return [(self.route, None)]

    def for_runtime(self, quantized: Any, feeds: list[Any], threads: int) -> Any:
        """What this backend's runtime needs done to NNCF's model to run it in int8 (nothing, unless overridden);
        ``feeds`` are the calibration items."""
        return quantized

    def cpu_metadata(self) -> dict[str, Any]:
        """What the artifact records about the CPU its arithmetic was chosen for."""
        return {}

    def rewritten(self, model: Any) -> tuple[Any, dict[str, Any]]:
        """The FP32 model as it is quantized (an exact rewrite for this backend's int8 kernels, unless overridden)
        and what was rewritten, for the metadata."""
        return model, {}

    def model_input(self, images: np.ndarray) -> Any:
        """One calibration item as NNCF's backend feeds it to the model."""
        return images

    @abstractmethod
    def read(self, path: Path) -> Any: ...

    @abstractmethod
    def float_ops(self, model: Any, float_part: list[str]) -> list[str]:
        """The ops of this backend's model kept in float, from the ``float_part`` its export recorded (the family's
        float module in this backend's names)."""

    @abstractmethod
    def save(self, model: Any, path: Path, metadata: ArtifactMetadata) -> None: ...

    @abstractmethod
    def outputs(self, model: Any, inputs: list[Any]) -> list[np.ndarray]:
        """Raw outputs of a model NNCF hands to validation (an in-memory candidate, not a saved file)."""
