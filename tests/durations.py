"""The seconds each test module took in a measured run of the suite (``tests/durations.json``): the workers take the
modules longest first (``conftest.pytest_collection_modifyitems``), so that a run does not end with one worker
deep in a long module while the other has nothing left. A stale or missing entry changes only the order.

Written from the ``--durations=0`` report of a run: ``python -m tests.durations LOG``."""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

import pytest

DURATIONS = Path(__file__).with_name("durations.json")
REPORTED = re.compile(r"([\d.]+)s (?:call|setup|teardown)\s+(tests/\S+?\.py)::")


def module_seconds(report: str) -> dict[str, float]:
    """Each module's setup, call and teardown seconds summed, longest first, from pytest's durations report."""
    seconds: dict[str, float] = defaultdict(float)
    for line in report.splitlines():
        if found := REPORTED.match(line):
            seconds[found.group(2)] += float(found.group(1))
    return {module: round(total, 1) for module, total in sorted(seconds.items(), key=lambda item: -item[1])}


def longest_first(items: list[pytest.Item]) -> None:
    """``items`` sorted in place: their modules in descending measured time, each module's tests in their order (the
    sort is stable), modules not measured last."""
    seconds = json.loads(DURATIONS.read_text()) if DURATIONS.is_file() else {}
    items.sort(key=lambda item: -seconds.get(item.nodeid.split("::")[0], 0.0))


if __name__ == "__main__":
    DURATIONS.write_text(json.dumps(module_seconds(Path(sys.argv[1]).read_text()), indent=1) + "\n")
