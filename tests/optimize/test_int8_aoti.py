"""The AOTInductor INT8 recipe takes its activation range from the building CPU: 7 bits without VNNI."""

from __future__ import annotations

import numpy as np
import pytest

from yolo_optimize.building.held_out import ImageSet
from yolo_optimize.building.request import GateConfig
from yolo_optimize.optimize.int8_aoti import AotiInt8, AotiInt8Config

IMGSZ = 32


def activation_ranges(reduce_range: bool) -> set[tuple[int, int]]:
    """(quant_min, quant_max) of every activation quantizer in a small convolution stack's quantized program."""
    import torch

    module = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.SiLU(),
                                 torch.nn.Conv2d(16, 8, 1)).eval()
    unused = GateConfig(ImageSet("unused", ()), None, "unused", 1.0)
    stage = AotiInt8(AotiInt8Config(IMGSZ, (), unused, reduce_range=reduce_range))
    images = [np.random.default_rng(seed).random((1, 3, IMGSZ, IMGSZ), dtype=np.float32) for seed in range(4)]
    program = stage._quantized(module, None, images, warm_up=True)
    quantize = torch.ops.quantized_decomposed.quantize_per_tensor.default
    return {(int(node.args[3]), int(node.args[4])) for node in program.graph.nodes if node.target == quantize}


@pytest.mark.parametrize(("reduce_range", "expected"), [(False, {(0, 255)}), (True, {(0, 127)})])
def test_activations_take_seven_bits_only_where_the_building_cpu_has_no_vnni(reduce_range: bool,
                                                                             expected: set[tuple[int, int]]) -> None:
    assert activation_ranges(reduce_range) == expected
