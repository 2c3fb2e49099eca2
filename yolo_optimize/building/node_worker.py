"""Building one node in a worker process: under its key's lock, into a staging folder published only whole, after
checking that this machine's tools are the ones its key was planned with and that its parents verify.

Apart from the scheduling loop (``scheduling.Build``) because this is what runs elsewhere: in this machine's
worker processes, or on a Ray cluster's nodes (``executor.py``), from a picklable ``NodeJob``.
"""

from __future__ import annotations

import contextlib
import platform
import shutil
import signal
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from yolo_optimize.artifact import (
    KEY_CHARS,
    Manifest,
    publish,
    publish_if_absent,
    read_valid,
    staging_dir,
    store_folder,
    sweep_leftovers,
)
from yolo_optimize.building.dag import BUILT, CACHED, FAILED, SKIPPED, Node, NodeResult, node_facts
from yolo_optimize.building.stage import REFERENCE, StageContext
from yolo_optimize.checkpoint import ModelSource
from yolo_optimize.errors import StageSkipped
from yolo_optimize.host.processes import classified, native_output_to
from yolo_optimize.versions import tool_versions

LOCKS = ".locks"  # the model folder's lock files: one per node and key, and one per published view
PARENT_WAIT_S = 30  # how long a child waits for its parent's manifest to show (a shared store's listings lag)


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
    return NodeResult(job.node.name, BUILT, manifest.build_seconds, size, reason=checked_on_arm(manifest))


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


def checked_on_arm(manifest: Manifest) -> str:
    """What the ARM checks of a built node took, for the build's table (empty without --check-on)."""
    checked = {core: found for core, found in ((manifest.parity or {}).get("on_arm") or {}).items()
               if found.get("checked", True)}
    gated = manifest.info.get("gate", {}).get("on_arm", {})
    if not checked:
        return ""
    seconds = sum(found["seconds"] for found in (*checked.values(), *gated.values()))
    return (f"{'parity and gate' if gated else 'parity'} passed on {', '.join(checked)} (emulated, "
            f"{seconds:.0f} s)")


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
        if cores := ctx.manifest(REFERENCE).params.get("check_on"):
            from yolo_optimize.building.arm_checks import check_on_cores

            check_on_cores(staging, manifest, ctx, cores, getattr(stage.config, "gate", None))
    return manifest


def _limit_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)
