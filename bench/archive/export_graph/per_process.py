"""An evaluation's rows against the same artifacts made another way and added as ``--add`` rows (a branch's
files beside main's): per process (round), the ratio of the row's latency to its added twin's, at the median and at
the 10% quantile of every sample (> 1: the added file is faster).

    python -m bench.archive.export_graph.per_process results.json --label chain > per_process.txt
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from bench.harness import parser_for


def main() -> None:
    parser = parser_for(__doc__)
    parser.add_argument("results", type=Path, help="the evaluation's results.json")
    parser.add_argument("--label", default="added", help="what the added files are, for the printed lines")
    parser.add_argument("--batch-sizes", default="1,8", help="the evaluation's batch sizes, in its order")
    args = parser.parse_args()
    rows = {row["name"]: row for row in json.loads(args.results.read_text())["rows"]}
    for base in rows:  # each built row with a file of the same target and precision added beside it
        added = next((name for name in rows if name.startswith(f"{base}-external")), None)
        if added is None:
            continue
        for index, batch in enumerate(args.batch_sizes.split(",")):
            ratios = []
            for process in range(len(rows[base]["measurements"])):
                ours, theirs = (rows[name]["measurements"][process]["batches"][index]["latency"]["samples_ms"]
                                for name in (base, added))
                ratios.append((np.median(ours) / np.median(theirs), np.quantile(ours, 0.1) / np.quantile(theirs, 0.1)))
            print(f"{base} b{batch}: main/{args.label} per process p50 " + ", ".join(f"{p:.3f}" for p, _ in ratios)
                  + " | q10 " + ", ".join(f"{q:.3f}" for _, q in ratios))


if __name__ == "__main__":
    main()
