"""What runs on the emulated core (``python -m yolo_optimize.arm.worker REQUEST``): an artifact's raw outputs for
images, read back with what the runtime says it executed and what the core offers. It imports only numpy, OpenCV,
the artifact's runtime and this package's modules that need no more (the rootfs has nothing else).

Images are given either as files, each read and letterboxed here by ARM's own OpenCV (the deployed path, from image
file to raw output), or as prepared pixels (the model alone, fed the very tensors x86 was fed). The images are
split among processes, each with its own one-thread runtime: emulation is 100-400x slower than a real core, and
processes are how it uses every CPU here."""

from __future__ import annotations

import json
import struct
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

from yolo_optimize.arm.emulator import die_with_parent

AT_HWCAP, AT_HWCAP2 = 16, 26
HWCAP_BITS = {"asimdhp": 10, "asimddp": 20, "sve": 22}  # arch/arm64/include/uapi/asm/hwcap.h
HWCAP2_BITS = {"i8mm": 13, "bf16": 14}
RESULT, OUTPUTS, PIXELS = "result.json", "outputs.npy", "pixels.npy"


@dataclass(frozen=True)
class WorkRequest:
    """One worker run, as the host writes it (every path as seen inside the rootfs)."""

    folder: str  # the artifact's folder
    manifest: dict[str, Any]  # its manifest (possibly not yet written: a candidate being checked)
    imgsz: int
    out: str
    processes: int
    images: tuple[str, ...] = ()  # image files, letterboxed here (and run, unless pixels are given)
    pixels: str = ""  # an .npy of prepared uint8 NHWC images to run

    @classmethod
    def read(cls, path: Path) -> WorkRequest:
        data = json.loads(path.read_text())
        return cls(**{**data, "images": tuple(data["images"])})

    @property
    def count(self) -> int:
        return len(np.load(self.pixels, mmap_mode="r")) if self.pixels else len(self.images)


def core_features() -> dict[str, bool]:
    """What the kernel (QEMU here) tells programs this core has: the HWCAP bits NCNN and XNNPACK read."""
    words = {AT_HWCAP: 0, AT_HWCAP2: 0}
    data = Path("/proc/self/auxv").read_bytes()
    for offset in range(0, len(data) - 15, 16):
        key, value = struct.unpack("<QQ", data[offset:offset + 16])
        if key in words:
            words[key] = value
    return {**{name: bool(words[AT_HWCAP] >> bit & 1) for name, bit in HWCAP_BITS.items()},
            **{name: bool(words[AT_HWCAP2] >> bit & 1) for name, bit in HWCAP2_BITS.items()}}


def ncnn_features() -> dict[str, bool]:
    """What NCNN itself detects on this core (its FP16 arithmetic needs asimdhp), where NCNN is installed."""
    try:
        import ncnn
    except ImportError:
        return {}
    return {"ncnn_neon": bool(ncnn.cpu_support_arm_neon()), "ncnn_asimdhp": bool(ncnn.cpu_support_arm_asimdhp())}


def _run_part(request: WorkRequest, indices: list[int]) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray],
                                                                   dict[str, str]]:
    """Raw outputs (and, for files, the letterboxed pixels) of the images at ``indices``, on one thread."""
    from yolo_optimize.artifact import Manifest
    from yolo_optimize.metadata import ArtifactMetadata
    from yolo_optimize.runtime.runners import open_runner

    manifest = Manifest(**request.manifest)
    family = ArtifactMetadata.of(manifest).model_family()
    given = np.load(request.pixels, mmap_mode="r") if request.pixels else None
    outputs, pixels = {}, {}
    with open_runner(Path(request.folder), manifest, threads=1) as runner:
        for index in indices:
            if request.images:
                pixels[index] = family.preprocess(Path(request.images[index]), request.imgsz).pixels
            image = pixels[index] if given is None else np.asarray(given[index])
            outputs[index] = runner.infer(runner.input_of(image[None]))
        ran = {"executed_precision": runner.executed_precision, "compute_precision": runner.compute_precision}
    return outputs, pixels, ran


def main(path: Path) -> None:
    request = WorkRequest.read(path)
    started = time.monotonic()
    count = request.count
    parts = [list(range(count))[k::request.processes] for k in range(min(request.processes, count))]
    # each process dies with this one (a fork does not keep the parent-death signal the host set)
    with ProcessPoolExecutor(len(parts), mp_context=get_context("fork"), initializer=die_with_parent) as pool:
        done = list(pool.map(_run_part, [request] * len(parts), parts))
    outputs = {i: o for part in done for i, o in part[0].items()}
    out = Path(request.out)
    np.save(out / OUTPUTS, np.concatenate([outputs[i] for i in range(count)]))
    pixels = {i: p for part in done for i, p in part[1].items()}
    if pixels:
        np.save(out / PIXELS, np.stack([pixels[i] for i in range(count)]))
    facts = {**done[0][2], "features": {**core_features(), **ncnn_features()},
             "seconds": round(time.monotonic() - started, 2), "processes": len(parts)}
    (out / RESULT).write_text(json.dumps(facts) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
