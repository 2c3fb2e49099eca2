"""Model facts at the input size an artifact takes: parameters, GFLOPs per image, MACs per layer type, and
the memory traffic a roofline needs.

Counted by ``thop`` on the model every artifact was exported from (fused, as exported), at
the artifact's input size: GFLOPs = 2 x multiply-accumulates, the convention YOLOv5, Ultralytics
and torchvision quote (yolov5n 4.5 at 640, resnet18 3.6 at 224). Layers thop has no rule
for (activations, reshapes) count zero: they move memory, they do few multiply-adds.

Memory traffic is an estimate from the graph, not a measurement: every layer reads its inputs
and weights and writes its outputs once (no reuse between layers through the caches), weights
once per batch. Its elements are counted here; bytes depend on the precision a row runs in.

Counting loads the model in a process of its own (seconds: the family's package is imported
there), so the counts of a built model are kept in the user's cache, keyed by its build record
(whose key changes whenever the model could) and the input size: every later evaluation of the
same model reads them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from yolo_optimize.artifact import Manifest
from yolo_optimize.checkpoint import ModelSource, recorded_source
from yolo_optimize.files import write_atomically
from yolo_optimize.host.environment import user_cache_dir
from yolo_optimize.host.processes import in_own_process
from yolo_optimize.versions import tool_versions


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


def recorded_model_facts(load: Manifest, imgsz: int) -> ModelFacts:
    """The facts of the model a build recorded (``load``: its load node's manifest) at ``imgsz``: from the cache when
    counted before, else counted in a process of its own and cached. Raises RuntimeError when the checkpoint is gone
    or changed."""
    source = recorded_source(load)
    path = _cache_path(load.cache_key, imgsz)
    try:
        return ModelFacts(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):  # not counted yet, or a cache file this version cannot read
        facts = in_own_process(model_facts, source, imgsz)
    try:
        write_atomically(path, json.dumps(asdict(facts), indent=2))
    except OSError:
        pass  # a cache that cannot be written (a read-only home): counted again next time
    return facts


def _cache_path(load_key: str, imgsz: int) -> Path:
    identity = json.dumps({"load": load_key, "imgsz": imgsz, "tools": tool_versions(("torch", "thop"))},
                          sort_keys=True)
    return user_cache_dir() / "facts" / f"{hashlib.sha256(identity.encode()).hexdigest()[:16]}.json"


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
    found: list[tuple[str, float]] = []
    for name, (macs, _, children) in layers.items():
        qualified = f"{prefix}{name}"
        found += _leaves(children, f"{qualified}.") if children else [(qualified, macs)]
    return found


def peak_precision(executed: str) -> str:
    """The precision whose peak bounds a row: ``int8`` for INT8 files, else the float precision it computes in."""
    return "int8" if executed.startswith("int8") else executed.split()[0]
