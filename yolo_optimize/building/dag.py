"""The build DAG: nodes with declared parents, and their cache keys.

A node's cache key hashes its parents' keys, its stage name, its parameters and the
versions of the tools it uses. A node is *cached* when its folder holds a manifest
with that key whose files verify. Only nodes that are not cached and are needed by a
requested artifact run (``scheduling.Build``, one loop); each runs in a worker process
(``node_worker.build_node``), under a per-node file lock, into a staging folder that is renamed into place only on
success. Where the workers run is the executor's business (``executor.py``: this machine's processes, or a Ray
cluster's nodes).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from yolo_optimize.building.stage import REFERENCE, Stage
from yolo_optimize.checkpoint import ModelSource
from yolo_optimize.versions import tool_versions

BUILT, CACHED, FAILED, SKIPPED, NOT_NEEDED = "built", "cached", "failed", "skipped", "not needed"
REPAIRED = "repaired"  # its published folder differed from its manifest and was put right


@dataclass(frozen=True)
class Node:
    """A stage placed in the graph. ``inputs`` wires each role the stage reads to a node; ``folder`` is
    relative to the model's artifact dir."""

    name: str
    stage: Stage
    inputs: dict[str, str]  # role (stage.MODEL, SOURCE, REFERENCE) -> parent node name
    folder: str
    requested: bool = False  # asked for by the user (else built only when a requested node needs it)

    @property
    def parents(self) -> tuple[str, ...]:
        return tuple(self.inputs.values())


def validate(nodes: list[Node]) -> None:
    """The graph checks itself: unique names, every role its stage reads wired to a node declared before it,
    and every deployable artifact checked against a reference."""
    seen: set[str] = set()
    for node in nodes:
        if node.name in seen:
            raise ValueError(f"node {node.name} is declared twice")
        if set(node.inputs) != set(node.stage.inputs):
            raise ValueError(f"node {node.name} wires {sorted(node.inputs)}; "
                             f"its stage reads {sorted(node.stage.inputs)}")
        missing = [p for p in node.parents if p not in seen]
        if missing:
            raise ValueError(f"node {node.name} needs {', '.join(missing)}, which is not declared before it")
        if node.stage.target is not None and REFERENCE not in node.inputs:
            raise ValueError(f"node {node.name} is a deployable artifact with no parity reference")
        seen.add(node.name)


@dataclass
class NodeResult:
    node: str
    status: str
    seconds: float = 0.0
    size_bytes: int = 0
    reason: str = ""
    host: str = ""  # the machine that built it (empty when nothing ran)
    attempt: int = 1  # 2 and more: its worker died and the executor ran it again


MODEL_TOOLS = "model"  # the facts entry of the family's tools, which every key's root holds


def node_facts(nodes: list[Node], family: str) -> dict[str, dict[str, Any]]:
    """What the keys take from the machine that builds: each node's tool versions and, for machine-bound outputs,
    its environment (a TensorRT engine's GPU); the family's tools under MODEL_TOOLS. Read where the nodes will be
    built (a cluster's executor probes a building node) and read again by each node before it publishes."""
    from yolo_optimize.families import family_named

    facts: dict[str, dict[str, Any]] = {MODEL_TOOLS: {"tools": tool_versions(family_named(family).tools)}}
    for node in nodes:
        facts[node.name] = {"tools": tool_versions(node.stage.tools), "environment": node.stage.environment()}
    return facts


def cache_keys(nodes: list[Node], source: ModelSource, facts: dict[str, dict[str, Any]],
               contents: Mapping[str, str] | None = None) -> dict[str, str]:
    """Key of every node, in topological order; the model's identity, family and the family's tools are the root.
    ``contents``: the content of the data files the request names, by path (``contents.data_contents``); each node's
    key takes those its parameters name, so a calibration, gate or parity image or label edited in place changes the
    keys of the nodes that read it, and of theirs."""
    from yolo_optimize.building.contents import named_contents
    from yolo_optimize.families import family_named

    model = {"identity": source.identity, "family": source.family, "tools": facts[MODEL_TOOLS]["tools"]}
    if source.nms is not None:  # the graph's NMS (keys of builds without it stay as they were)
        model["nms"] = source.nms.key()
    if graph := family_named(source.family).graph_revision:  # the family's own export form, where it rewrites it
        model["graph"] = graph
    keys: dict[str, str] = {}
    for node in nodes:
        payload = {
            "stage": node.stage.name,
            "revision": node.stage.revision,
            "params": node.stage.params,
            "tools": facts[node.name]["tools"],
            "inputs": {role: keys[parent] for role, parent in node.inputs.items()},
            "model": model if not node.parents else None,
        }
        if facts[node.name]["environment"]:  # only machine-bound outputs carry it, so portable ones keep their keys
            payload["environment"] = facts[node.name]["environment"]
        if read := named_contents(node.stage.params, contents or {}):
            payload["contents"] = read
        keys[node.name] = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
    return keys
