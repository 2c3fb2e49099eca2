"""The build DAG: nodes with declared parents, cache keys, and a parallel, resumable executor.

A node's cache key hashes its parents' keys, its stage name, its parameters and the
versions of the tools it uses. A node is *cached* when its folder holds a manifest
with that key whose files verify. Only nodes that are not cached and are needed by a
requested artifact run; each runs in a worker process, under a per-node file lock,
into a staging folder that is renamed into place only on success. Where the workers run is the
executor's business (``executor.py``: this machine's processes, or a Ray cluster's nodes); which
node runs or is skipped stays decided here, by one loop.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import platform
import shutil
import signal
import time
import traceback
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from filelock import FileLock

from yolo_optimize.artifact import (
    KEY_CHARS,
    Manifest,
    publish,
    publish_if_absent,
    read_valid,
    show,
    staging_dir,
    store_folder,
    sweep_leftovers,
)
from yolo_optimize.building.executor import Executor, LocalExecutor
from yolo_optimize.building.stage import REFERENCE, Stage, StageContext
from yolo_optimize.checkpoint import ModelSource
from yolo_optimize.errors import StageSkipped
from yolo_optimize.host.processes import classified, ended, native_output_to, oom_kills
from yolo_optimize.versions import tool_versions

BUILT, CACHED, FAILED, SKIPPED, NOT_NEEDED = "built", "cached", "failed", "skipped", "not needed"
REPAIRED = "repaired"  # its published folder differed from its manifest and was put right
LOCKS = ".locks"
PARENT_WAIT_S = 30  # how long a child waits for its parent's manifest to show (a shared store's listings lag)


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


@dataclass(frozen=True)
class NodeJob:
    """Everything a worker process needs to build one node (picklable)."""

    node: Node
    key: str
    inputs: dict[str, tuple[str, str]]  # role -> (parent node, the key this node was planned with)
    source: ModelSource
    model_dir: Path
    device: str
    threads: int
    force: bool
    facts: dict[str, Any]  # the node's tools and environment its key was planned with (``node_facts``)


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


def build_node(job: NodeJob) -> NodeResult:
    """Worker entry: build one node under its key's lock (this machine's builds), or find it built by a concurrent
    run (on any machine sharing the store); the result names this host."""
    final = store_folder(job.model_dir, job.node.name, job.key)
    locks = job.model_dir / LOCKS
    locks.mkdir(parents=True, exist_ok=True)
    sweep_leftovers(final.parent)  # a previous attempt of this node killed on this machine
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with FileLock(str(locks / f"{job.node.name}-{job.key[:KEY_CHARS]}.lock")), _gpu_slot(job):
            if not job.force and read_valid(final, job.key) is not None:
                result = NodeResult(job.node.name, CACHED, reason="built by a concurrent run")
            else:
                result = _build_locked(job, final)
    finally:
        signal.signal(signal.SIGINT, previous)
    result.host = platform.node()
    return result


def _gpu_slot(job: NodeJob) -> contextlib.AbstractContextManager[object]:
    """The machine-wide lock of the GPU for stages that must have it alone; nothing for the others."""
    if not (job.node.stage.exclusive_gpu and job.device == "cuda"):
        return contextlib.nullcontext()
    from yolo_optimize.host.environment import user_cache_dir

    user_cache_dir().mkdir(parents=True, exist_ok=True)
    return FileLock(str(user_cache_dir() / "gpu-0.lock"))  # the DAG builds on CUDA device 0


def _build_locked(job: NodeJob, final: Path) -> NodeResult:
    staging = staging_dir(final)
    started = time.perf_counter()
    log = job.model_dir / ".logs" / f"{job.node.name}.log"
    try:
        with native_output_to(log):
            manifest = _run_stage(job, staging)
        manifest.build_seconds = round(time.perf_counter() - started, 3)
        manifest.write(staging)
        if job.force:
            publish(staging, final)
        elif not publish_if_absent(staging, final):
            if read_valid(final, job.key) is not None:
                return NodeResult(job.node.name, CACHED, reason="built by a concurrent run")
            publish(staging, final)  # what was there does not verify: replaced
    except StageSkipped as skip:
        return NodeResult(job.node.name, SKIPPED, reason=str(skip))
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up short
        raise
    except Exception as err:  # noqa: BLE001 - reported as this node's failure
        with open(log, "a") as handle:
            traceback.print_exc(file=handle)
        return NodeResult(job.node.name, FAILED, time.perf_counter() - started,
                          reason=f"{classified(err)} (log: {log})")
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # gone already when published
    size = sum(f["bytes"] for f in manifest.files.values())
    return NodeResult(job.node.name, BUILT, manifest.build_seconds, size)


def _verified_inputs(job: NodeJob) -> dict[str, Path]:
    """Each input's store entry by role, checked against the key this node was planned with; a parent another
    machine just published may take a while to show in a shared store's listings (PARENT_WAIT_S)."""
    folders = {}
    for role, (parent, key) in job.inputs.items():
        folder = store_folder(job.model_dir, parent, key)
        deadline = time.monotonic() + PARENT_WAIT_S
        while read_valid(folder, key) is None:
            if time.monotonic() > deadline:
                raise RuntimeError(f"parent {parent} ({key[:KEY_CHARS]}) is missing or does not verify; build again")
            time.sleep(1)
        folders[role] = folder
    return folders


def check_facts(job: NodeJob) -> None:
    """The tools and environment here are the ones the node's key was planned with: a key that lied about them
    would let another machine trust a file built with other versions."""
    found = node_facts([job.node], job.source.family)[job.node.name]
    changed = [f"{name} {job.facts[part].get(name)} -> {value}" for part in ("tools", "environment")
               for name, value in found[part].items() if job.facts[part].get(name) != value]
    if changed:
        raise RuntimeError(f"this machine ({platform.node()}) differs from the one the key was planned for: "
                           f"{', '.join(changed)}; install the same versions on every building node")


def _run_stage(job: NodeJob, staging: Path) -> Manifest:
    from yolo_optimize.building.parity import check_parity

    stage = job.node.stage
    check_facts(job)
    ctx = StageContext(job.source, staging, _verified_inputs(job), job.device, job.threads, job.model_dir / ".cache")
    _limit_threads(job.threads)
    output = stage.run(ctx)
    manifest = Manifest(
        node=job.node.name, stage=stage.name, model_id=job.source.model_id, target=stage.target,
        precision=stage.precision, entry=output.entry, cache_key=job.key,
        parents={parent: key for parent, key in job.inputs.values()}, params=stage.params,
        tool_versions=tool_versions(stage.tools), metadata=output.metadata, info=output.info,
    )
    if REFERENCE in ctx.inputs:
        manifest.parity = check_parity(staging, manifest, ctx)
    return manifest


def _limit_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)

