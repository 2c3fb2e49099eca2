"""A run on an emulated core leaves nothing behind: killed with SIGKILL (no clean-up runs), the process that started
it takes the emulated processes with it, and the mounts were only ever in their own namespace. Needs the ARM side."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import arm_side_missing

pytestmark = pytest.mark.skipif(bool(arm_side_missing()), reason=f"the ARM side is not ready here: "
                                                                   f"{arm_side_missing()} (sudo optimize arm-setup)")


def running(token: str, besides: int) -> list[int]:
    """The processes whose command line holds ``token``, but ``besides``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name == str(besides):
            continue
        try:
            if entry.name.isdigit() and token in (entry / "cmdline").read_bytes().decode(errors="replace"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_a_killed_check_leaves_no_emulated_process_and_no_mount(tmp_path: Path) -> None:
    token = f"{time.time_ns() % 10**6 + 300}.5"  # sleep's argument: unique to this test's emulated process
    code = ("from pathlib import Path\nfrom yolo_optimize.arm.cores import CORES\n"
            "from yolo_optimize.arm.emulator import run_on_core\nfrom yolo_optimize.arm.side import ArmSide\n"
            f"run_on_core(ArmSide.configured(), CORES['cortex-a72'], ['/bin/sleep', '{token}'], [], "
            f"Path({str(tmp_path)!r}), 1, 600)")
    starter = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.monotonic() + 60
    while not running(token, starter.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert running(token, starter.pid), "the emulated process never started"
    os.kill(starter.pid, signal.SIGKILL)
    starter.wait()
    deadline = time.monotonic() + 10
    while running(token, starter.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not running(token, starter.pid)
    assert "bookworm-arm64" not in Path("/proc/self/mountinfo").read_text()
