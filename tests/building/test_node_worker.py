"""A worker building one node: it refuses a machine whose tools are not those the node's key was planned with."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.building.test_dag import REQUEST
from yolo_optimize.building.dag import node_facts
from yolo_optimize.building.node_worker import NodeJob, check_facts
from yolo_optimize.building.pipeline import plan


def test_a_worker_whose_tools_differ_from_the_planned_ones_refuses_to_build(tmp_path: Path) -> None:
    """A key planned with one onnx version must not label a file another version built (another cluster node)."""
    nodes = plan(REQUEST)
    facts = node_facts(nodes, REQUEST.source.family)
    node = next(n for n in nodes if n.name == "onnx-fp32")
    planned = {**facts[node.name], "tools": {**facts[node.name]["tools"], "onnx": "0.0.1"}}
    job = NodeJob(node, "k" * 64, {}, REQUEST.source, tmp_path, "cpu", 1, False, planned)
    with pytest.raises(RuntimeError, match=r"differs from the one the key was planned for: onnx 0\.0\.1 -> "):
        check_facts(job)
    check_facts(NodeJob(node, "k" * 64, {}, REQUEST.source, tmp_path, "cpu", 1, False, facts[node.name]))
