"""Cache keys: a parameter change reaches exactly the nodes that depend on it."""

from __future__ import annotations

from dataclasses import replace

from tests.conftest import VAL_DATA, WEIGHTS
from yolo_optimize.checkpoint import resolve_source
from yolo_optimize.dag import cache_keys
from yolo_optimize.images import list_images
from yolo_optimize.optimize.simplify import OnnxSimplify
from yolo_optimize.pipeline import BuildRequest, plan

REQUEST = BuildRequest(source=resolve_source(str(WEIGHTS)), targets=("torchscript", "onnx", "openvino", "tensorrt"),
                       precisions=("fp32", "fp16"), imgsz=640, batch_sizes=(1, 8), opset=18, device="cpu",
                       parity_images=tuple(str(p) for p in list_images(VAL_DATA)[:4]))


def keys(request: BuildRequest) -> dict[str, str]:
    return cache_keys(plan(request), request.source)


def changed(other: BuildRequest) -> set[str]:
    before, after = keys(REQUEST), keys(other)
    return {name for name in before if before[name] != after[name]}


def test_plan_declares_onnx_as_the_parent_of_openvino_and_tensorrt() -> None:
    parents = {node.name: node.parents for node in plan(REQUEST)}
    assert parents["openvino-fp32"] == ("onnx-fp32", "reference")
    assert parents["tensorrt-fp16"] == ("onnx-fp16", "reference")
    assert parents["onnx-fp32"] == ("onnx-export", "reference")
    assert parents["onnx-export"] == ("load",) and parents["torchscript-fp32"] == ("load", "reference")


def test_keys_are_stable() -> None:
    assert keys(REQUEST) == keys(REQUEST)


def test_opset_changes_only_the_onnx_subtree() -> None:
    assert changed(replace(REQUEST, opset=19)) == {"onnx-export", "onnx-fp32", "onnx-fp16", "openvino-fp32",
                                                   "openvino-fp16", "tensorrt-fp32", "tensorrt-fp16"}


def test_batch_sizes_change_the_parity_reference_and_everything_checked_against_it() -> None:
    assert "load" not in changed(replace(REQUEST, batch_sizes=(1, 4)))
    assert "onnx-export" not in changed(replace(REQUEST, batch_sizes=(1, 4)))


def test_a_stage_revision_rebuilds_its_subtree(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    before = keys(REQUEST)
    monkeypatch.setattr(OnnxSimplify, "revision", OnnxSimplify.revision + 1)
    after = keys(REQUEST)
    assert {name for name in before if before[name] != after[name]} == {"onnx-fp32", "onnx-fp16", "openvino-fp32", "openvino-fp16", "tensorrt-fp32",
                                "tensorrt-fp16"}


def test_new_weights_change_every_node(tmp_path) -> None:  # type: ignore[no-untyped-def]
    other = replace(REQUEST, source=replace(REQUEST.source, identity="0" * 64))
    assert changed(other) == set(keys(REQUEST))
