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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import save


def summary(records: list[dict[str, Any]], top: int) -> dict[str, Any]:
    by_imports = _totals(records, lambda record: "+".join(record["imported"]) or "none of them")
    by_test = _totals(records, lambda record: record["test"] or "(the test workers themselves)")
    return {"processes": len(records), "cpu_s": round(sum(r["cpu_s"] for r in records)),
            "by_imports": [{"imported": name, **found} for name, found in by_imports],
            "by_test": [{"test": name, **found} for name, found in by_test[:top]]}


def _totals(records: list[dict[str, Any]], group: Callable[[dict[str, Any]], str]) -> list[tuple[str, dict[str, int]]]:
    """Processes and CPU seconds per ``group`` of a record, most CPU first."""
    cpu: Counter[str] = Counter()
    processes: Counter[str] = Counter()
    for record in records:
        cpu[group(record)] += record["cpu_s"]
        processes[group(record)] += 1
    return [(name, {"processes": processes[name], "cpu_s": round(seconds)}) for name, seconds in cpu.most_common()]


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
