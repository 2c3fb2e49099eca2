"""``--executor ray`` on a real local Ray cluster: a head with no CPUs and two nodes labelled kind=a and kind=b with
one bench slot each, in a network namespace of its own with only the loopback device (where this machine lets us
make one). The CLI runs as a user runs it, as the cluster's driver."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import QUICK_EVAL, brief, build_args, eval_args, optimize
from yolo_optimize.artifact import STORE, Manifest, read_valid
from yolo_optimize.building.build_result import BuildResult

ray = pytest.importorskip("ray", reason="ray is not installed (pip install -e \".[ray]\"): the cluster tests need it")

CLUSTER = """
import json, sys
from ray.cluster_utils import Cluster
SMALL = {"object_store_memory": 128 * 2**20}  # objects here are results: small
cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False, **SMALL})
for kind in ("a", "b"):
    cluster.add_node(num_cpus=1, labels={"kind": kind}, resources={"bench_slot": 1}, **SMALL)
cluster.wait_for_nodes()
print(json.dumps({"address": cluster.address}), flush=True)
sys.stdin.read()  # until the test closes it
cluster.shutdown()
"""
QUIET = {"RAY_USAGE_STATS_ENABLED": "0", "YOLO_OPTIMIZE_OFFLINE": "1"}


class LocalCluster:
    """The cluster's process, and how to run a command beside it (inside its network namespace, when it has one)."""

    def __init__(self, tmp: Path) -> None:
        self.prefix = _loopback_namespace()
        env = {**os.environ, **QUIET, "RAY_TMPDIR": str(tmp)}
        self.process = subprocess.Popen([*self.prefix, sys.executable, "-c", CLUSTER], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, env=env, start_new_session=True)
        assert self.process.stdout is not None
        self.address = json.loads(self.process.stdout.readline())["address"]
        self.pid = self.process.pid

    def command(self, *args: str | Path) -> list[str]:
        """The CLI as the cluster's driver."""
        return self.python("-m", "yolo_optimize", *args)

    def python(self, *args: str | Path) -> list[str]:
        """Python in the cluster's network namespace (nsenter into the cluster's process), else as it is."""
        inside = ["nsenter", "--target", str(self.pid), "--user", "--net", "--preserve-credentials"] if self.prefix \
            else []
        return [*inside, sys.executable, *map(str, args)]

    def optimize(self, *args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.command(*args), capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **QUIET}, cwd=Path(__file__).parents[2])

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)


def _loopback_namespace() -> list[str]:
    """``unshare`` into a new user and network namespace whose only device is the loopback, when allowed."""
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--net", "true"], capture_output=True)
    if probe.returncode != 0:
        print(f"no network namespace here ({probe.stderr.decode().strip()}): "
              "the cluster runs on this machine's own address")
        return []
    return ["unshare", "--user", "--map-root-user", "--net", "sh", "-c", "ip link set lo up && exec \"$@\"", "sh"]


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    """Ray's session folder directly under the system's temporary folder: Ray's sockets live in it, and a Unix
    socket's path holds at most 107 bytes (pytest's folder for an xdist worker is 10 bytes too deep)."""
    folder = Path(tempfile.mkdtemp(prefix="ray-"))
    found = LocalCluster(folder)
    try:
        yield found
    finally:
        found.close()
        shutil.rmtree(folder, ignore_errors=True)


def _keys(model_dir: Path) -> dict[str, str]:
    """node -> the cache key of every store entry that verifies."""
    return {folder.parent.name: Manifest.read(folder).cache_key for folder in (model_dir / STORE).glob("*/*")
            if not folder.name.startswith((".tmp-", ".old-")) and read_valid(folder) is not None}


SMALL_BUILD = ("--targets", "onnx", "--precisions", "fp32")


def test_a_build_through_ray_keys_and_stores_what_a_local_build_does_and_retries_a_killed_worker(
        cluster: LocalCluster, built: Path, tmp_path: Path) -> None:
    """Built on the kind=a node only; its worker killed while it stages the ONNX export: run again (attempt 2), and
    nothing half-written was published. The session's local build made the same nodes with the same parameters."""
    out = tmp_path / "ray"
    result_file = tmp_path / "result.json"
    process = subprocess.Popen(cluster.command(*build_args(out, *SMALL_BUILD, "--executor", "ray", "--ray-address",
                                                           cluster.address, "--on", "kind=a", "--result", result_file)),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **QUIET})
    staging = _first_staging(out / "yolov5n" / STORE / "onnx-export", process)
    os.kill(int(staging.name.rsplit("-", 2)[-2]), signal.SIGKILL)  # the Ray worker building it
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, (stdout[-3000:], stderr[-3000:])
    found = _keys(out / "yolov5n")
    assert set(found) == {"load", "reference", "onnx-export", "onnx-fp32"}
    assert found == {node: key for node, key in _keys(built).items() if node in found}
    result = BuildResult.from_json(result_file.read_text())
    assert set(result.statuses().values()) == {"built"}
    nodes = {node.node: node for node in result.models[0].nodes}
    kind_a = _node_of(cluster, "a")[:8]
    assert all(node.host.endswith(f"/{kind_a}") for node in nodes.values()), ("built on the kind=a node", nodes)
    assert nodes["onnx-export"].attempt == 2 and {node.attempt for node in nodes.values()} == {1, 2}
    assert not list((out / "yolov5n").rglob(".tmp-*")), "the killed attempt's staging folder was swept"


