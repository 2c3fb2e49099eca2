"""Energy from RAPL counters (``/sys/class/powercap``), where this machine exposes them and lets us read them.

A measurement or a reason, never an estimate: VMs usually have no powercap RAPL driver, and
since 2020 (CVE-2020-8694) ``energy_uj`` is readable by root only unless an admin opens it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

POWERCAP = Path("/sys/class/powercap")


@dataclass(frozen=True)
class Energy:
    joules_per_image: float | None
    domains: list[str]  # the RAPL package domains summed
    unavailable: str = ""  # why nothing was measured


def package_domains() -> tuple[list[Path], str]:
    """Readable RAPL package domains (``intel-rapl:N``; AMD CPUs use the same driver), or why there are none."""
    if not POWERCAP.is_dir():
        return [], "not measured: this machine has no /sys/class/powercap (no RAPL driver; usual in VMs)"
    domains = sorted(p for p in POWERCAP.glob("intel-rapl:*") if p.name.count(":") == 1)
    if not domains:
        return [], "not measured: /sys/class/powercap has no RAPL package domain"
    try:
        for domain in domains:
            int((domain / "energy_uj").read_text())
    except PermissionError:
        return [], ("not measured: RAPL energy_uj is readable by root only here (since CVE-2020-8694); "
                    "an admin can open it with chmod o+r /sys/class/powercap/intel-rapl:*/energy_uj")
    except (OSError, ValueError) as err:
        return [], f"not measured: RAPL counters unreadable ({err})"
    return domains, ""


def measure_energy(work: Callable[[], int]) -> Energy:
    """Joules per image of ``work`` (which returns how many images it processed), from the package counters."""
    domains, reason = package_domains()
    if not domains:
        return Energy(None, [], reason)
    before = [_counter(d) for d in domains]
    images = work()
    after = [_counter(d) for d in domains]
    spent = sum(_delta(a, b, _counter(d, "max_energy_range_uj")) for d, a, b in zip(domains, before, after))
    return Energy(round(spent / 1e6 / images, 4), [(d / "name").read_text().strip() for d in domains])


def _counter(domain: Path, name: str = "energy_uj") -> int:
    return int((domain / name).read_text())


def _delta(before: int, after: int, wraps_at: int) -> int:
    """Microjoules between two readings of a counter that wraps around at ``wraps_at``."""
    return after - before if after >= before else after + wraps_at - before
