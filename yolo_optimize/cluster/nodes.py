"""Which cluster node does what, decided before any work starts: label selectors, the live nodes, the choice.

Pure functions over the nodes Ray lists, so every refusal (an unknown label, a measuring node
that runs the driver) is one line and is decided without waiting on the cluster.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from yolo_optimize.errors import UserError

# the custom resource a measuring node offers once (`ray start --resources '{"bench_slot": 1}'`)
BENCH_SLOT = "bench_slot"
SELECTOR = re.compile(r"^[A-Za-z0-9_.-]+=[A-Za-z0-9_.-]+$")


@dataclass(frozen=True)
class ClusterNode:
    """One live node as Ray lists it."""

    node_id: str
    hostname: str
    address: str
    labels: dict[str, str] = field(default_factory=dict)
    resources: dict[str, float] = field(default_factory=dict)

    @property
    def cpus(self) -> int:
        return int(self.resources.get("CPU", 0))

    @property
    def gpus(self) -> int:
        return int(self.resources.get("GPU", 0))

    def matches(self, selector: str) -> bool:
        key, value = selector.split("=", 1)
        return self.labels.get(key) == value

    def describe(self) -> str:
        return f"{self.hostname} ({self.address}, node {self.node_id[:8]})"


def parse_selectors(text: str | tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """``kind=avx2,kind=avx512`` (or a list of them) -> the selectors, each ``label=value``, no repeats."""
    parts = text.split(",") if isinstance(text, str) else [str(part) for part in text]
    selectors = tuple(part.strip() for part in parts if part.strip())
    bad = [s for s in selectors if not SELECTOR.match(s)]
    if bad or not selectors:
        raise UserError(f"--on takes label=value selectors such as kind=avx512, got {', '.join(bad) or repr(text)}")
    if len(set(selectors)) != len(selectors):
        raise UserError(f"--on names a selector twice: {','.join(selectors)}")
    return selectors


def cluster_nodes(listed: list[dict[str, Any]]) -> list[ClusterNode]:
    """The live nodes of ``ray.nodes()``."""
    return [ClusterNode(n["NodeID"], n.get("NodeManagerHostname", ""), n.get("NodeManagerAddress", ""),
                        dict(n.get("Labels") or {}), dict(n.get("Resources") or {}))
            for n in listed if n.get("Alive")]


def user_labels(nodes: list[ClusterNode]) -> list[str]:
    """Every label=value the nodes carry, Ray's own (``ray.io/...``) left out."""
    return sorted({f"{k}={v}" for n in nodes for k, v in n.labels.items() if not k.startswith("ray.io/")})


def choose_hosts(selectors: tuple[str, ...], nodes: list[ClusterNode], driver_node: str) -> dict[str, ClusterNode]:
    """One measuring node per selector: a live node with that label and a bench slot, never the driver's own node
    (the driver would share its cores with the measurement), never one node for two selectors."""
    chosen: dict[str, ClusterNode] = {}
    for selector in selectors:
        matching = [n for n in nodes if n.matches(selector)]
        if not matching:
            labels = ", ".join(user_labels(nodes)) or "none"
            raise UserError(f"no live node has the label {selector} (the nodes' labels: {labels})")
        usable = [n for n in matching if n.resources.get(BENCH_SLOT, 0) >= 1 and n.node_id != driver_node
                  and n not in chosen.values()]
        if not usable:
            raise UserError(f"no node labelled {selector} can measure: {_why_not(matching, driver_node, chosen)}")
        chosen[selector] = usable[0]
    return chosen


def _why_not(matching: list[ClusterNode], driver_node: str, chosen: dict[str, ClusterNode]) -> str:
    reasons = []
    for node in matching:
        if node.node_id == driver_node:
            reasons.append(f"{node.describe()} runs this driver (measure on nodes that run nothing else)")
        elif node in chosen.values():
            reasons.append(f"{node.describe()} already measures for another selector")
        else:
            reasons.append(f"{node.describe()} has no {BENCH_SLOT} resource (start it with --resources "
                           f"'{{\"{BENCH_SLOT}\": 1}}')")
    return "; ".join(reasons)


def builders(selectors: tuple[str, ...], nodes: list[ClusterNode]) -> list[ClusterNode]:
    """The nodes a build may run on: every node with CPUs, or those matching any selector."""
    found = [n for n in nodes if n.cpus > 0 and (not selectors or any(n.matches(s) for s in selectors))]
    if not found:
        raise UserError(f"no live node with CPUs matches {','.join(selectors) or 'the cluster'} (the nodes' labels: "
                        f"{', '.join(user_labels(nodes)) or 'none'})")
    return found


def folder_name(selector: str) -> str:
    """``kind=avx512`` -> ``kind-avx512``: the host's report folder."""
    return selector.replace("=", "-")