def _first_staging(folder: Path, process: subprocess.Popen[str], timeout: float = 120) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = list(folder.glob(".tmp-*"))
        if found:
            return found[0]
        assert process.poll() is None, "the build ended before staging the export"
        time.sleep(0.1)
    raise AssertionError("the export was never staged")


def _node_of(cluster: LocalCluster, kind: str) -> str:
    script = (f"import ray; ray.init(address={cluster.address!r}, logging_level='ERROR');"
              f"print([n['NodeID'] for n in ray.nodes() if n['Alive'] and n['Labels'].get('kind') == {kind!r}][0])")
    return subprocess.run(cluster.python("-c", script), capture_output=True, text=True, check=True,
                          env={**os.environ, **QUIET}).stdout.strip()


def _ours(stderr: str) -> list[str]:
    """stderr without Ray's own C++ warning that it found no route to 8.8.8.8 to learn its IP from (it sends
    nothing; only a machine with no network route at all, like the test's loopback namespace, prints it)."""
    return [line for line in stderr.strip().splitlines() if not re.match(r"^\[[-0-9 :,]+ W .*network_util\.cc", line)]


def test_an_unknown_label_is_refused_at_once_naming_the_labels_there(cluster: LocalCluster, small_artifacts: Path,
                                                                   tmp_path: Path) -> None:
    result = cluster.optimize(*eval_args(small_artifacts, tmp_path / "reports", *QUICK_EVAL), "--executor", "ray",
                              "--ray-address", cluster.address, "--on", "kind=a,kind=gpu")
    assert result.returncode == 2 and _ours(result.stderr) == [
        "error: no live node has the label kind=gpu (the nodes' labels: kind=a, kind=b)"], brief(result)
    assert not (tmp_path / "reports" / "kind-a").exists()


def test_each_host_is_measured_alone_on_its_node_into_its_own_report_and_one_merged_page(
        cluster: LocalCluster, small_artifacts: Path, tmp_path: Path) -> None:
    """Two evals at once, both wanting the kind=a node: its bench slot lets one measure there at a time. The ONNX
    artifact and its baseline (two rows keep it quick)."""
    small_artifacts = shutil.copytree(small_artifacts, tmp_path / "artifacts",
                                      ignore=shutil.ignore_patterns("openvino-*"))
    both, again = tmp_path / "both", tmp_path / "again"
    first = subprocess.Popen(cluster.command(*eval_args(small_artifacts, both, *QUICK_EVAL), "--executor", "ray",
                                             "--ray-address", cluster.address, "--on", "kind=a,kind=b"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **QUIET})
    second = cluster.optimize(*eval_args(small_artifacts, again, *QUICK_EVAL), "--executor", "ray",
                              "--ray-address", cluster.address, "--on", "kind=a")
    stdout, stderr = first.communicate(timeout=300)
    assert first.returncode == 0 and second.returncode == 0, (stdout[-2000:], stderr[-2000:], brief(second))
    hosts = {kind: json.loads((both / f"kind-{kind}" / "results.json").read_text())["environment"]["cluster"]
             for kind in "ab"}
    for kind, host in hosts.items():
        assert host["labels"]["kind"] == kind and host["node_id"] == _node_of(cluster, kind)
        assert host["resources_held"] == {"CPU": 1, "GPU": 0, "bench_slot": 1}
    other = json.loads((again / "kind-a" / "results.json").read_text())["environment"]["cluster"]
    assert other["finished"] <= hosts["a"]["started"] or hosts["a"]["finished"] <= other["started"], (other, hosts)
    for kind in "ab":
        report = cluster.optimize("recommend", both / f"kind-{kind}")
        assert report.returncode == 0, brief(report)
    rows = (both / "hosts.csv").read_text().splitlines()
    assert rows[0] == ("model,artifact,batch,kind=a img/s,kind=a speedup,kind=b img/s,kind=b speedup,"
                       "kind=b / kind=a img/s (not interleaved)") and len(rows) == 1 + 2
    page = (both / "report.html").read_text()
    assert "kind-a/report.html" in page and "kind-b/report.html" in page and "id='ship-where'" in page
    ship = [line for line in (both / "hosts.md").read_text().splitlines() if line.startswith("| kind=")]
    assert [line.split(" | ")[0] for line in ship] == ["| kind=a", "| kind=b"], ship
    assert all(line.split(" | ")[4] in ("onnx-fp32", "pytorch-fp32") for line in ship), ship
    assert "What to ship where" in stdout and sum(line.startswith("│ kind=") for line in stdout.splitlines()) == 2


def test_an_unreachable_cluster_is_refused_in_one_line(tmp_path: Path) -> None:
    result = optimize("eval", tmp_path, "--out", tmp_path / "reports", "--executor", "ray", "--ray-address",
                      "127.0.0.1:1", "--on", "kind=a")
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        "error: --ray-address 127.0.0.1:1: no Ray cluster reachable (Connection refused)"], brief(result)
    assert not (tmp_path / "reports").exists()
