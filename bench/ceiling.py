"""How far issue 21's batch-8 goal (the best artifact >= 5x PyTorch eager) lies from what this host can do.

    python -m bench.ceiling [--report bench/results/zen4/fastest_artifact] [--goal 5]

Reads a saved ``bench/fastest_artifact.py`` report (results.json and the per-artifact profiles beside it; nothing
is measured again) and prints, for every artifact whose profile has per-layer times:

- its batch-8 img/s and the share of the measured peak of the precision it runs in (the matrix's utilization);
- the img/s the goal asks for (``--goal`` times PyTorch eager at batch 8) and the share of the same peak that
  would take over the whole forward pass;
- the share of its layer time spent in convolutions and matrix products (the work the peak measures), and the
  batch-8 img/s it would reach if every other layer took no time at all (an upper bound: its convolutions as fast
  as they run today, the rest free);
- what the other layers would have to shrink to for the goal, with the convolutions as they are, and the kinds
  that take their time today.

The profile's shares are batch 1 on the eval's threads; batch 8 runs one-thread streams of one image each, so the
bound assumes the same split of time at one thread. Saves the table with the environment under ``--save``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.harness import parser_for, results_folder, save
from yolo_optimize.evaluation.reporting.report import load_report
from yolo_optimize.evaluation.results import MatrixRow
from yolo_optimize.runtime.layers import WEIGHT_INPUT

# The layers the measured peaks are about: every weighted kind of ONNX Runtime and OpenVINO, the integer GEMMs
# onnx-int8's head runs as (optimize/integer_head.py), and the PyTorch profiler's top-level convolutions.
PRODUCT_KINDS = frozenset(WEIGHT_INPUT) | {"MatMulIntegerToFloat", "aten::conv2d", "aten::_convolution", "aten::linear"}
BASELINE = "pytorch-fp32"


def product_share(profile: dict[str, Any]) -> float | None:
    """The share of the per-layer time in convolutions and matrix products; None without per-layer kinds (AOTInductor's
    compiled kernels have none) or without a product among them."""
    by_kind = profile.get("by_kind_ms") or {}
    products = sum(ms for kind, ms in by_kind.items() if kind in PRODUCT_KINDS)
    return products / sum(by_kind.values()) if products else None


def other_kinds(profile: dict[str, Any], top: int = 3) -> str:
    """The largest non-product layer kinds with their shares of the per-layer time."""
    by_kind = profile["by_kind_ms"]
    total = sum(by_kind.values())
    others = sorted(((ms, kind) for kind, ms in by_kind.items() if kind not in PRODUCT_KINDS), reverse=True)
    return ", ".join(f"{kind} {ms / total:.0%}" for ms, kind in others[:top])


def ceiling(line: MatrixRow, profile: dict[str, Any], goal_ips: float) -> dict[str, Any] | None:
    """One artifact's bound against the goal, or None when its profile has no per-layer kinds."""
    share, b8, peak = product_share(profile), line.at(8).throughput_ips, line.peak_gops
    if share is None or not b8:
        return None
    others_allowed = b8 / goal_ips - share  # the goal leaves b8 / goal_ips of today's time per image
    return {
        "model": line.model, "artifact": line.artifact, "runs_in": line.executed_precision,
        "b8_ips": round(b8, 1), "b8_of_peak": line.at(8).utilization, "peak_of": line.peak_of,
        "peak_gops": peak, "goal_ips": round(goal_ips, 1),
        "goal_of_peak": round(goal_ips * line.gflops_per_image / peak, 3) if peak and line.gflops_per_image else None,
        "product_share": round(share, 3), "products_alone_b8_ips": round(b8 / share, 1),
        "products_alone_reach_goal": b8 / share >= goal_ips,
        "others_must_shrink_to": round(others_allowed / (1 - share), 3) if others_allowed > 0 else 0.0,
        "others_today": other_kinds(profile),
    }


def percent(share: float | None) -> str:
    return f"{share:.0%}" if share is not None else "n/a"


def table(rows: list[dict[str, Any]], goal: float) -> str:
    lines = [f"| artifact | runs in | b8 img/s | of its peak | {goal:g}x eager | needs of the peak | "
             "convolutions' share | b8 if only they took time | other layers must shrink to | the largest others |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        shrink = (f"{r['others_must_shrink_to']:.0%} of today" if r["others_must_shrink_to"] > 0
                  else "out of reach even at zero")
        lines.append(f"| {r['model']} {r['artifact']} | {r['runs_in'].split(' (')[0]} | {r['b8_ips']} | "
                     f"{percent(r['b8_of_peak'])} | {r['goal_ips']} | {percent(r['goal_of_peak'])} | "
                     f"{r['product_share']:.0%} | {r['products_alone_b8_ips']} | {shrink} | {r['others_today']} |")
    return "\n".join(lines)


def main() -> None:
    parser = parser_for(__doc__)
    parser.add_argument("--report", type=Path, default=Path("bench/results/zen4/fastest_artifact"))
    parser.add_argument("--goal", type=float, default=5.0, help="the batch-8 speedup over PyTorch eager asked for")
    parser.add_argument("--save", type=Path, default=results_folder("ceiling"))
    args = parser.parse_args()
    report = load_report(args.report)
    matrix = [line for line in report.matrix if line.status == "ok"]
    rows = []
    for model in dict.fromkeys(line.model for line in matrix):
        lines = {line.artifact: line for line in matrix if line.model == model}
        goal_ips = args.goal * lines[BASELINE].at(8).throughput_ips if BASELINE in lines else None
        for artifact, line in lines.items():
            path = args.report / "profiles" / model / artifact / "profile.json"
            if goal_ips and artifact != BASELINE and path.exists():
                found = ceiling(line, json.loads(path.read_text()), goal_ips)
                rows += [found] if found else []
    print(table(rows, args.goal))
    reachable = [f"{r['model']} {r['artifact']}" for r in rows if r["products_alone_reach_goal"]]
    print(f"within reach if only the convolutions took time: {', '.join(reachable) or 'none'}")
    save(args.save, "ceiling", {"report": str(args.report), "goal": args.goal, "rows": rows,
                                "environment_of_report": report.environment}, threads=0)  # 0: nothing measured here


if __name__ == "__main__":
    main()
