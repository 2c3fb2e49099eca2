"""Running the needed part of one model's DAG: which node runs, waits or is skipped, decided by one loop; the
published views of the store; Ctrl-C handed to the workers in flight.

Where the workers run is the executor's business (``executor.py``); what each does is ``node_worker.build_node``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from pathlib import Path

from filelock import FileLock

from yolo_optimize.artifact import Manifest, read_valid, show, store_folder, sweep_leftovers
from yolo_optimize.building.dag import (
    BUILT,
    CACHED,
    FAILED,
    NOT_NEEDED,
    REPAIRED,
    SKIPPED,
    Node,
    NodeResult,
    cache_keys,
    node_facts,
    validate,
)
from yolo_optimize.building.executor import Executor, LocalExecutor
from yolo_optimize.building.node_worker import LOCKS, NodeJob, build_node
from yolo_optimize.checkpoint import ModelSource
from yolo_optimize.host.processes import classified, ended, oom_kills


class Build:
    """Runs the needed part of a DAG for one model, ``jobs`` nodes at a time.

    Nodes live in a content-keyed store (``.store/<node>/<key>``); the folders users see
    (``onnx-fp32/``, ``.cache/load``) are copies (views) of the store entry this build
    wanted. A child reads its parents from the store by the keys it expects, so a
    concurrent build with other parameters can change a view but never a child's inputs.
    """

    def __init__(self, nodes: list[Node], source: ModelSource, model_dir: Path, *, device: str,
                 executor: Executor | None = None, force: bool = False, verify: bool = False,
                 contents: Mapping[str, str] | None = None) -> None:
        validate(nodes)
        self.nodes = {node.name: node for node in nodes}
        self.order = [node.name for node in nodes]
        self.source, self.model_dir, self.device = source, model_dir, device
        self.executor = executor or LocalExecutor(jobs=1)
        self.force, self.verify = force, verify
        self.facts = self.executor.probe(node_facts, nodes, source.family)
        self.keys = cache_keys(nodes, source, self.facts, contents)
        self._cached: dict[str, Manifest | None] = {}

    def cached(self, name: str) -> Manifest | None:
        """The node's verified store entry (once per build: by stamp, or every byte with ``verify``), else None."""
        if name not in self._cached:
            self._cached[name] = read_valid(self.stored(name), self.keys[name], full=self.verify)
        return self._cached[name]

    def stored(self, name: str) -> Path:
        return store_folder(self.model_dir, name, self.keys[name])

    def view(self, name: str) -> Path:
        return self.model_dir / self.nodes[name].folder

    def wanted(self) -> list[str]:
        """Requested nodes and all their ancestors."""
        wanted = {name for name, node in self.nodes.items() if node.requested}
        for name in reversed(self.order):
            if name in wanted:
                wanted.update(self.nodes[name].parents)
        return [name for name in self.order if name in wanted]

    def pending(self) -> list[str]:
        """Nodes that must run: not cached, and an artifact or the parent of one that must run.

        A requested node that cannot run here (no CUDA device, say) is pending only to be shown
        as skipped: its parents are not built for it.
        """
        must: set[str] = set()
        for name in reversed(self.order):
            node = self.nodes[name]
            needed_by = [c for c in must if name in self.nodes[c].parents and not self._unavailable(c)]
            if (node.requested or needed_by) and (self.force or self.cached(name) is None):
                must.add(name)
        return [name for name in self.order if name in must]

    def _unavailable(self, name: str) -> str:
        return self.nodes[name].stage.unavailable_reason(self.device) or ""

    def run(self, on_event: Callable[[str, NodeResult | None], None]) -> list[NodeResult]:
        """Build what is pending; ``on_event(node, None)`` when a node starts, with its result when done."""
        sweep_leftovers(self.model_dir)
        pending, wanted = self.pending(), set(self.wanted())
        results: dict[str, NodeResult] = {}

        def finished(result: NodeResult) -> None:
            if result.node in wanted and result.status in (BUILT, CACHED):
                result = self._shown(result)
            results[result.node] = result
            on_event(result.node, result)

        for name in self.order:
            if name not in pending:
                finished(self._not_run(name))
        oom_kills_before = oom_kills()
        with self.executor.workers(len(pending)) as pool:
            running: dict[Future[NodeResult], str] = {}
            try:
                while pending or running:
                    for name in [n for n in pending if self._unavailable(n)
                                 or all(p in results for p in self.nodes[n].parents)]:
                        pending.remove(name)
                        blocked = self._blocked_reason(name, results)
                        if blocked:
                            finished(NodeResult(name, SKIPPED, reason=blocked))
                            continue
                        on_event(name, None)
                        running[pool.submit(build_node, self._job(name))] = name
                    if not running:
                        continue
                    done, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in done:
                        finished(_result_of(running.pop(future), future, oom_kills_before))
            except KeyboardInterrupt:
                pool.interrupt(running)
                raise
        return [results[name] for name in self.order]

    def _not_run(self, name: str) -> NodeResult:
        """A node that does not run: cached when its store entry verifies, else not needed by this build."""
        if self.cached(name) is not None:
            return NodeResult(name, CACHED)
        return NodeResult(name, NOT_NEEDED, reason="not needed for the requested artifacts")

    def _shown(self, result: NodeResult) -> NodeResult:
        """The node's published folder made a copy of this build's store entry where it shows another key, was just
        rebuilt, or no longer matches its manifest (checked as the store is: by stamp, every byte with ``verify``);
        the last is REPAIRED, saying what was wrong and how it was put right."""
        name = result.node
        try:
            with FileLock(str(self._lock(f"{name}.view"))):
                damage = show(self.stored(name), self.view(name), self.keys[name], full=self.verify,
                              replace=result.status == BUILT)
        except OSError as err:  # the store entry is kept; the next build publishes it
            return replace(result, status=FAILED, reason=f"{classified(err)} (publishing {self.nodes[name].folder})")
        if damage is None:
            return result
        how = "rebuilt" if result.status == BUILT else "published again from the verified store"
        return replace(result, status=REPAIRED, reason=f"{damage}; {how}")

    def _lock(self, name: str) -> Path:
        locks = self.model_dir / LOCKS
        locks.mkdir(parents=True, exist_ok=True)
        return locks / f"{name}.lock"

    def _blocked_reason(self, name: str, results: dict[str, NodeResult]) -> str:
        if self._unavailable(name):
            return self._unavailable(name)
        bad = [p for p in self.nodes[name].parents if results[p].status in (FAILED, SKIPPED)]
        return f"needs {', '.join(bad)} ({results[bad[0]].status})" if bad else ""

    def _job(self, name: str) -> NodeJob:
        node = self.nodes[name]
        return NodeJob(node, self.keys[name], {role: (p, self.keys[p]) for role, p in node.inputs.items()}, self.source,
                       self.model_dir, self.device, self.executor.threads, self.force, self.facts[name])


def _result_of(name: str, future: Future[NodeResult], oom_kills_before: int | None) -> NodeResult:
    try:
        return future.result()
    except BrokenProcessPool:  # the worker process itself died
        return NodeResult(name, FAILED, reason=ended(None, oom_kills_before))
    except Exception as err:  # noqa: BLE001 - a dead worker fails its node, not the build
        return NodeResult(name, FAILED, reason=classified(err))
