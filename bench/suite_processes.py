"""Summarizes a process log of a test run (``bench/process_log/sitecustomize.py``): how many processes the run
started, the CPU seconds they logged, by what they imported and by the test that started them; with ``--builds``,
the seconds each node of the run's shared builds took (``build_seconds`` of every manifest under the folder where
the suite's workers keep them, ``<pytest's basetemp>/shared``).

    python bench/suite_processes.py [/tmp/processes.jsonl] --label <commit> [--builds <basetemp>/shared]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from common import save


def summary(records: list[dict[str, Any]], top: int) -> dict[str, Any]:
    by_kind: Counter[str] = Counter()
    count_by_kind: Counter[str] = Counter()
    by_test: Counter[str] = Counter()
    count_by_test: Counter[str] = Counter()
    for record in records:
        kind = "+".join(record["imported"]) or "none of them"
        by_kind[kind] += record["cpu_s"]
        count_by_kind[kind] += 1
        by_test[record["test"] or "(the test workers themselves)"] += record["cpu_s"]
        count_by_test[record["test"] or "(the test workers themselves)"] += 1
    return {
        "processes": len(records), "cpu_s": round(sum(r["cpu_s"] for r in records)),
        "by_imports": [{"imported": kind, "processes": count_by_kind[kind], "cpu_s": round(cpu)}
                       for kind, cpu in by_kind.most_common()],
        "by_test": [{"test": test, "processes": count_by_test[test], "cpu_s": round(cpu)}
                    for test, cpu in by_test.most_common(top)],
    }


def build_seconds(shared: Path) -> dict[str, float]:
    """``<build folder>/<model>/<node>`` -> the seconds its manifest recorded, for every node of the shared builds
    (``artifacts*``, the published folders: their content-keyed ``.store`` copies and the evaluations' folders hold
    the same manifests)."""
    return {str(manifest.parent.relative_to(shared)): json.loads(manifest.read_text())["build_seconds"]
            for manifest in sorted(shared.glob("artifacts*/*/**/manifest.json")) if ".store" not in manifest.parts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path, nargs="?", help="the process log (none: only --builds)")
    parser.add_argument("--label", required=True)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--builds", type=Path, help="the suite's shared folder, to read its builds' node seconds")
    parser.add_argument("--save", type=Path, default=Path("bench/results"))
    args = parser.parse_args()
    found: dict[str, Any] = {}
    if args.log:
        found = summary([json.loads(line) for line in args.log.read_text().splitlines()], args.top)
        print(f"{found['processes']} processes logged {found['cpu_s']} CPU seconds")
        for row in found["by_imports"][:10]:
            print(f"  {row['cpu_s']:6d} s in {row['processes']:4d} processes importing {row['imported']}")
        for row in found["by_test"][:15]:
            print(f"  {row['cpu_s']:6d} s in {row['processes']:4d} processes of {row['test']}")
    if args.builds:
        found["build_seconds"] = build_seconds(args.builds)
        for node, seconds in sorted(found["build_seconds"].items(), key=lambda item: -item[1])[:15]:
            print(f"  {seconds:7.1f} s building {node}")
    save(args.save, f"suite_processes-{args.label}", {"label": args.label, **found}, 0)


if __name__ == "__main__":
    main()
