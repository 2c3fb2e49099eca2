"""The ARM side: an arm64 Debian (a debootstrap rootfs) with a venv of the runtimes' own aarch64 wheels, at the
versions installed here, run by QEMU's user-mode emulator through binfmt_misc. Made once by ``optimize arm-setup``
(setup.py) under ``YOLO_OPTIMIZE_ARM_HOME`` and reused; a check refuses, in one line saying what is missing and how
to make it, where it is not ready. Nothing is downloaded at check time."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from functools import cached_property
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from yolo_optimize.errors import UserError

HOME_VARIABLE = "YOLO_OPTIMIZE_ARM_HOME"
DEFAULT_HOME = Path("/var/cache/yolo-optimize/arm")  # root's: making the rootfs and running in it need root
SUITE = "bookworm"  # Debian 12: Python 3.11, the Python the aarch64 wheels below are taken for
PYTHON_TAG = "3.11"
EMULATOR = "qemu-aarch64-static"
BINFMT = Path("/proc/sys/fs/binfmt_misc")
BINFMT_ENTRY = BINFMT / "qemu-aarch64"
# what every check reads images and arrays with, beside the runtimes; onnx: ONNX Runtime's "runs in" reads the graph
ALWAYS = ("numpy", "onnx", "opencv-python-headless")
READY = "READY.json"
SETUP_COMMAND = "sudo optimize arm-setup"


def arm_runtimes() -> tuple[str, ...]:
    """The packages of the runtimes the format table marks as checked on ARM (``Runtime.on_arm``)."""
    from yolo_optimize.formats import formats

    return tuple(sorted({f.runtime.package for f in formats().values() if f.runtime.on_arm}))


def installed_version(package: str) -> str:
    """This machine's version of ``package`` (opencv-python-headless: opencv-python's where only that is here)."""
    for name in (package, "opencv-python") if package == "opencv-python-headless" else (package,):
        try:
            return version(name)
        except PackageNotFoundError:
            continue
    raise UserError(f"{package} is not installed here, so the ARM side cannot take the same version: "
                    f"pip install -e \".[edge]\"")


@dataclass(frozen=True)
class ArmSide:
    """Where the ARM side lives and what it holds: the rootfs, and in it one venv per set of pinned wheels."""

    home: Path

    @classmethod
    def configured(cls) -> ArmSide:
        return cls(Path(os.environ.get(HOME_VARIABLE) or DEFAULT_HOME))

    @property
    def rootfs(self) -> Path:
        return self.home / f"{SUITE}-arm64"

    @property
    def wheels(self) -> Path:
        """The aarch64 wheels downloaded on this machine, installed from there without the network."""
        return self.home / "wheels"

    @cached_property
    def pins(self) -> tuple[str, ...]:
        """``package==version`` for everything the venv holds: this machine's versions, so both sides run one
        release."""
        return tuple(f"{package}=={installed_version(package)}" for package in sorted({*ALWAYS, *arm_runtimes()}))

    @property
    def venv(self) -> str:
        """The venv's path inside the rootfs, named by the pins it holds."""
        digest = hashlib.sha256("\n".join((SUITE, PYTHON_TAG, *self.pins)).encode()).hexdigest()[:12]
        return f"/opt/yolo-optimize/venv-{digest}"

    @property
    def python(self) -> str:
        return f"{self.venv}/bin/python"

    def ready_record(self) -> dict[str, object] | None:
        """What setup wrote once the venv was whole (None: not made, or left half made)."""
        marker = self.rootfs / self.venv.lstrip("/") / READY
        return json.loads(marker.read_text()) if marker.is_file() else None

    def missing(self) -> str | None:
        """What keeps a check from running on an emulated core, in a few words (None: nothing)."""
        if os.uname().machine != "x86_64":
            return f"this machine is {os.uname().machine}, the ARM side emulates an ARM core on x86_64"
        if os.geteuid() != 0:
            return "running in the arm64 rootfs needs root (a mount namespace and chroot)"
        if not shutil.which(EMULATOR):
            return f"{EMULATOR} is not installed"
        if not BINFMT_ENTRY.is_file() or "enabled" not in BINFMT_ENTRY.read_text():
            return "QEMU's aarch64 binfmt_misc entry is not registered (setup registers it; a reboot drops it)"
        if not (self.rootfs / "usr/bin/python3").exists():
            return f"no arm64 rootfs under {self.home}"
        if self.ready_record() is None:
            return f"the rootfs has no venv of {', '.join(self.pins)}"
        return None

    def require(self, option: str) -> None:
        """Refuse ``option`` in one line where the ARM side is not ready."""
        if why := self.missing():
            raise UserError(f"{option} needs the ARM side, and {why}: run `{SETUP_COMMAND}` once (it installs "
                            f"qemu-user-static and debootstrap with apt and makes an arm64 Debian under "
                            f"{self.home}, ${HOME_VARIABLE} to choose where)")
