"""Operations counted from ONNX Runtime's profile only where it records the weight's shape."""

from __future__ import annotations

import pytest

from yolo_optimize.runtime.runners.onnxruntime_profile import _gflops


def test_operations_are_counted_only_where_the_profile_reports_the_weight() -> None:
    """Shapes as ONNX Runtime 1.32's profile recorded them for yolov5n's first convolution, float and int8."""
    float_conv = {"op_name": "Conv", "input_type_shape": [{"float": [1, 3, 640, 640]}, {"float": [16, 3, 6, 6]},
                                                          {"float": [16]}],
                  "output_type_shape": [{"float": [1, 16, 320, 320]}]}
    assert _gflops(float_conv) == pytest.approx(2 * 16 * 3 * 6 * 6 * 320 * 320 / 1e9)
    prepacked_int8 = {"op_name": "QLinearConv",  # channels-last, its weight prepacked and left out of the shapes
                      "input_type_shape": [{"uint8": [1, 640, 640, 3]}, {"float": []}, {"uint8": []}, {"float": [16]},
                                           {"int8": [16]}, {"float": []}, {"uint8": []}, {"int32": [16]}],
                      "output_type_shape": [{"uint8": [1, 320, 320, 16]}]}
    assert _gflops(prepacked_int8) is None
