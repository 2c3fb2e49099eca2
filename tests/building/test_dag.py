"""Cache keys: a parameter change reaches exactly the nodes that depend on it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from tests.conftest import VAL_DATA, WEIGHTS
from yolo_optimize.building.dag import cache_keys, node_facts
from yolo_optimize.building.held_out import ImageSet
from yolo_optimize.building.pipeline import plan
from yolo_optimize.building.request import BuildRequest, GateConfig
from yolo_optimize.checkpoint import resolve_source
from yolo_optimize.export.tensorrt import TensorRTBuild
from yolo_optimize.images import list_images
from yolo_optimize.optimize.simplify import OnnxSimplify
from yolo_optimize.runtime.tensorrt_api import engine_facts

REQUEST = BuildRequest(source=resolve_source(str(WEIGHTS)), targets=("torchscript", "onnx", "openvino", "tensorrt"),
                       precisions=("fp32", "fp16"), imgsz=640, batch_sizes=(1, 8), opset=18, device="cpu",
                       parity_images=tuple(str(p) for p in list_images(VAL_DATA)[:4]))
GATE = GateConfig(ImageSet.of(VAL_DATA, 8), None, "the first 8", 1.0)


def keys(request: BuildRequest) -> dict[str, str]:
    nodes = plan(request)
    return cache_keys(nodes, request.source, node_facts(nodes, request.source.family), request.contents)


def changed(other: BuildRequest) -> set[str]:
    before, after = keys(REQUEST), keys(other)
    return {name for name in before if before[name] != after[name]}


def test_plan_declares_onnx_as_the_parent_of_openvino_and_tensorrt() -> None:
    parents = {node.name: node.parents for node in plan(REQUEST)}
    assert parents["openvino-fp32"] == ("onnx-fp32", "reference")
    assert parents["tensorrt-fp16"] == ("onnx-fp16", "reference")
    assert parents["onnx-fp32"] == ("onnx-export", "reference")
    assert parents["onnx-export"] == ("load",) and parents["torchscript-fp32"] == ("load", "reference")


def test_a_tensorrt_int8_engine_is_built_from_its_own_gated_symmetric_qdq_graph() -> None:
    request = replace(REQUEST, precisions=("fp32", "int8"), calib_images=REQUEST.parity_images,
                      gate=GATE)
    nodes = {node.name: node for node in plan(request)}
    assert nodes["tensorrt-int8"].parents == ("onnx-int8-tensorrt", "reference")
    assert nodes["onnx-int8-tensorrt"].parents == ("onnx-fp32", "reference")
    qdq = nodes["onnx-int8-tensorrt"]
    assert qdq.folder == ".cache/onnx-int8-tensorrt" and not qdq.requested
    assert nodes["onnx-int8"].parents == ("onnx-fp32", "reference"), "the CPU INT8 ONNX stays NNCF's"


def test_a_cpu_without_vnni_changes_the_int8_arithmetic_of_onnx_and_aoti_and_only_their_keys() -> None:
    vnni = replace(REQUEST, targets=("aoti", "onnx", "openvino"), precisions=("fp32", "int8"),
                   calib_images=REQUEST.parity_images, gate=GATE)
    without = replace(vnni, int8_vnni=False)
    configs = {request.int8_vnni: {node.name: node.stage.config for node in plan(request)}
               for request in (vnni, without)}
    assert (configs[True]["onnx-int8"].weight_bits, configs[False]["onnx-int8"].weight_bits) == (8, 7)
    assert (configs[True]["aoti-int8"].reduce_range, configs[False]["aoti-int8"].reduce_range) == (False, True)
    before, after = keys(vnni), keys(without)
    assert {name for name in before if before[name] != after[name]} == {"onnx-int8", "aoti-int8"}


KEYS_OF_A_FRESH_INTERPRETER = ("import json; from tests.building.test_dag import REQUEST, keys; "
                               "print(json.dumps(keys(REQUEST)))")


def test_keys_are_the_same_in_fresh_interpreters_whatever_their_hash_seed() -> None:
    """What the cache needs: another process (another build, tomorrow) computes the same keys, though Python
    randomizes its string hashes per process (a set or dict order leaking into a key would show here)."""

    found = [json.loads(subprocess.run([sys.executable, "-c", KEYS_OF_A_FRESH_INTERPRETER], capture_output=True,
                                       text=True, check=True, cwd=Path(__file__).parents[2],
                                       env={**os.environ, "PYTHONHASHSEED": seed}).stdout) for seed in ("1", "4242")]
    assert found[0] == found[1] == keys(REQUEST) and len(set(found[0].values())) == len(found[0])


def test_opset_changes_only_the_onnx_subtree() -> None:
    assert changed(replace(REQUEST, opset=19)) == {"onnx-export", "onnx-fp32", "onnx-fp16", "openvino-fp32",
                                                   "openvino-fp16", "tensorrt-fp32", "tensorrt-fp16"}


def test_batch_sizes_change_the_parity_reference_and_everything_checked_against_it() -> None:
    checked = {node.name for node in plan(REQUEST) if "reference" in node.parents}
    assert checked >= {"torchscript-fp32", "onnx-fp32", "openvino-fp16", "tensorrt-fp16"}
    assert changed(replace(REQUEST, batch_sizes=(1, 4))) == {"reference", *checked}


def test_a_stage_revision_rebuilds_its_subtree(monkeypatch) -> None:  # type: ignore[no-untyped-def]  # pytest's fixture
    before = keys(REQUEST)
    monkeypatch.setattr(OnnxSimplify, "revision", OnnxSimplify.revision + 1)
    after = keys(REQUEST)
    assert {name for name in before if before[name] != after[name]} == {
        "onnx-fp32", "onnx-fp16", "openvino-fp32", "openvino-fp16", "tensorrt-fp32", "tensorrt-fp16"}


def test_a_tensorrt_upgrade_or_another_gpu_rebuilds_the_engines_and_nothing_else(monkeypatch) -> None:  # type: ignore[no-untyped-def]  # pytest's fixture
    """Engines are valid only for the TensorRT version and GPU that built them, whichever wheel installed TensorRT."""
    def facts(version: str, gpu: str, capability: tuple[int, int]):  # type: ignore[no-untyped-def]  # stands in for a function typed elsewhere
        return lambda stage: engine_facts(version, gpu, capability)

    monkeypatch.setattr(TensorRTBuild, "environment", facts("10.16.0", "NVIDIA H100 80GB HBM3", (9, 0)))
    before = keys(REQUEST)
    for other in (facts("11.1.0", "NVIDIA H100 80GB HBM3", (9, 0)), facts("10.16.0", "NVIDIA L4", (8, 9))):
        monkeypatch.setattr(TensorRTBuild, "environment", other)
        after = keys(REQUEST)
        assert {name for name in before if before[name] != after[name]} == {"tensorrt-fp32", "tensorrt-fp16"}


def test_new_weights_change_every_node(tmp_path) -> None:  # type: ignore[no-untyped-def]  # pytest's fixture
    other = replace(REQUEST, source=replace(REQUEST.source, identity="0" * 64))
    assert changed(other) == set(keys(REQUEST))


def test_the_graph_refuses_unwired_roles_parents_declared_late_and_artifacts_without_a_reference() -> None:

    from yolo_optimize.building.dag import Node, validate
    from yolo_optimize.building.stage import REFERENCE, SOURCE, Stage, StageContext, StageOutput

    nodes = plan(REQUEST)
    validate(nodes)
    by_name = {node.name: node for node in nodes}
    simplify = by_name["onnx-fp32"]
    unwired = replace(simplify, inputs={REFERENCE: "reference"})
    with pytest.raises(ValueError, match=r"onnx-fp32 wires \['reference'\]; its stage reads \['reference', 'source'\]"):
        validate([*nodes[:nodes.index(simplify)], unwired])
    late = [node for node in nodes if node.name != "onnx-export"] + [by_name["onnx-export"]]
    with pytest.raises(ValueError, match="onnx-fp32 needs onnx-export, which is not declared before it"):
        validate(late)

    class Unchecked(Stage):
        """A deployable stage that forgot to read a parity reference."""

        name, inputs, tools, target = "unchecked", (SOURCE,), (), "onnx"

        def run(self, ctx: StageContext) -> StageOutput:
            raise AssertionError("never run")

    unchecked = Node("unchecked", Unchecked(None), {SOURCE: "onnx-export"}, "unchecked")
    with pytest.raises(ValueError, match="unchecked is a deployable artifact with no parity reference"):
        validate([*nodes[:nodes.index(simplify)], unchecked])
