"""Run the worker on an emulated core: the rootfs entered in a mount namespace of its own (so every mount goes when
the run ends, however it ends), with /proc/cpuinfo saying that core, QEMU_CPU set to its model, and the folders the
run reads (the package, artifacts, images) bound read-only under /mnt/host, the one it writes bound writable."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from pathlib import Path

from yolo_optimize.arm.cores import ArmCore
from yolo_optimize.arm.side import ArmSide

HOST = "/mnt/host"  # where a folder of this machine is inside the rootfs: /mnt/host/<its path here>
SOURCE = "/mnt/host-src"  # holds the package's own folder, importable from there
PACKAGE = Path(__file__).resolve().parents[1]  # this package's folder, bound read-only into the rootfs

_SCRIPT = r"""
set -e
R=$1; CPUINFO=$2; CPUS=$3; OUT=$4; PACKAGE=$5; shift 5
mount -t proc proc "$R/proc"
mount --bind "$CPUINFO" "$R/proc/cpuinfo"
mount -t tmpfs tmpfs "$R/sys"
mkdir -p "$R/sys/devices/system/cpu"
echo "0-$((CPUS - 1))" > "$R/sys/devices/system/cpu/possible"
echo "0-$((CPUS - 1))" > "$R/sys/devices/system/cpu/present"
mount --rbind /dev "$R/dev"
mount -t tmpfs tmpfs "$R/tmp"
mount -t tmpfs tmpfs "$R/mnt"
mkdir -p "$R/mnt/host-src/yolo_optimize" "$R/mnt/host"
mount --bind -o ro "$PACKAGE" "$R/mnt/host-src/yolo_optimize"
while [ "$1" != "--" ]; do
    mkdir -p "$R/mnt/host$1"; mount --bind -o ro "$1" "$R/mnt/host$1"; shift
done
shift
mkdir -p "$R/mnt/host$OUT"; mount --bind "$OUT" "$R/mnt/host$OUT"
exec "$@"
"""


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent() -> None:
    """Have the kernel kill this process when the one that started it dies, even by SIGKILL (which runs no clean-up):
    an emulated check must not outlive a killed build. Kept across exec (unshare, sh, chroot and the worker, which
    sets it again in each of its processes)."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def run_on_core(side: ArmSide, core: ArmCore, argv: list[str], reads: list[Path], writes: Path, cpus: int,
                timeout: float) -> subprocess.CompletedProcess[str]:
    """``argv`` (a program inside the rootfs) run on ``core`` with ``cpus`` processors, reading ``reads`` (folders)
    and writing ``writes`` (each at /mnt/host/<its path>); its whole process group is killed on a timeout or an
    interrupt, so no emulated process outlives the call."""
    with tempfile.TemporaryDirectory(prefix="yolo-optimize-arm-") as folder:
        cpuinfo = Path(folder) / "cpuinfo"
        cpuinfo.write_text(core.cpuinfo(cpus))
        folders = sorted({str(path.resolve()) for path in reads})
        inside = ["/usr/sbin/chroot", str(side.rootfs), "/usr/bin/env", "-i", f"QEMU_CPU={core.qemu_cpu}",
                  "PATH=/usr/bin:/bin", "HOME=/root", "LANG=C.UTF-8", f"PYTHONPATH={SOURCE}",
                  "PYTHONDONTWRITEBYTECODE=1", "OMP_NUM_THREADS=1", *argv]
        command = ["unshare", "--mount", "--propagation", "private", "sh", "-c", _SCRIPT, "sh", str(side.rootfs),
                   str(cpuinfo), str(cpus), str(writes.resolve()), str(PACKAGE), *folders, "--", *inside]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   start_new_session=True, preexec_fn=die_with_parent)
        try:
            out, err = process.communicate(timeout=timeout)
        except BaseException:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise
        return subprocess.CompletedProcess(command, process.returncode, out, err)
