"""The modules the families' exports are wrapped in: a 16-bit body that keeps the family's float module in float32,
and SiLU written as a product so that a float16 graph stays float16."""

from __future__ import annotations

import torch

from tests.conftest import WEIGHTS
from yolo_optimize.checkpoint import load_model, resolve_source
from yolo_optimize.families import family_named
from yolo_optimize.families.modules import HalfBody, ProductSiLU, with_product_silu


def test_a_float16_body_of_yolov5n_keeps_its_head_in_float32_and_computes_what_the_model_computes() -> None:
    model = load_model(resolve_source(str(WEIGHTS))).eval()
    images = torch.rand(1, 3, 320, 320)
    with torch.no_grad():
        expected = model(images)
        head = family_named("yolov5").float_module(model)
        half = HalfBody(with_product_silu(model), torch.float16, head).eval()
        found = half(images)
    assert head == "model.model.24" and not any(isinstance(m, torch.nn.SiLU) for m in half.modules())
    assert sum(isinstance(m, ProductSiLU) for m in half.modules()) == 57
    dtypes = {name: p.dtype for name, p in half.model.named_parameters()}
    assert all((dtype == torch.float32) == name.startswith(f"{head}.") for name, dtype in dtypes.items())
    assert found.dtype == torch.float32 and found.shape == expected.shape
    scores = (found[..., 4:] - expected[..., 4:]).abs()
    assert float(scores.max()) < 0.02 and float(scores.flatten().quantile(0.999)) < 0.005
