"""The cores --check-on offers: names users know, each mapped to QEMU's model of it and the cpuinfo its runtimes read;
that the emulator then offers that core's instructions only is shown on the core itself (test_runs.py)."""

from __future__ import annotations

import pytest

from yolo_optimize.arm.cores import CORES, core_named, parse_cores
from yolo_optimize.errors import UserError


def test_the_pi_4_core_lacks_what_the_pi_5_core_has() -> None:
    a72, a76 = CORES["cortex-a72"], CORES["cortex-a76"]
    assert not a72.dot_product and not a72.fp16_arithmetic
    assert a76.dot_product and a76.fp16_arithmetic
    assert {core.qemu_cpu for core in CORES.values()}.isdisjoint({"max", "any"})


def test_cpuinfo_says_the_core_on_every_processor() -> None:
    text = CORES["cortex-a76"].cpuinfo(2)
    assert text.count("processor\t:") == 2 and text.count("CPU part\t: 0xd0b") == 2
    assert "asimddp" in text and "asimdhp" in text


def test_an_unknown_core_is_refused_naming_the_cores_offered() -> None:
    assert parse_cores("cortex-a76, cortex-a72") == ("cortex-a76", "cortex-a72")
    with pytest.raises(UserError) as refused:
        core_named("cortex-x4")
    assert "cortex-a72 (Raspberry Pi 4)" in str(refused.value) and "cortex-a76 (Raspberry Pi 5)" in str(refused.value)
