"""Other processes on the measuring CPUs are seen, our own are not, and a host is busy only past the CPUs the
measurement leaves free (real processes spinning on real CPUs; the rule on readings whose answer is known)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from yolo_optimize.host.busy import BUSY_CORES, BUSY_STEAL, CpuTimes, HostMeter, HostUse, host_before

pytestmark = pytest.mark.alone  # another test's processes on the CPUs would be this host's other work

SPIN = "import time\nend = time.time() + 600\nwhile time.time() < end: pass"


@contextmanager
def spinning(count: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` processes each keeping one CPU busy (ten minutes at most), stopped on leaving."""
    hogs = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(count)]
    try:
        yield hogs
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def test_processes_spinning_on_every_cpu_make_the_host_busy_and_say_how_much() -> None:
    cpus = len(HostMeter().cpus)
    with spinning(cpus):
        before = host_before(threads=cpus, seconds=1.0)
    found = before.use
    assert len(before.record()["load_average"]) == 3 and before.record()["busy"]
    assert found.busy and found.busy_blocks == found.blocks == 1
    assert found.others_cores > 0.7 * cpus, found.describe()
    assert f"of {cpus} CPUs" in found.describe()


def test_a_quiet_host_is_not_busy() -> None:
    found = host_before(threads=len(HostMeter().cpus), seconds=1.0).use
    assert not found.busy, found.describe()


def test_the_measurements_own_processes_are_not_counted_as_others() -> None:
    """A spinning process named as the measurement's own (a row's process) is not in its others' time: the same
    second read without naming it holds the spinning core as other work (at least half of one on a host that has
    other work of its own)."""
    with spinning(1) as hogs:
        named, unnamed = HostMeter((hogs[0].pid,)), HostMeter()
        with_it, without = named.use(threads=1), unnamed.use(threads=1)
        first = named.read(), unnamed.read()
        subprocess.run([sys.executable, "-c", "import time; time.sleep(1)"], check=True)
        with_it.add(first[0], named.read())
        without.add(first[1], unnamed.read())
    assert 0.5 < without.others_cores - with_it.others_cores < 1.15, (with_it.describe(), without.describe())


def readings(wall_s: float, others_s: float, steal_s: float) -> tuple[CpuTimes, CpuTimes]:
    return CpuTimes(0.0, 0.0, 0.0, 0.0), CpuTimes(wall_s, others_s + 1.0, steal_s, 1.0)  # 1 s of our own CPU time


@pytest.mark.parametrize(("cpus", "threads", "others_cores", "steal", "busy"), [
    (2, 2, BUSY_CORES + 0.05, 0.0, True),  # every CPU is the measurement's: any other process is in the way
    (2, 2, BUSY_CORES - 0.05, 0.0, False),
    (8, 2, 5.0, 0.0, False),  # six CPUs left free hold five cores of other work
    (8, 2, 6.0 + BUSY_CORES + 0.05, 0.0, True),
    (2, 2, 0.0, 2 * (BUSY_STEAL + 0.01), True),  # the hypervisor took the time
    (2, 1, 1.0, 0.0, False),  # the one-thread baseline beside one other core of work
])
def test_busy_counts_other_work_beyond_the_cpus_left_free_and_steal(cpus: int, threads: int, others_cores: float,
                                                                     steal: float, busy: bool) -> None:
    use = HostUse(cpus, threads)
    use.add(*readings(2.0, others_cores * 2.0, steal * 2.0))
    assert use.others_cores == pytest.approx(others_cores)
    assert use.busy is busy and use.busy_blocks == int(busy)


def test_an_unreadable_proc_stat_reads_as_unknown_never_as_a_quiet_host(monkeypatch: pytest.MonkeyPatch,
                                                                         tmp_path: Path) -> None:
    """A container without /proc/stat (here: the path made to name a missing file) knows nothing of other
    processes: the tally says unknown, and a row measured so is doubted as a busy one is."""
    from yolo_optimize.evaluation.results import Measurement, Row
    from yolo_optimize.host import busy

    monkeypatch.setattr(busy, "STAT", str(tmp_path / "missing"))
    before = host_before(1, 0.05)
    assert before.use.unknown and not before.use.busy and before.record()["unknown"]
    assert before.use.describe().startswith("unknown: ") and "could not be read" in before.use.describe()
    measured = Measurement(0.1, 0.1, [], 100.0, None, "fp32", 1, host=before.use)
    row = Row("onnx-fp32", "yolov5n", "onnx", "fp32", "", None, True, measurements=[measured])
    assert row.busy_host().startswith("the host's load is unknown")
