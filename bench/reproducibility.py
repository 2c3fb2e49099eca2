"""Do two consecutive ``optimize eval`` runs of the same artifacts agree? (rankings and speedups)

    python bench/reproducibility.py artifacts/ [--repeats 3] [--batch-sizes 1,8]

Runs ``optimize eval --no-accuracy`` twice on the same artifacts and prints, per batch size,
whether the two runs rank the artifacts the same by speedup (artifacts within TIE of each
other in a run count as tied, in either order) and the largest relative
disagreement between the two runs' speedups. Goal: same ranking, every speedup within 10%.
Both reports and a summary are saved under bench/results/.
"""

from __future__ import annotations

import argparse
import itertools
import subprocess
import sys
from pathlib import Path
from typing import Any

from common import save

from yolo_optimize.evaluation.reporting.report import load_report
from yolo_optimize.evaluation.results import MatrixRow

TIE, GOAL = 0.05, 0.10


def evaluate(artifacts: Path, out: Path, args: argparse.Namespace) -> dict[str, MatrixRow]:
    subprocess.run([sys.executable, "-m", "yolo_optimize", "eval", str(artifacts), "--no-accuracy", "--out", str(out),
                    "--repeats", str(args.repeats), "--batch-sizes", args.batch_sizes, "--min-time",
                    str(args.min_time), "--threads", str(args.threads)], check=True)
    return measured(out)


def measured(report: Path) -> dict[str, MatrixRow]:
    """An eval's matrix lines of the rows it measured, by artifact."""
    return {line.artifact: line for line in load_report(report).matrix if line.status == "ok"}


def speedups(lines: dict[str, MatrixRow], batch: int) -> dict[str, float]:
    """Each artifact's speedup at ``batch``."""
    return {name: line.at(batch).speedup for name, line in lines.items()}


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("artifacts", type=Path)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-sizes", default="1,8")
    parser.add_argument("--min-time", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--save", type=Path, default=Path("bench/results"))
    args = parser.parse_args()
    runs = [evaluate(args.artifacts, args.save / f"reproducibility-run{n}", args) for n in (1, 2)]
    sizes = [int(batch) for batch in args.batch_sizes.split(",")]
    summary = {f"b{batch}": agreement(*(speedups(run, batch) for run in runs), batch) for batch in sizes}
    save(args.save, "reproducibility", {"settings": vars(args) | {"artifacts": str(args.artifacts),
                                                                   "save": str(args.save)}, "summary": summary},
         args.threads)


if __name__ == "__main__":
    main()
