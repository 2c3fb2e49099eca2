"""What a build takes from the machine that builds, read there (``Executor.probe``): the device 'auto' stands for,
the CPU's INT8 arithmetic and its measured bf16 and fp32 rates. On a cluster that machine is a node, not the
driver, so it is probed apart from the requests that carry its answers."""

from __future__ import annotations

from dataclasses import dataclass

from yolo_optimize.limits.choices import (
    BF16_RUNTIMES,
    Bf16Evidence,
    bf16_evidence,
    bf16_matters,
    float_parts_precision,
)


@dataclass(frozen=True)
class HostFacts:
    """What a build takes from the machine that builds: the device 'auto' stands for, the CPU's INT8 arithmetic, and
    its measured bf16 and fp32 rates where it computes bf16 natively (``limits/choices.py``)."""

    device: str
    int8_vnni: bool | None = None  # the CPU multiplies u8 x s8 without saturating (int8 builds only)
    int8_float_precision: str | None = None  # bf16 where it measures faster than fp32, else fp32 (int8 builds only)
    bf16: tuple[Bf16Evidence, ...] = ()  # per runtime that runs bf16 artifacts (builds with int8 or bf16 only)


def host_facts(device: str, precisions: tuple[str, ...]) -> HostFacts:
    """Read on the building machine (``Executor.probe``): its limits (``optimize info``, measured once per machine
    and tool versions, then cached) only where it has native bf16 and bf16 matters to this build."""
    from yolo_optimize.host.cpu import has_vnni, usable_cpus
    from yolo_optimize.host.devices import resolve_device
    from yolo_optimize.limits.peaks import machine_limits

    evidence: tuple[Bf16Evidence, ...] = ()
    if bf16_matters(precisions):
        limits = machine_limits(usable_cpus())
        evidence = tuple(bf16_evidence(limits, runtime) for runtime in BF16_RUNTIMES)
    if "int8" not in precisions:
        return HostFacts(resolve_device(device), bf16=evidence)
    openvino = next((e for e in evidence if e.runtime == "openvino"), bf16_evidence(None, "openvino"))
    return HostFacts(resolve_device(device), has_vnni(), float_parts_precision(openvino), evidence)
