"""Whether something else was using the CPUs a measurement ran on: other processes' CPU time and the hypervisor's
steal, read from ``/proc`` around each timed block.

Why: a speedup is a ratio of two rows' speeds on the same cores. When another job shares
them, each runtime slows by its own factor (issue 44: on a loaded 2-core host PyTorch at two
threads ran 10-25x slower than at one, ONNX Runtime barely slower), and the matrix then shows a
5.65x that a quiet host measures at 1.55x. The load average cannot tell: it counts the
measurement's own threads. So the evaluator reads, around every block a row times, the CPU time
spent on the measuring CPUs (``/proc/stat``, their own lines) less the time of its own processes
(``/proc/<pid>/stat``: the rows' and its own), and the time stolen by the hypervisor. Other
processes are in the way only beyond the CPUs the measurement leaves free (``threads`` of them
taken), so a host is *busy* for a row when other processes used more than BUSY_CORES cores past
those, or steal took more than BUSY_STEAL of the CPUs' time.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

BUSY_CORES = 0.25  # other processes' cores beyond the free CPUs that make a measurement unreliable
BUSY_STEAL = 0.05  # the share of the measuring CPUs' time the hypervisor may steal before a measurement is unreliable
BEFORE_S = 0.5  # how long the host is watched before anything is measured
TICK_S = 1 / os.sysconf("SC_CLK_TCK")
IDLE_FIELDS = (3, 4)  # /proc/stat: idle, iowait
STEAL_FIELD = 7
COUNTED_FIELDS = 8  # user nice system idle iowait irq softirq steal (guest time is inside user)
STAT = "/proc/stat"


def measuring_cpus() -> frozenset[int]:
    """The CPUs this process may run on (its affinity mask): the only ones whose load matters."""
    return frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else frozenset()


@dataclass(frozen=True)
class CpuTimes:
    """Cumulative seconds at one moment: busy and stolen on the measuring CPUs, and spent by our processes."""

    at: float  # time.perf_counter()
    busy_s: float  # every CPU's non-idle time less steal
    steal_s: float
    ours_s: float  # the given processes' user and system time, every thread
    known: bool = True  # False: /proc/stat could not be read, so nothing is known of the other processes

    @classmethod
    def now(cls, pids: tuple[int, ...], cpus: frozenset[int]) -> CpuTimes:
        ticks = _stat_ticks(cpus)
        busy, steal = ticks or (0, 0)
        return cls(time.perf_counter(), busy * TICK_S, steal * TICK_S, sum(map(_process_ticks, pids)) * TICK_S,
                   ticks is not None)


def _stat_ticks(cpus: frozenset[int]) -> tuple[int, int] | None:
    """Busy (non-idle, non-steal) and steal ticks summed over ``cpus``' lines of /proc/stat (every CPU's when the
    mask is unknown); None where /proc/stat cannot be read."""
    busy = steal = 0
    try:
        lines = Path(STAT).read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        name, *fields = line.split()
        if not name.startswith("cpu") or name == "cpu" or (cpus and int(name[3:]) not in cpus):
            continue
        ticks = [int(value) for value in fields[:COUNTED_FIELDS]]
        steal += ticks[STEAL_FIELD]
        busy += sum(ticks) - sum(ticks[i] for i in IDLE_FIELDS) - ticks[STEAL_FIELD]
    return busy, steal


def _process_ticks(pid: int) -> int:
    """utime + stime of ``pid``, every thread (0 once it is gone); not its reaped children's, which would land in
    one block all at once."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0
    return sum(int(value) for value in fields[11:13])


@dataclass
class HostUse:
    """What else ran on the measuring CPUs while a measurement timed its blocks, added up over them."""

    cpus: int  # measuring CPUs
    threads: int  # the measurement's own threads
    wall_s: float = 0.0
    others_cpu_s: float = 0.0  # CPU time of other processes on the measuring CPUs
    steal_s: float = 0.0
    blocks: int = 0
    busy_blocks: int = 0  # blocks in which the host was busy on their own
    unknown: bool = False  # /proc/stat could not be read: whether other processes ran is unknown, not "none"

    def add(self, before: CpuTimes, after: CpuTimes) -> None:
        """One block, between two readings."""
        self.unknown = self.unknown or not (before.known and after.known)
        wall = after.at - before.at
        others = max(0.0, (after.busy_s - before.busy_s) - (after.ours_s - before.ours_s))
        steal = max(0.0, after.steal_s - before.steal_s)
        self.wall_s += wall
        self.others_cpu_s += others
        self.steal_s += steal
        self.blocks += 1
        self.busy_blocks += self._busy(wall, others, steal)

    @property
    def others_cores(self) -> float:
        """Other processes' average use of the measuring CPUs, in cores."""
        return self.others_cpu_s / self.wall_s if self.wall_s else 0.0

    @property
    def steal_share(self) -> float:
        return self.steal_s / (self.wall_s * self.cpus) if self.wall_s and self.cpus else 0.0

    @property
    def busy(self) -> bool:
        """Other processes took more than BUSY_CORES cores beyond the free CPUs, or steal more than BUSY_STEAL, over
        the blocks as a whole."""
        return self._busy(self.wall_s, self.others_cpu_s, self.steal_s)

    def _busy(self, wall_s: float, others_s: float, steal_s: float) -> bool:
        if wall_s <= 0:
            return False
        free = max(0, self.cpus - self.threads)
        return others_s / wall_s - free > BUSY_CORES or steal_s / (wall_s * max(self.cpus, 1)) > BUSY_STEAL

    def describe(self) -> str:
        """'other processes used 1.20 of 2 CPUs (this measurement 2 threads), steal 0%, 9 of 12 blocks busy'."""
        if self.unknown:
            return f"unknown: {STAT} could not be read, so whether other processes shared the CPUs is not known"
        return (f"other processes used {self.others_cores:.2f} of {self.cpus} CPUs (this measurement "
                f"{self.threads} threads), steal {self.steal_share:.0%}, {self.busy_blocks} of {self.blocks} "
                "blocks busy")


class HostMeter:
    """Reads of the measuring CPUs' times, counting ``pids`` (and this process) as the measurement's own."""

    def __init__(self, pids: tuple[int, ...] = ()) -> None:
        self.cpus = measuring_cpus()
        self.pids = (os.getpid(), *pids)

    def read(self) -> CpuTimes:
        return CpuTimes.now(self.pids, self.cpus)

    def use(self, threads: int) -> HostUse:
        """An empty tally for a measurement running ``threads`` threads on these CPUs."""
        return HostUse(len(self.cpus) or (os.cpu_count() or 1), threads)


@dataclass(frozen=True)
class HostBefore:
    """The host as found before anything was measured: what else ran on the measuring CPUs, and the load average
    then (recorded, not judged: it counts every runnable thread, the measurement's own later on)."""

    use: HostUse
    load_average: tuple[float, float, float]

    def record(self) -> dict[str, Any]:
        """As results.json's environment holds it."""
        return {**asdict(self.use), "busy": self.use.busy, "describe": self.use.describe(),
                "load_average": [round(value, 2) for value in self.load_average]}


def host_before(threads: int, seconds: float = BEFORE_S) -> HostBefore:
    """The measuring CPUs watched for ``seconds`` before anything is measured (this process idle meanwhile)."""
    meter = HostMeter()
    load = os.getloadavg()
    use, before = meter.use(threads), meter.read()
    time.sleep(seconds)
    use.add(before, meter.read())
    return HostBefore(use, load)
