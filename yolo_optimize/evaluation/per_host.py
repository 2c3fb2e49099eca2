"""``optimize eval --executor ray --on kind=a,kind=b``: the whole evaluation once per host kind, on its own node.

Each host's ``run_evaluation`` (today's code: fresh processes per row, interleaved rounds) runs as
one Ray task pinned to the node chosen for its selector, holding that node's bench slot, all its
CPUs and GPUs for the whole measurement, so nothing else Ray schedules lands there meanwhile. The
device 'auto' means and the default thread count are resolved there. Each host writes a complete
report folder (``<out>/kind-a/``: ``report``, ``recommend`` and ``compare`` read it as any other),
with the cluster facts (node, labels, load before and after, the interval) in its environment;
the driver adds ``hosts.csv``, ``hosts.md`` and a ``report.html`` that puts the hosts side by side
(``reporting/hosts_report.py``).
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from yolo_optimize.artifact import written_whole
from yolo_optimize.cluster.nodes import BENCH_SLOT, ClusterNode, choose_hosts, folder_name
from yolo_optimize.cluster.ray_cluster import (
    check_shared,
    connect,
    driver_node,
    gathered,
    live_nodes,
    on_node,
    shared_paths,
)
from yolo_optimize.evaluation.options import EvalOptions
from yolo_optimize.evaluation.reporting.hosts_report import HostRun, write_hosts

HostProgress = Callable[[str, str, int, int], None]  # (selector, text, done, total)
POLL_S = 0.5


def evaluate_on_hosts(options: EvalOptions, progress: HostProgress) -> list[HostRun]:
    """Every ``options.on`` selector's evaluation on its node, at once; the runs in selector order, merged files in
    ``options.out``."""
    from ray.util.queue import Queue
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    ray, out = connect(options.ray_address), options.out_folder
    here = driver_node(ray)
    chosen = choose_hosts(options.on, live_nodes(ray), here)
    for selector, node in chosen.items():
        progress(selector, f"measuring on {node.describe()}", 0, 0)
    inputs = {"DIRECTORY": options.root, "--data": options.data, "--checkpoint": options.checkpoint,
              **{f"--add {path}": Path(str(path).rpartition("=")[2]) for path in options.add}}
    check_shared(ray, list(chosen.values()), shared_paths(out, inputs))
    queue = Queue(actor_options={"num_cpus": 0,
                                 "scheduling_strategy": NodeAffinitySchedulingStrategy(here, soft=False)})
    refs = {selector: on_node(ray, node, evaluate_here, replace(options, out=out.absolute() / folder_name(selector)),
                              selector, node, queue, cpus=node.cpus, gpus=node.gpus, resources={BENCH_SLOT: 1})
            for selector, node in chosen.items()}
    pending = list(refs.values())
    while pending:
        _, pending = ray.wait(pending, timeout=POLL_S)
        while not queue.empty():
            progress(*queue.get())
    runs = gathered(ray, list(refs.values()))
    write_hosts(runs, out)
    return runs


def evaluate_here(options: EvalOptions, selector: str, node: ClusterNode, queue: Any) -> HostRun:
    """The measuring node's side: the request checked here (device and threads are this node's), measured, written."""
    from yolo_optimize.evaluation.reporting.report import write_report
    from yolo_optimize.evaluation.session import EvalRequest, run_evaluation

    request, out = EvalRequest.of(options), options.out_folder
    load_before, started = os.getloadavg(), time.time()
    report = run_evaluation(replace(request, out=None),
                            lambda text, done, total: queue.put((selector, text, done, total)))
    load_after, finished = os.getloadavg(), time.time()
    report.environment["cluster"] = {
        "selector": selector, "node_id": node.node_id, "hostname": platform.node(), "labels": node.labels,
        "resources_held": {"CPU": node.cpus, "GPU": node.gpus, BENCH_SLOT: 1},
        "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in load_after],
        "started": started, "finished": finished}
    with written_whole(out, last="results.json") as staging:
        write_report(report, staging)
    return HostRun(selector, node, out, report, started, finished)
