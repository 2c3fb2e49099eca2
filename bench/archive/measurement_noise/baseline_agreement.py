"""How far the PyTorch baseline's own processes disagree in the saved reports: the figure behind `recommend`'s "not a
confident ranking" when it exceeds the 3% tie margin (issue 44).

    python -m bench.archive.measurement_noise.baseline_agreement [bench/results/zen4 ...]

For every results.json under the given folders that this version reads, each model's baseline row at each batch
size: its processes' throughputs in the host's fast state (``Row.process_spread``: highest over lowest, less one),
over all runs too, and whether a ranking would be qualified. Reads saved files only; nothing is measured. Saves
`baseline_agreement-<time>.json` in bench/results/.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bench.harness import save
from yolo_optimize.errors import UserError
from yolo_optimize.evaluation.reporting.report import load_report
from yolo_optimize.evaluation.results import is_baseline
from yolo_optimize.evaluation.run_statistics import TIE_MARGIN

RESULTS = Path(__file__).parent / "results"


def spreads(path: Path) -> list[dict[str, Any]]:
    """The baseline rows' disagreement in one saved report (none for a report this version does not read)."""
    try:
        report = load_report(path)
    except UserError:
        return []
    found = []
    for row in report.rows:
        if not is_baseline(row.target, row.precision) or len(row.measurements) < 2:
            continue
        for batch in report.settings.batch_sizes:
            fast = row.process_spread(batch)
            rounds = list(row.round_throughputs(batch).values())
            if fast is None or not rounds:
                continue
            found.append({"report": str(path.relative_to(RESULTS.parent)), "model": row.model, "batch": batch,
                          "processes": len(row.measurements), "fast_state_spread": round(fast, 4),
                          "all_runs_spread": round(max(rounds) / min(rounds) - 1, 4),
                          "qualified": fast > TIE_MARGIN})
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="*", type=Path, default=[RESULTS / "zen4"])
    args = parser.parse_args()
    rows = [row for folder in args.folders for path in sorted(folder.rglob("results.json")) for row in spreads(path)]
    for row in rows:
        print(f"{row['report']:70} {row['model']:16} b{row['batch']:<2} fast state {row['fast_state_spread']:6.1%} "
              f"all runs {row['all_runs_spread']:6.1%}{'  qualified' if row['qualified'] else ''}")
    qualified = sum(row["qualified"] for row in rows)
    print(f"{qualified} of {len(rows)} baseline batch sizes disagree by more than the {TIE_MARGIN:.0%} tie margin")
    save(RESULTS, "baseline_agreement", {"tie_margin": TIE_MARGIN, "rows": rows, "qualified": qualified}, 1)


if __name__ == "__main__":
    main()
