"""Ray against one machine: do evaluations through Ray agree with local ones, and how does a build sweep scale?

    python -m bench.archive.cluster.cluster [--artifacts artifacts-cluster] [--repeats 2] [--rounds 2]

Starts a local Ray cluster in this process (a head with no CPUs, nodes on this machine, usage stats off) and
drives the CLI against it as a user would:

1. Integrity: the same artifacts (yolov5n onnx/openvino fp32, built first into --artifacts) evaluated locally
   and through Ray on one node holding every CPU and the bench slot, alternately (local, ray, local, ray...;
   each an ``optimize eval`` process of its own, no accuracy). Per speedup cell the largest relative
   difference between a Ray run and the local run next to it, and ranking conflicts (reproducibility.py's
   rules). Goal: every cell within 10%, the same ranking.
2. Build sweep: yolov5n at 320 and 640 to onnx and openvino fp32, from scratch, locally (--jobs 2), through
   Ray on one node with 2 CPUs, and on two nodes with 1 CPU each: wall time of the whole ``optimize build``.

Saves bench/results/<cpu kind>/cluster-<time>.json.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
from pathlib import Path
from typing import Any

from bench.harness import optimize, parser_for, results_folder, save
from yolo_optimize.evaluation.reporting.report import load_report
from yolo_optimize.evaluation.results import MatrixRow

ASSETS = Path("../shared/assets")
SWEEP = ("--imgsz", "320,640", "--targets", "onnx,openvino", "--precisions", "fp32")
QUIET = {"RAY_USAGE_STATS_ENABLED": "0", "YOLO_OPTIMIZE_OFFLINE": "1"}


TIE, GOAL = 0.05, 0.10  # speedups this close count as tied; two runs' speedups this close agree


def timed_optimize(*args: str | Path) -> float:
    """Run the CLI; its wall time."""
    return round(optimize(*args, env=QUIET).wall_s, 1)


def measured(report: Path) -> dict[str, MatrixRow]:
    """An eval's matrix lines of the rows it measured, by artifact."""
    return {line.artifact: line for line in load_report(report).matrix if line.status == "ok"}


def speedups(lines: dict[str, MatrixRow], batch: int) -> dict[str, float]:
    """Each artifact's speedup at ``batch``."""
    return {name: line.at(batch).speedup or 0.0 for name, line in lines.items()}


def rank_conflicts(first: dict[str, float], second: dict[str, float]) -> list[str]:
    """Pairs ordered one way in one run and the other way in the other, neither run calling them tied (each run:
    artifact -> speedup)."""
    conflicts = []
    for a, b in itertools.combinations(sorted(set(first) & set(second)), 2):
        orders = []
        for run in (first, second):
            ratio = run[a] / run[b]
            orders.append(0 if abs(ratio - 1) <= TIE else (1 if ratio > 1 else -1))
        if orders[0] * orders[1] < 0:
            conflicts.append(f"{a} vs {b}: {first[a]}/{first[b]} then {second[a]}/{second[b]}")
    return conflicts


def agreement(first: dict[str, float], second: dict[str, float], batch: int) -> dict[str, Any]:
    """Do two runs' speedups at ``batch`` (artifact -> speedup) meet the goal? Printed, and returned for the saved
    summary."""
    gaps = {name: abs(first[name] / second[name] - 1) for name in set(first) & set(second)}
    worst = max(gaps, key=gaps.__getitem__)
    conflicts = rank_conflicts(first, second)
    met = not conflicts and gaps[worst] <= GOAL
    print(f"b{batch}: ranking {'agrees' if not conflicts else 'DIFFERS: ' + '; '.join(conflicts)}; largest speedup "
          f"disagreement {gaps[worst]:.1%} ({worst}); goal {'met' if met else 'MISSED'}")
    return {"same_ranking": not conflicts, "rank_conflicts": conflicts,
            "largest_speedup_disagreement": round(gaps[worst], 4),
            "worst_artifact": worst, "speedups": {name: [first[name], second[name]] for name in sorted(gaps)},
            "goal_met": met}




