"""The ARM cores a build or an evaluation can be checked on: each a name users know, the board it is in, QEMU's CPU
model for it (which offers that core's instructions only: QEMU's default ``max`` offers every one, which would hide
the illegal-instruction crashes a real Pi 4 shows), and the ``/proc/cpuinfo`` lines its runtimes read.

ONNX Runtime's CPU detection (pytorch/cpuinfo) reads ``/proc/cpuinfo`` and aborts on an x86 one; NCNN reads the
auxiliary vector (HWCAP), which QEMU fills from its CPU model: both see the same core. A v8.6+/v9 phone core with
i8mm is not offered: Debian 12's QEMU (7.2) models none (its only core with i8mm is ``max``)."""

from __future__ import annotations

from dataclasses import dataclass

from yolo_optimize.errors import UserError

V8_0 = ("fp", "asimd", "evtstrm", "aes", "pmull", "sha1", "sha2", "crc32", "cpuid")
V8_2 = (*V8_0, "atomics", "fphp", "asimdhp", "asimdrdm", "lrcpc", "dcpop", "asimddp")


@dataclass(frozen=True, kw_only=True)
class ArmCore:
    """One core: what ``--check-on`` takes, the emulator's model, and what ``/proc/cpuinfo`` says of it."""

    name: str
    found_in: str
    qemu_cpu: str
    part: int  # MIDR's part number
    variant: int
    revision: int
    features: tuple[str, ...]

    @property
    def dot_product(self) -> bool:
        """SDOT/UDOT (ARMv8.2 dotprod): NCNN's and XNNPACK's fast INT8 kernels."""
        return "asimddp" in self.features

    @property
    def fp16_arithmetic(self) -> bool:
        """Half-precision vector arithmetic (ARMv8.2 FP16): NCNN computes an FP16 file in FP16 only where it is."""
        return "asimdhp" in self.features

    def cpuinfo(self, cpus: int) -> str:
        """``/proc/cpuinfo`` of ``cpus`` such cores, as Linux on arm64 writes it."""
        one = (f"BogoMIPS\t: 108.00\nFeatures\t: {' '.join(self.features)}\nCPU implementer\t: 0x41\n"
               f"CPU architecture: 8\nCPU variant\t: {self.variant:#x}\nCPU part\t: {self.part:#05x}\n"
               f"CPU revision\t: {self.revision}\n\n")
        return "".join(f"processor\t: {index}\n{one}" for index in range(cpus))


CORES = {core.name: core for core in (
    ArmCore(name="cortex-a72", found_in="Raspberry Pi 4", qemu_cpu="cortex-a72", part=0xD08, variant=0, revision=3,
            features=V8_0),
    ArmCore(name="cortex-a76", found_in="Raspberry Pi 5", qemu_cpu="cortex-a76", part=0xD0B, variant=4, revision=1,
            features=V8_2),
    ArmCore(name="neoverse-n1", found_in="AWS Graviton2, Ampere Altra", qemu_cpu="neoverse-n1", part=0xD0C,
            variant=3, revision=1, features=(*V8_2, "ssbs")),
)}


CORES_HELP = ", ".join(f"{core.name}: {core.found_in}" for core in CORES.values())


def core_named(name: str) -> ArmCore:
    """The core ``name`` (as ``--check-on`` takes it); a UserError listing the cores otherwise."""
    if name not in CORES:
        offered = ", ".join(f"{core.name} ({core.found_in})" for core in CORES.values())
        raise UserError(f"unknown ARM core {name!r}: --check-on takes {offered}")
    return CORES[name]


def parse_cores(text: str) -> tuple[str, ...]:
    """A comma list of core names, each checked."""
    return tuple(core_named(name.strip()).name for name in text.split(",") if name.strip())
