"""Model facts at the input size an artifact takes: parameters, GFLOPs per image, MACs per layer type, and
the memory traffic a roofline needs.

Counted by ``thop`` on the model every artifact was exported from (fused, as exported), at
the artifact's input size: GFLOPs = 2 x multiply-accumulates, the convention YOLOv5, Ultralytics
and torchvision quote (yolov5n 4.5 at 640, resnet18 3.6 at 224). Layers thop has no rule
for (activations, reshapes) count zero: they move memory, they do few multiply-adds.

Memory traffic is an estimate from the graph, not a measurement: every layer reads its inputs
and weights and writes its outputs once (no reuse between layers through the caches), weights
once per batch. Its elements are counted here; bytes depend on the precision a row runs in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from yolo_optimize.checkpoint import ModelSource


@dataclass(frozen=True)
class ModelFacts:
    imgsz: int
    parameters: int
    gflops_per_image: float
    macs_by_layer_type: dict[str, int]  # leaf module class -> multiply-accumulates per image, largest first
    activation_elements: int  # per image: every layer's inputs and outputs
    weight_elements: int  # per batch: every layer's weights

    def operational_intensity(self, batch: int, element_bytes: int) -> float:
        """Operations per byte moved at ``batch`` images, ``element_bytes`` per element (the estimate above)."""
        moved = (self.activation_elements + self.weight_elements / batch) * element_bytes
        return self.gflops_per_image * 1e9 / moved


def model_facts(source: ModelSource, imgsz: int) -> ModelFacts:
    """Count once per model and input size (a worker process: it loads the model)."""
    import thop
    import torch

    from yolo_optimize.checkpoint import load_model

    model = load_model(source)
    image = torch.zeros(1, 3, imgsz, imgsz)
    activations, weights = _traffic(model, image)
    with torch.no_grad():
        macs, _, layers = thop.profile(model, inputs=(image,), verbose=False, ret_layer_info=True)
    by_type: dict[str, int] = {}
    for name, layer_macs in _leaves(layers):
        kind = type(model.get_submodule(name)).__name__
        by_type[kind] = by_type.get(kind, 0) + int(layer_macs)
    return ModelFacts(imgsz, sum(p.numel() for p in model.parameters()), round(2 * float(macs) / 1e9, 3),
                      dict(sorted(((k, v) for k, v in by_type.items() if v), key=lambda kv: -kv[1])),
                      activations, weights)


def _traffic(model: Any, image: Any) -> tuple[int, int]:
    """(activation elements, weight elements) the leaf layers read and write in one forward pass of ``image``."""
    import torch

    counted = {"activations": 0, "weights": 0}

    def count(module: Any, inputs: tuple[Any, ...], output: Any) -> None:
        tensors = [t for t in (*_flat(inputs), *_flat(output)) if isinstance(t, torch.Tensor)]
        counted["activations"] += sum(t.numel() for t in tensors)
        counted["weights"] += sum(p.numel() for p in module.parameters(recurse=False))

    hooks = [m.register_forward_hook(count) for m in model.modules() if not any(True for _ in m.children())]
    try:
        with torch.no_grad():
            model(image)
    finally:
        for hook in hooks:
            hook.remove()
    return counted["activations"], counted["weights"]


def _flat(value: Any) -> list[Any]:
    return [t for item in value for t in _flat(item)] if isinstance(value, (list, tuple)) else [value]


def _leaves(layers: dict[str, Any], prefix: str = "") -> list[tuple[str, float]]:
    """(qualified name, MACs) of every leaf in thop's nested per-layer result."""
    found = []
    for name, (macs, _, children) in layers.items():
        qualified = f"{prefix}{name}"
        found += _leaves(children, f"{qualified}.") if children else [(qualified, macs)]
    return found
