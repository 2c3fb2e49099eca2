"""``optimize build --executor ray``: the build's nodes as Ray tasks on a cluster's nodes.

``scheduling.Build`` keeps its loop; this executor only decides where each ready node runs: on the
building node with the fewest of this build's tasks in flight, holding as many CPUs as the
smallest building node has (so a node task never shares its cores with another). The artifacts
go to the store every node mounts at the same path, never through Ray's object store: a task
returns only its ``NodeResult``. A task whose worker or node dies is run again (``MAX_ATTEMPTS``),
its half-written staging folder swept by the next attempt on that machine or left, unpublished,
for its own machine's next build. The keys' facts come from a probe task on every building node,
which must agree.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from yolo_optimize.building.executor import INTERRUPT_WAIT_S, Executor, Workers
from yolo_optimize.cluster.nodes import ClusterNode, builders, parse_selectors
from yolo_optimize.cluster.ray_cluster import check_shared, connect, gathered, live_nodes, on_node, shared_paths
from yolo_optimize.errors import UserError

if TYPE_CHECKING:
    from yolo_optimize.building.dag import NodeResult
    from yolo_optimize.building.node_worker import NodeJob

T = TypeVar("T")
MAX_ATTEMPTS = 3


class RayExecutor(Executor):
    """The cluster at ``address``; builds on every node with CPUs, or on the nodes matching ``selectors``."""

    models_at_once = True

    def __init__(self, address: str, selectors: tuple[str, ...] = ()) -> None:
        self.ray = connect(address)
        self.nodes = builders(parse_selectors(selectors) if selectors else (), live_nodes(self.ray))

    @property
    def threads(self) -> int:
        return min(node.cpus for node in self.nodes)

    def check_shared(self, out: Path, inputs: dict[str, Path | None]) -> None:
        """Every building node sees ``out`` and the inputs at the driver's paths."""
        check_shared(self.ray, self.nodes, shared_paths(out, inputs))

    def probe(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` on every building node; they must agree (else the keys would depend on which node
        happened to build)."""
        found = gathered(self.ray, [on_node(self.ray, node, function, *args) for node in self.nodes])
        differing = [node for node, facts in zip(self.nodes, found) if facts != found[0]]
        if differing:
            raise UserError(f"the building nodes differ ({self.nodes[0].hostname} vs "
                            f"{', '.join(n.hostname for n in differing)}: tool versions or CPU features): build on "
                            f"one kind with --on label=value")
        return found[0]

    @contextlib.contextmanager
    def workers(self, needed: int) -> Iterator[Workers]:
        yield _RayWorkers(self)


class _RayWorkers(Workers):
    """The tasks of one build: placed on the least busy building node, run again when their worker dies."""

    def __init__(self, executor: RayExecutor) -> None:
        self.executor, self.ray = executor, executor.ray
        self.in_flight: dict[str, int] = {node.node_id: 0 for node in executor.nodes}
        self.refs: dict[Future[NodeResult], Any] = {}
        self.lock = threading.Lock()

    def submit(self, function: Callable[[NodeJob], NodeResult], job: NodeJob) -> Future[NodeResult]:
        future: Future[NodeResult] = Future()
        self._start(function, job, future, attempt=1)
        return future

    def _start(self, function: Callable[[NodeJob], NodeResult], job: NodeJob, future: Future[NodeResult],
               attempt: int) -> None:
        with self.lock:
            node = min(self.executor.nodes, key=lambda n: self.in_flight[n.node_id])
            self.in_flight[node.node_id] += 1
        ref = on_node(self.ray, node, function, job, cpus=self.executor.threads)
        self.refs[future] = ref
        ref.future().add_done_callback(lambda done: self._finished(done, function, job, future, attempt, node))

    def _finished(self, done: Future[NodeResult], function: Callable[[NodeJob], NodeResult], job: NodeJob,
                  future: Future[NodeResult], attempt: int, node: ClusterNode) -> None:
        from ray.exceptions import NodeDiedError, WorkerCrashedError

        with self.lock:
            self.in_flight[node.node_id] -= 1
        error = done.exception()
        if isinstance(error, (WorkerCrashedError, NodeDiedError)) and attempt < MAX_ATTEMPTS:
            self._start(function, job, future, attempt + 1)
            return
        if error is not None:
            future.set_exception(error)
            return
        result = done.result()
        result.host, result.attempt = f"{node.hostname}/{node.node_id[:8]}", attempt
        future.set_result(result)

    def interrupt(self, running: dict[Future[NodeResult], str]) -> None:
        """Ctrl-C: each task in flight gets a KeyboardInterrupt (``build_node`` removes its staging folder)."""
        for future in running:
            if future in self.refs:
                self.ray.cancel(self.refs[future])
        wait(running, timeout=INTERRUPT_WAIT_S)
