"""The connection to a Ray cluster, and running one of this package's functions on one chosen node.

Connecting never starts a cluster (``ray.init(address=...)`` only joins one) and switches Ray's
network side effects off first: usage statistics are not reported. A function runs in a Ray worker
with this package's process settings (``configured_child``) and without the thread variables Ray
injects (``OMP_NUM_THREADS`` set to the task's CPUs), so the runtimes choose their threads as they
do on a machine of their own.
"""

from __future__ import annotations

import hashlib
import logging
import os
import platform
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yolo_optimize.cluster.nodes import ClusterNode, cluster_nodes
from yolo_optimize.errors import UserError
from yolo_optimize.host.processes import configured_child, one_line

RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0"}  # no usage report to Anyscale; set before ray is imported
RAY_THREAD_VARIABLES = ("OMP_NUM_THREADS",)  # what Ray sets in its workers from the task's CPUs
CONNECT_TIMEOUT_S = 10


def connect(address: str) -> Any:
    """The ``ray`` module, connected to the running cluster at ``address`` ("auto": the one this machine is part of);
    a UserError when ray is not installed or no cluster answers."""
    os.environ.update(RAY_ENV)
    try:
        import ray
    except ImportError:
        raise UserError("--executor ray needs ray: pip install -e \".[ray]\"") from None
    if not ray.is_initialized():
        node_ip = route_to(address)
        try:
            ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False, _node_ip_address=node_ip)
        except Exception as err:  # noqa: BLE001 - ConnectionError, RuntimeError, ValueError, by Ray's version
            raise UserError(f"--ray-address {address}: no Ray cluster reachable ({one_line(err)})") from None
    return ray


def route_to(address: str) -> str | None:
    """This machine's IP on its route to the cluster's ``host:port``, checked to answer within CONNECT_TIMEOUT_S (Ray
    itself retries an unreachable address for minutes); None for "auto", where Ray finds the local cluster. Given
    to Ray, it spares it looking for its IP by routing towards 8.8.8.8."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return None
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S) as connection:
            return str(connection.getsockname()[0])
    except OSError as err:
        raise UserError(f"--ray-address {address}: no Ray cluster reachable ({err.strerror or err})") from None


def live_nodes(ray: Any) -> list[ClusterNode]:
    return cluster_nodes(ray.nodes())


def driver_node(ray: Any) -> str:
    """The node this driver process runs on."""
    return str(ray.get_runtime_context().get_node_id())


def on_node(ray: Any, node: ClusterNode, function: Callable[..., Any], *args: Any, cpus: float = 0,
            gpus: float = 0, resources: dict[str, float] | None = None) -> Any:
    """``function(*args)`` as a task on ``node`` only (it fails rather than run elsewhere), holding ``cpus``, ``gpus``
    and ``resources`` while it runs; the ObjectRef of its result. Ray does not retry it: the caller decides."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    task = ray.remote(_in_worker).options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False), num_cpus=cpus, num_gpus=gpus,
        resources=resources or {}, max_retries=0, name=getattr(function, "__name__", "task"))
    return task.remote(function, *args)


def gathered(ray: Any, refs: list[Any]) -> list[Any]:
    """The tasks' results; a task's UserError (bad input seen on its node) raised here as the one line it is."""
    try:
        return ray.get(refs)
    except ray.exceptions.RayTaskError as err:
        if isinstance(err.cause, UserError):
            raise UserError(str(err.cause)) from None
        raise


def _in_worker(function: Callable[..., Any], *args: Any) -> Any:
    """A Ray worker's side: this package's settings, Ray's thread variables gone, then the function."""
    for name in RAY_THREAD_VARIABLES:
        os.environ.pop(name, None)
    configured_child()
    return function(*args)


@dataclass(frozen=True)
class SharedPaths:
    """Paths a node must see as the driver does: ``out`` (proved by a marker file the driver wrote there) and
    inputs, each with a fingerprint (a file's size, a folder's first names)."""

    out: Path
    marker: str
    inputs: dict[str, tuple[str, str]]  # option -> (absolute path, fingerprint)


def shared_paths(out: Path, inputs: dict[str, Path | None]) -> SharedPaths:
    """Write the marker into ``out`` (created) and fingerprint the inputs, on the driver."""
    out = out.absolute()
    out.mkdir(parents=True, exist_ok=True)
    marker = f".yolo-optimize-probe-{uuid.uuid4().hex}"
    (out / marker).write_text(platform.node())
    return SharedPaths(out, marker, {option: (str(path.absolute()), fingerprint(path))
                                     for option, path in inputs.items() if path is not None})


def fingerprint(path: Path) -> str:
    """What tells two mounts of one folder from two folders at one path: a file's size, a folder's first names."""
    if path.is_file():
        return f"file of {path.stat().st_size} bytes"
    if path.is_dir():
        names = sorted(p.name for p in path.iterdir() if not p.name.startswith(".yolo-optimize-probe-"))[:64]
        return "folder " + hashlib.sha256("\n".join(names).encode()).hexdigest()[:12]
    return "absent"


def missing_paths(paths: SharedPaths) -> list[str]:
    """On the node: what is not the driver's (empty when everything is shared)."""
    problems = []
    marker = paths.out / paths.marker
    if not marker.is_file():
        problems.append(f"--out {paths.out} is not the driver's folder there (a shared folder at the same path)")
    for option, (path, expected) in paths.inputs.items():
        found = fingerprint(Path(path))
        if found != expected:
            problems.append(f"{option} {path} is {found} there, {expected} on the driver")
    return problems


def check_shared(ray: Any, nodes: list[ClusterNode], paths: SharedPaths) -> None:
    """Refuse (one line) unless every node sees ``paths`` as the driver does; the marker is removed after."""
    try:
        found = gathered(ray, [on_node(ray, node, missing_paths, paths) for node in nodes])
    finally:
        (paths.out / paths.marker).unlink(missing_ok=True)
    for node, problems in zip(nodes, found):
        if problems:
            raise UserError(f"node {node.describe()}: {'; '.join(problems)}")
