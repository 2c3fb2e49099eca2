"""onnx-int8's recipe: which activation ranges NNCF is asked for, by how many images calibrate them."""

from __future__ import annotations

import pytest
from nncf.quantization.advanced_parameters import AdvancedQuantizationParameters
from nncf.quantization.range_estimator import RangeEstimatorParametersSet as Ranges

from tests.conftest import CALIB_DATA
from yolo_optimize.building.held_out import ImageSet
from yolo_optimize.building.request import GateConfig
from yolo_optimize.optimize.int8_onnx import HISTOGRAM_FROM_IMAGES, HISTOGRAM_ROUTE, OnnxInt8, OnnxInt8Config
from yolo_optimize.optimize.nncf_int8 import ROUTE

GATE = GateConfig(ImageSet.of(CALIB_DATA, 8), None, "the first 8", 1.0)


@pytest.mark.parametrize(("images", "routes"), [(HISTOGRAM_FROM_IMAGES - 1, [ROUTE]),
                                                (HISTOGRAM_FROM_IMAGES, [HISTOGRAM_ROUTE, ROUTE])])
def test_histogram_ranges_from_enough_calibration_images_and_min_max_ranges_below_and_as_the_fallback(
        images: int, routes: list[str]) -> None:
    """bench/archive/int8_recipes/onnx_int8_ranges.py: histograms of fewer images lost more on the held-out gate than
    min-max ranges. Both recipes keep the overflow fix of 7-bit weights and one grid per activation tensor."""
    recipes = OnnxInt8(OnnxInt8Config(640, tuple(f"{i}.jpg" for i in range(images)), GATE, 7)).recipes()
    assert [route for route, _ in recipes] == routes
    nncf_default = AdvancedQuantizationParameters().activations_range_estimator_params
    assert [advanced.activations_range_estimator_params for _, advanced in recipes] == [
        Ranges.HISTOGRAM, nncf_default][2 - len(recipes):]
    assert all(advanced.overflow_fix.value == "enable" for _, advanced in recipes)
    assert not any(advanced.activations_quantization_params.per_channel for _, advanced in recipes)