def cluster(cpus_per_node: list[int], labels: list[str]) -> Any:
    """A local cluster: a head with no CPUs and one node per entry, each with a bench slot."""
    from ray.cluster_utils import Cluster

    small: dict[str, Any] = {"object_store_memory": 128 * 2**20}  # only results travel through Ray
    found = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False, **small})
    for cpus, kind in zip(cpus_per_node, labels):
        found.add_node(num_cpus=cpus, labels={"kind": kind}, resources={"bench_slot": 1}, **small)
    found.wait_for_nodes()
    return found


def integrity(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Local and Ray evaluations of the same artifacts, alternating; each Ray run against the local run before it."""
    if not (args.artifacts / "yolov5n").is_dir():
        timed_optimize("build", ASSETS / "weights" / "yolov5n.pt", "--out", args.artifacts, "--parity-data",
                 ASSETS / "coco_val128", "--targets", "onnx,openvino", "--precisions", "fp32")
    common = ["--no-accuracy", "--repeats", str(args.repeats), "--batch-sizes", "1,8", "--min-time", "1"]
    threads = os.cpu_count() or 1
    running = cluster([threads], ["local"])
    pairs = []
    try:
        for index in range(args.rounds):
            local, ray = work / f"local-{index}", work / f"ray-{index}"
            timed_optimize("eval", args.artifacts, "--out", local, *common)
            timed_optimize("eval", args.artifacts, "--out", ray, "--executor", "ray", "--ray-address", running.address,
                     "--on", "kind=local", *common)
            first, second = measured(local), measured(ray / "kind-local")
            pairs.append({batch: agreement(speedups(first, batch), speedups(second, batch), batch) for batch in (1, 8)})
    finally:
        running.shutdown()
    worst = max(pair[b]["largest_speedup_disagreement"] for pair in pairs for b in pair)
    conflicts = [c for pair in pairs for b in pair for c in pair[b]["rank_conflicts"]]
    print(f"local vs ray: largest speedup difference {worst:.1%}, ranking conflicts {len(conflicts)}")
    return {"pairs": pairs, "largest_disagreement": worst, "rank_conflicts": conflicts,
            "goal_met": worst <= 0.10 and not conflicts}


def sweep(work: Path) -> dict[str, float]:
    """Wall time of one build sweep from scratch: locally, on one Ray node with every CPU, on two with one each."""
    build: list[str | Path] = [
        "build", ASSETS / "weights" / "yolov5n.pt", "--parity-data", ASSETS / "coco_val128", *SWEEP]
    times = {"local (--jobs 2)": timed_optimize(*build, "--out", work / "sweep-local", "--jobs", "2")}
    for name, cpus in (("ray, 1 node x 2 CPUs", [2]), ("ray, 2 nodes x 1 CPU", [1, 1])):
        running = cluster(cpus, ["build"] * len(cpus))
        try:
            times[name] = timed_optimize(*build, "--out", work / f"sweep-{len(cpus)}", "--executor", "ray",
                                         "--ray-address", running.address)
        finally:
            running.shutdown()
    for name, seconds in times.items():
        print(f"build sweep, {name}: {seconds} s")
    return times


def main() -> None:
    parser = parser_for(__doc__)
    parser.add_argument("--artifacts", type=Path, default=Path("artifacts-cluster"))
    parser.add_argument("--repeats", type=int, default=2, help="interleaved rounds inside each evaluation")
    parser.add_argument("--rounds", type=int, default=2, help="local/ray pairs of evaluations")
    parser.add_argument("--work", type=Path, default=Path("/tmp/yolo-optimize-cluster-bench"))
    parser.add_argument("--save", type=Path, default=results_folder("cluster"))
    args = parser.parse_args()
    os.environ.update(QUIET)
    shutil.rmtree(args.work, ignore_errors=True)
    result = {"integrity": integrity(args, args.work), "build_sweep_s": sweep(args.work)}
    save(args.save, "cluster", result, os.cpu_count() or 1)


if __name__ == "__main__":
    main()
