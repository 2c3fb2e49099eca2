"""The split decode made one elementwise chain (export/decode_chain.py): on yolov5n's real export, on a head in
yolov5's own layout, and on a split it must leave alone."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from tests.conftest import VAL_DATA
from yolo_optimize.export.decode_chain import chain_decodes
from yolo_optimize.families import family_named
from yolo_optimize.images import list_images


def outputs(model: onnx.ModelProto, feed: dict[str, np.ndarray]) -> np.ndarray:
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.log_severity_level = 1, 3
    found: np.ndarray = ort.InferenceSession(model.SerializeToString(), options).run(None, feed)[0]
    return found


def test_yolov5ns_three_decodes_become_chains_giving_its_rows_on_real_images(built: Path) -> None:
    """No split is left, no constant as large as a level's output is added, and the rows on two coco images are
    the export's to a thousandth of a pixel."""
    source = built / "onnx-fp32" / "yolov5n.onnx"
    chained, rewritten = chain_decodes(onnx.load(str(source)))
    onnx.checker.check_model(chained)
    assert rewritten == 3
    before, after = (Counter(node.op_type for node in model.graph.node) for model in (onnx.load(str(source)), chained))
    assert before["Split"] == 3 and after["Split"] == 0 and after["Concat"] == before["Concat"] - 3
    assert max(np.prod(tensor.dims) for tensor in chained.graph.initializer if "chain" in tensor.name) <= 80 * 85
    family = family_named("yolov5")
    pixels = [family.preprocess(path, 640).pixels for path in list_images(VAL_DATA)[:2]]
    images = {"images": np.stack([p.transpose(2, 0, 1) for p in pixels]).astype(np.float32) / 255}
    want, got = outputs(onnx.load(str(source)), images), outputs(chained, images)
    assert got.shape == want.shape == (2, 25200, 85)
    assert np.abs(got - want).max() < 1e-3


def head(parts: list[tuple[str, float | np.ndarray]], widths: list[int], shape: list[int]) -> onnx.ModelProto:
    """``Sigmoid -> Split`` on the last axis into ``widths``, each part one ``(op, constant)`` or none, ``Concat``."""
    constants = [numpy_helper.from_array(np.array(widths, np.int64), "widths")]
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]),
             helper.make_node("Split", ["s", "widths"], [f"part{i}" for i in range(len(widths))], axis=-1)]
    concatenated = []
    for i, (op, constant) in enumerate(parts):
        if not op:
            concatenated.append(f"part{i}")
            continue
        constants.append(numpy_helper.from_array(np.asarray(constant, np.float32), f"k{i}"))
        nodes.append(helper.make_node(op, [f"part{i}", f"k{i}"], [f"y{i}"]))
        concatenated.append(f"y{i}")
    nodes.append(helper.make_node("Concat", concatenated, ["y"], axis=-1))
    graph = helper.make_graph(nodes, "head", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], constants)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_a_head_in_yolov5s_own_layout_is_chained_to_the_same_values() -> None:
    """``[B, anchors, H, W, outputs]``, its grid varying along H and W and its anchors along the anchors' axis."""
    rng = np.random.default_rng(0)
    grid = rng.random((1, 1, 4, 5, 2)).astype(np.float32) * 10
    anchors = rng.random((1, 3, 1, 1, 2)).astype(np.float32) * 50
    model = head([("Add", grid), ("Mul", anchors), ("", 0.0)], [2, 2, 3], [2, 3, 4, 5, 7])
    x = {"x": rng.normal(size=(2, 3, 4, 5, 7)).astype(np.float32) * 4}
    want = outputs(model, x)
    chained, rewritten = chain_decodes(model)
    assert rewritten == 1 and not [node for node in chained.graph.node if node.op_type in ("Split", "Concat")]
    assert np.allclose(outputs(chained, x), want, rtol=1e-5, atol=1e-4)


def test_a_part_that_is_no_quadratic_of_the_sigmoid_leaves_the_head_as_it_was() -> None:
    model = head([("Pow", 3.0), ("Mul", 2.0)], [2, 2], [1, 6, 4])
    written = model.SerializeToString()
    chained, rewritten = chain_decodes(model)
    assert rewritten == 0 and chained.SerializeToString() == written
