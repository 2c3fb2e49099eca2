"""When each worker of a test run ran each test: how evenly the two workers' modules end, and how long each waited
between its tests (for another worker's test marked alone, or its turn).

As a pytest plugin it writes one line per test (start, end, node id) into ``$SUITE_TIMELINE/<worker>.txt``; on its
own it summarizes such a folder per worker (its modules' start and end, its busy and waiting seconds, the longest
waits) and saves the summary as JSON:

    SUITE_TIMELINE=/tmp/timeline PYTHONPATH=bench python -m pytest -p suite_timeline
    python bench/suite_timeline.py /tmp/timeline --label <commit>
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

_started: dict[str, float] = {}


def pytest_runtest_logstart(nodeid: str, location: object) -> None:
    _started[nodeid] = time.time()


def pytest_runtest_logfinish(nodeid: str, location: object) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker and nodeid in _started:  # a worker's own runs (the controller reports them again)
        with open(Path(os.environ["SUITE_TIMELINE"]) / f"{worker}.txt", "a") as log:
            log.write(f"{_started[nodeid]:.2f} {time.time():.2f} {nodeid}\n")


def summary(folder: Path) -> dict[str, Any]:
    """Per worker: its modules in the order it ran them (start and end, seconds from the run's first test), the
    seconds its tests took and the seconds it waited between them, and its five longest waits."""
    runs = {path.stem: [(float(start), float(end), nodeid) for start, end, nodeid in
                        (line.split(" ", 2) for line in path.read_text().splitlines())]
            for path in sorted(folder.glob("gw*.txt"))}
    first = min(tests[0][0] for tests in runs.values())
    workers = {}
    for worker, tests in runs.items():
        waits = sorted(((tests[i][0] - tests[i - 1][1], tests[i][2]) for i in range(1, len(tests))), reverse=True)
        modules: dict[str, list[float]] = {}
        for start, end, nodeid in tests:
            span = modules.setdefault(nodeid.split("::")[0], [start - first, end - first])
            span[1] = end - first
        workers[worker] = {"ended_s": round(tests[-1][1] - first), "tests_s": round(sum(e - s for s, e, _ in tests)),
                           "waiting_s": round(sum(wait for wait, _ in waits if wait > 0.5)),
                           "longest_waits": [[round(wait), nodeid] for wait, nodeid in waits[:5]],
                           "modules": [[module, round(a), round(b)] for module, (a, b) in modules.items()]}
    return workers


def main() -> None:
    from common import save

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--label", required=True, help="the commit the run tested")
    parser.add_argument("--save", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    workers = summary(args.folder)
    for worker, found in workers.items():
        print(f"{worker}: ended at {found['ended_s']} s, tests {found['tests_s']} s, waiting {found['waiting_s']} s")
    save(args.save, f"suite_timeline-{args.label}", {"label": args.label, "workers": workers}, threads=0)


if __name__ == "__main__":
    main()
