"""Choosing the cluster's nodes before any work starts: every refusal is one line that says what to change."""

from __future__ import annotations

from pathlib import Path

import pytest

from yolo_optimize.cluster.nodes import builders, choose_hosts, cluster_nodes, parse_selectors
from yolo_optimize.cluster.ray_cluster import missing_paths, shared_paths
from yolo_optimize.errors import UserError


def _node(node_id: str, kind: str | None, slot: bool = True, cpus: int = 2) -> dict:
    """One entry as ray.nodes() lists it."""
    return {"NodeID": node_id * 8, "Alive": True, "NodeManagerHostname": f"host-{node_id}",
            "NodeManagerAddress": "10.0.0.1", "Labels": {"kind": kind, "ray.io/node-id": node_id} if kind else {},
            "Resources": {"CPU": cpus, **({"bench_slot": 1.0} if slot else {})}}


NODES = cluster_nodes([_node("h", None, slot=False, cpus=0), _node("a", "avx2"), _node("b", "avx512"),
                       _node("c", "avx512", slot=False), {**_node("d", "gpu"), "Alive": False}])


def test_each_selector_gets_a_live_labelled_node_with_a_bench_slot() -> None:
    chosen = choose_hosts(("kind=avx2", "kind=avx512"), NODES, driver_node="h" * 8)
    assert {selector: node.hostname for selector, node in chosen.items()} == {"kind=avx2": "host-a",
                                                                             "kind=avx512": "host-b"}


def test_an_unknown_or_dead_label_lists_the_live_ones() -> None:
    with pytest.raises(UserError, match=r"^no live node has the label kind=gpu \(the nodes' labels: kind=avx2, "
                                        r"kind=avx512\)$"):
        choose_hosts(("kind=gpu",), NODES, driver_node="h" * 8)


def test_the_driver_node_never_measures() -> None:
    with pytest.raises(UserError, match="host-a .* runs this driver"):
        choose_hosts(("kind=avx2",), NODES, driver_node="a" * 8)


def test_a_node_without_a_bench_slot_is_named_with_the_fix() -> None:
    only_c = [n for n in NODES if n.hostname != "host-b"]
    with pytest.raises(UserError, match="host-c .* has no bench_slot resource .*--resources"):
        choose_hosts(("kind=avx512",), only_c, driver_node="h" * 8)


def test_builders_are_the_nodes_with_cpus_matching_the_selectors() -> None:
    assert [n.hostname for n in builders((), NODES)] == ["host-a", "host-b", "host-c"]
    assert [n.hostname for n in builders(("kind=avx512",), NODES)] == ["host-b", "host-c"]
    with pytest.raises(UserError, match="no live node with CPUs matches kind=arm"):
        builders(("kind=arm",), NODES)


@pytest.mark.parametrize("text", ["kind", "kind=a,,kind", "kind=a b", "kind=a,kind=a"])
def test_bad_selectors_are_refused(text: str) -> None:
    with pytest.raises(UserError, match="--on"):
        parse_selectors(text)


def test_a_node_that_does_not_share_the_drivers_folders_is_told_which(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    paths = shared_paths(tmp_path / "out", {"--data": tmp_path / "data", "--checkpoint": None})
    assert missing_paths(paths) == [] and list(paths.inputs) == ["--data"]
    (tmp_path / "data" / "new.jpg").write_bytes(b"")  # what another machine's folder at the same path looks like
    (paths.out / paths.marker).unlink()
    problems = missing_paths(paths)
    expected = paths.inputs["--data"][1]
    assert problems[0] == f"--out {paths.out} is not the driver's folder there (a shared folder at the same path)"
    assert problems[1].startswith(f"--data {tmp_path / 'data'} is folder ") and problems[1].endswith(
        f", {expected} on the driver") and expected not in problems[1].split(",")[0]
    assert len(problems) == 2


NO_RAY = """
import sys
import yolo_optimize.api, yolo_optimize.building.builder, yolo_optimize.building.dag, yolo_optimize.cli.main
import yolo_optimize.evaluation.session
from yolo_optimize.building.builder import executor_for
from yolo_optimize.building.options import BuildOptions
executor_for(BuildOptions(model="yolov5n"))
print("ray" in sys.modules)
"""


def test_the_single_machine_path_never_imports_ray() -> None:
    import subprocess
    import sys

    found = subprocess.run([sys.executable, "-c", NO_RAY], capture_output=True, text=True, check=True,
                           cwd=Path(__file__).parents[2])
    assert found.stdout.strip() == "False", found.stderr
