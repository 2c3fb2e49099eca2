"""This machine's workers: a check run before the nodes runs in the worker that then builds them, its refusal arrives
as the user error it was, and a build's own process never imports torch or the family's package."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import VAL_DATA, WEIGHTS
from tests.host.test_processes import WORKER_MARK
from yolo_optimize.building.builder import executor_for
from yolo_optimize.building.executor import LocalExecutor, default_jobs
from yolo_optimize.building.options import build_options
from yolo_optimize.errors import UserError
from yolo_optimize.host.cpu import usable_cpus


def pid_of_worker(_: object = None) -> int:
    return os.getpid()


def refuse(message: str) -> None:
    raise UserError(message)


def workers_alive() -> set[int]:
    """This process's live spawned workers (not multiprocessing's resource tracker, which outlives every pool)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
                command = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if int(fields[1]) == os.getpid() and fields[0] not in ("Z", "X") and WORKER_MARK.encode() in command:
                found.add(int(entry.name))
    return found


def test_threads_share_the_cpus_a_build_may_use_between_its_jobs() -> None:
    """``--threads``, the option added to show that an option is one declaration and the code that uses it."""
    options = build_options(None, {"model": str(WEIGHTS), "threads": 3, "jobs": 2}, "test")
    assert executor_for(options).threads == 1, "3 CPUs for 2 nodes: one thread each"
    assert executor_for(build_options(None, {"threads": 3, "jobs": 1}, "test")).threads == 3
    assert executor_for(build_options(None, {"jobs": 1}, "test")).threads == usable_cpus()
    with pytest.raises(UserError, match="--threads shares this machine's CPUs"):
        executor_for(build_options(None, {"threads": 3, "executor": "ray"}, "test"))


def test_without_jobs_a_host_of_two_cpus_builds_one_node_at_a_time_and_a_larger_one_two() -> None:
    """Each worker imports PyTorch and the model's package before its first node: on 2 CPUs a second one costs more
    than it wins (bench/archive/build_time/build_jobs.py). With --threads the build's CPUs are those threads."""
    assert [default_jobs(cpus) for cpus in (1, 2, 3, 16)] == [1, 1, 2, 2]
    assert executor_for(build_options(None, {"threads": 2}, "test")).threads == 2
    assert executor_for(build_options(None, {"threads": 4}, "test")).threads == 2
    assert LocalExecutor(None).jobs == default_jobs(usable_cpus())
    assert LocalExecutor(3).jobs == 3


def test_the_check_before_the_nodes_runs_in_the_worker_that_then_builds_them() -> None:
    executor = LocalExecutor(jobs=1)
    checked_in = executor.before_nodes(pid_of_worker)
    assert checked_in != os.getpid()
    with executor.workers(1) as workers:
        assert workers.submit(pid_of_worker, None).result() == checked_in
    executor.close()
    assert checked_in not in workers_alive()


def test_a_refusing_check_is_the_user_error_it_raised_and_leaves_no_worker() -> None:
    executor = LocalExecutor(jobs=2)
    with pytest.raises(UserError, match="^the checkpoint was refused$"):
        executor.before_nodes(refuse, "the checkpoint was refused")
    executor.close()
    assert not workers_alive()


BUILD = """
import json, sys
import yolo_optimize as yo
built = yo.build(sys.argv[1], targets=["torchscript"], precisions=["fp32"], imgsz=[160], parity_data=sys.argv[2],
                 out=sys.argv[3])
print(json.dumps({"statuses": built.statuses(),
                  "imported": [m for m in ("torch", "yolov5", "ultralytics") if m in sys.modules]}))
"""


@pytest.mark.slow
def test_a_build_loads_the_checkpoint_only_in_its_workers(tmp_path: Path) -> None:
    """A fresh build of the real checkpoint: the model is loaded (and a bad one refused) in the workers that build it,
    so the calling process imports neither torch nor yolov5 (about 10 s of a 2-core machine each time)."""
    result = subprocess.run([sys.executable, "-c", BUILD, str(WEIGHTS), str(VAL_DATA), str(tmp_path / "out")],
                            capture_output=True, text=True, timeout=600,
                            env={**os.environ, "YOLO_OPTIMIZE_OFFLINE": "1"})
    assert result.returncode == 0, result.stderr[-2000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["statuses"]["load"] == found["statuses"]["torchscript-fp32"] == "built", found
    assert found["imported"] == []
