"""The CPU facts decisions depend on: the CPUs this process may use (affinity, cgroup quota)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from yolo_optimize.host.cpu import _cgroup_quota, usable_cpus


def test_a_process_pinned_to_one_cpu_uses_one() -> None:
    script = ("import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
              "from yolo_optimize.host.cpu import usable_cpus; print(usable_cpus())")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "1"
    import os

    assert usable_cpus() <= len(os.sched_getaffinity(0)) <= (os.cpu_count() or 1)


@pytest.mark.parametrize(("cpu_max", "cpus"), [("max 100000", None), ("150000 100000", 2), ("50000 100000", 1),
                                               ("200000 100000\n", 2)])
def test_a_cgroup_quota_bounds_the_cpus_rounded_up(tmp_path: Path, cpu_max: str, cpus: int | None) -> None:
    (tmp_path / "cpu.max").write_text(cpu_max)
    assert _cgroup_quota(tmp_path) == cpus
    assert _cgroup_quota(tmp_path / "absent") is None
