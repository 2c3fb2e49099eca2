"""What the passes that complete a QDQ graph for ONNX Runtime's integer kernels share (onnxruntime_fusion.py, around
the convolutions; integer_head.py, the detection heads): the graph indexed both ways with the nodes a pass inserts
or removes, the ranges tensors take on calibration images, and the uint8 grid of a range.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

U8_LEVELS = 255


@dataclass
class QdqGraph:
    """The model's nodes indexed both ways, and the nodes this pass inserts before or after existing ones."""

    model: Any
    producer: dict[str, Any] = field(default_factory=dict)
    consumers: dict[str, list[Any]] = field(default_factory=dict)
    initializers: dict[str, Any] = field(default_factory=dict)
    before: dict[str, list[Any]] = field(default_factory=dict)
    after: dict[str, list[Any]] = field(default_factory=dict)
    removed: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        for node in self.model.graph.node:
            self.producer.update({name: node for name in node.output})
            for name in node.input:
                self.consumers.setdefault(name, []).append(node)
        self.initializers = {tensor.name: tensor for tensor in self.model.graph.initializer}

    def array(self, name: str) -> np.ndarray:
        from onnx import numpy_helper

        return numpy_helper.to_array(self.initializers[name])

    def add_initializer(self, name: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        if name not in self.initializers:
            self.initializers[name] = numpy_helper.from_array(value, name)
            self.model.graph.initializer.append(self.initializers[name])
        return name

    def made_by(self, name: str, op_type: str) -> Any:
        node = self.producer.get(name)
        return node if node is not None and node.op_type == op_type else None

    def only_consumer(self, tensor: str, op_type: str) -> Any:
        """The node of ``op_type`` that alone reads ``tensor``, else None."""
        users = self.consumers.get(tensor, [])
        return users[0] if len(users) == 1 and users[0].op_type == op_type else None

    def write_nodes(self) -> None:
        """Put the inserted nodes beside their anchors (the graph stays in topological order), leave out the removed
        ones, and drop the initializers no node reads any more (the float biases, the signed zero points)."""
        nodes = []
        for node in self.model.graph.node:
            if node.name in self.removed:
                continue
            nodes += self.before.pop(node.name, []) + [node] + self.after.pop(node.name, [])
        del self.model.graph.node[:]
        self.model.graph.node.extend(nodes)
        read = {name for node in nodes for name in node.input}
        kept = [tensor for tensor in self.model.graph.initializer if tensor.name in read]
        del self.model.graph.initializer[:]
        self.model.graph.initializer.extend(kept)


def observed_ranges(model: Any, tensors: list[str], feeds: list[dict[str, np.ndarray]],
                     threads: int) -> dict[str, tuple[float, float]]:
    """Mean over the calibration images of each image's min and max of every tensor, widened to hold 0."""
    import onnx
    import onnxruntime as ort

    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    del probe.graph.output[:]
    probe.graph.output.extend(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None)
                              for name in tensors)
    settings = ort.SessionOptions()
    settings.intra_op_num_threads = threads
    session = ort.InferenceSession(probe.SerializeToString(), settings, providers=["CPUExecutionProvider"])
    extremes = np.array([[(value.min(), value.max()) for value in session.run(tensors, feed)] for feed in feeds])
    low, high = extremes.mean(axis=0).T
    return {name: (min(0.0, float(lo)), max(0.0, float(hi))) for name, lo, hi in zip(tensors, low, high)}


def u8_grid(graph: QdqGraph, name: str, low: float, high: float) -> tuple[str, str]:
    scale = max((high - low) / U8_LEVELS, float(np.finfo(np.float32).tiny))
    zero_point = np.clip(np.round(-low / scale), 0, U8_LEVELS)
    return (graph.add_initializer(name + "_scale", np.array(scale, np.float32)),
            graph.add_initializer(name + "_zero_point", np.array(zero_point, np.uint8)))
