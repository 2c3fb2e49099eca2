"""``optimize arm-setup``: make the ARM side once (side.py says what it is). Each part is made only where it is
missing, into a ``.partial`` folder renamed into place when whole, so an interrupted setup leaves nothing that looks
ready and a rerun starts that part again; the slow part (debootstrap, about 8 minutes on 2 cores) is shared by every
set of wheels."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from yolo_optimize.arm.cores import CORES
from yolo_optimize.arm.emulator import HOST, run_on_core
from yolo_optimize.arm.side import BINFMT, BINFMT_ENTRY, EMULATOR, PYTHON_TAG, READY, SUITE, ArmSide
from yolo_optimize.errors import UserError
from yolo_optimize.host.cpu import usable_cpus

DEBIAN_MIRROR = "http://deb.debian.org/debian"
DEBIAN_PACKAGES = ("qemu-user-static", "debootstrap")
ROOTFS_PACKAGES = ("python3", "python3-venv", "ca-certificates")
BINFMT_CONF = Path("/usr/lib/binfmt.d/qemu-aarch64.conf")  # Debian's registration line for the emulator
SETUP_CORE = "cortex-a72"  # the venv is made on the core with the fewest instructions, so any core can run it
SETUP_STEP_S = 1800  # pip installing the wheels under emulation: 35 s seen here
WHEEL_PLATFORMS = ("manylinux2014_aarch64", "manylinux_2_28_aarch64", "manylinux_2_35_aarch64")  # bookworm: 2.36


def prepare(side: ArmSide, say: Callable[[str], None]) -> None:
    """Everything a check on an emulated core needs, made where missing."""
    if os.geteuid() != 0:
        raise UserError("arm-setup needs root: it installs Debian packages, registers the emulator with binfmt_misc "
                        "and makes an arm64 rootfs (sudo optimize arm-setup)")
    if os.uname().machine != "x86_64":
        raise UserError(f"arm-setup emulates an ARM core on x86_64; this machine is {os.uname().machine}: "
                        f"pip install -e \".[edge]\" and evaluate here")
    _install_tools(say)
    _register_emulator(say)
    side.home.mkdir(parents=True, exist_ok=True)
    if not (side.rootfs / "usr/bin/python3").exists():
        _make_rootfs(side, say)
    if side.ready_record() is None:
        _make_venv(side, say)
    say(f"the ARM side is ready: {side.rootfs}, {side.venv} ({', '.join(side.pins)})")


def _install_tools(say: Callable[[str], None]) -> None:
    if shutil.which(EMULATOR) and shutil.which("debootstrap"):
        return
    if not shutil.which("apt-get"):
        raise UserError(f"{EMULATOR} or debootstrap is missing and there is no apt-get to install them: install "
                        f"QEMU's user-mode emulator and debootstrap with this system's package manager")
    say(f"installing {', '.join(DEBIAN_PACKAGES)} with apt-get")
    _run(["apt-get", "update", "-qq"])
    _run(["apt-get", "install", "-y", "-qq", *DEBIAN_PACKAGES], env={"DEBIAN_FRONTEND": "noninteractive"})


def _register_emulator(say: Callable[[str], None]) -> None:
    """binfmt_misc hands aarch64 programs to QEMU; its F flag opens the emulator now, so the rootfs needs no copy."""
    if not (BINFMT / "register").exists():
        _run(["mount", "-t", "binfmt_misc", "binfmt_misc", str(BINFMT)])
    if BINFMT_ENTRY.exists():
        if "enabled" not in BINFMT_ENTRY.read_text():
            BINFMT_ENTRY.write_text("1")
        return
    say("registering qemu-aarch64 with binfmt_misc")
    (BINFMT / "register").write_text(BINFMT_CONF.read_text().strip())


def _make_rootfs(side: ArmSide, say: Callable[[str], None]) -> None:
    partial = side.rootfs.with_name(side.rootfs.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    say(f"making an arm64 Debian {SUITE} under {side.rootfs} with debootstrap (about 8 minutes)")
    _run(["debootstrap", "--arch=arm64", "--variant=minbase", f"--include={','.join(ROOTFS_PACKAGES)}", SUITE,
          str(partial), DEBIAN_MIRROR])
    shutil.rmtree(side.rootfs, ignore_errors=True)  # one left without its python3 by an older, broken setup
    partial.rename(side.rootfs)


def _make_venv(side: ArmSide, say: Callable[[str], None]) -> None:
    """The pinned aarch64 wheels, downloaded here by pip for the rootfs' Python, installed there with no network."""
    say(f"downloading the aarch64 wheels of {', '.join(side.pins)}")
    platforms = [flag for platform in WHEEL_PLATFORMS for flag in ("--platform", platform)]
    _run([sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:", *platforms,
          "--python-version", PYTHON_TAG, "--dest", str(side.wheels), *side.pins])
    venv = side.rootfs / side.venv.lstrip("/")
    partial = venv.with_name(venv.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    inside = "/" + str(partial.relative_to(side.rootfs))
    say(f"installing them into {side.venv} inside the rootfs (emulated)")
    _in_rootfs(side, ["/usr/bin/python3", "-m", "venv", inside])
    _in_rootfs(side, [f"{inside}/bin/python", "-m", "pip", "install", "--quiet", "--no-index", "--find-links",
                      HOST + str(side.wheels.resolve()), *side.pins])
    (partial / READY).write_text(json.dumps({"pins": list(side.pins), "suite": SUITE, "python": PYTHON_TAG}) + "\n")
    _fix_venv_paths(partial, inside, side.venv)
    partial.rename(venv)


def _fix_venv_paths(partial: Path, made_at: str, final: str) -> None:
    """A venv names its own folder in pyvenv.cfg and its scripts' first lines: made as .partial, it is renamed."""
    for path in [partial / "pyvenv.cfg", *(partial / "bin").iterdir()]:
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            if made_at.encode() in data[:4096]:
                path.write_bytes(data.replace(made_at.encode(), final.encode()))


def _in_rootfs(side: ArmSide, argv: list[str]) -> None:
    """``argv`` run in the rootfs the way every check runs there (emulator.py), the wheels at /mnt/host/<their
    path>; its failure is one line with the end of what it printed."""
    done = run_on_core(side, CORES[SETUP_CORE], argv, [], side.wheels, usable_cpus(), SETUP_STEP_S)
    if done.returncode:
        said = (done.stderr.strip() or done.stdout.strip()).splitlines()[-3:]
        raise RuntimeError(f"arm-setup: {' '.join(argv[:3])} ... exited {done.returncode} in the rootfs: "
                           f"{' | '.join(said)}")


def _run(argv: list[str], env: dict[str, str] | None = None) -> None:
    """Run a setup step; its failure is one line naming the step and the end of what it printed."""
    done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, **(env or {})}, check=False)
    if done.returncode:
        said = (done.stderr.strip() or done.stdout.strip()).splitlines()[-3:]
        raise RuntimeError(f"arm-setup: {' '.join(argv[:3])} ... exited {done.returncode}: {' | '.join(said)}")
