"""One artifact run on an emulated core through the worker: the request written here, the worker run in the rootfs
(emulator.py), its outputs and facts read back. A worker that dies is one line naming the core: SIGILL is a runtime
using an instruction the core lacks, the crash a real board would show."""

from __future__ import annotations

import json
import math
import signal
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from yolo_optimize.arm.cores import ArmCore
from yolo_optimize.arm.emulator import HOST, run_on_core
from yolo_optimize.arm.side import ArmSide
from yolo_optimize.arm.worker import OUTPUTS, PIXELS, RESULT, WorkRequest
from yolo_optimize.artifact import Manifest
from yolo_optimize.host.cpu import usable_cpus

START_S = 120  # the emulated interpreter and runtime starting, the model loading
IMAGE_S = 120  # one image at 640 on one emulated core, with room: NCNN INT8 took 5.8 s at 320


@dataclass(frozen=True)
class ArmRun:
    """What one artifact gave on a core: raw outputs in image order, the pixels ARM letterboxed (where files were
    given), and the facts: the worker's (what it executed in, the core's features, seconds) and the ARM side's pins."""

    core: ArmCore
    outputs: np.ndarray
    pixels: np.ndarray | None
    facts: dict[str, Any]

    @property
    def where(self) -> str:
        """How messages and records name where it ran."""
        return f" on {self.core.name} (emulated)"

    def record(self) -> dict[str, Any]:
        """The facts a manifest keeps of the run."""
        return {"core": self.core.name, "found_in": self.core.found_in, "emulated": True, **self.facts}


def run_on_arm(core: ArmCore, folder: Path, manifest: Manifest, imgsz: int, *, images: tuple[Path, ...] = (),
               pixels: np.ndarray | None = None) -> ArmRun:
    """The artifact in ``folder`` run on ``core``: on ``pixels`` (prepared uint8 NHWC images) where given, with
    ``images`` only letterboxed there; else on ``images``, each read and letterboxed on the core."""
    side = ArmSide.configured()
    side.require("a check on an ARM core")
    processes = usable_cpus()
    with tempfile.TemporaryDirectory(prefix="yolo-optimize-arm-run-") as work_dir:
        work = Path(work_dir)
        if pixels is not None:
            np.save(work / "given.npy", pixels)
        request = WorkRequest(folder=_inside(folder), manifest=asdict(manifest), imgsz=imgsz, out=_inside(work),
                              processes=processes, images=tuple(_inside(p) for p in images),
                              pixels=_inside(work / "given.npy") if pixels is not None else "")
        (work / "request.json").write_text(json.dumps(asdict(request)))
        count = len(pixels) if pixels is not None else len(images)
        timeout = START_S + IMAGE_S * math.ceil(count / processes)
        done = run_on_core(side, core, [side.python, "-m", "yolo_optimize.arm.worker", _inside(work / "request.json")],
                           [folder, *{p.resolve().parent for p in images}], work, processes, timeout)
        if done.returncode:
            raise RuntimeError(f"{manifest.node} could not run on {core.name} (emulated): {_died(done.returncode)}"
                               f"{_last_line(done.stderr)}")
        facts = {**json.loads((work / RESULT).read_text()), "versions": list(side.pins)}
        found = np.load(work / PIXELS) if (work / PIXELS).exists() else None
        return ArmRun(core, np.load(work / OUTPUTS), found, facts)


def _inside(path: Path) -> str:
    """Where a path of this machine is inside the rootfs."""
    return HOST + str(path.resolve())


def _died(returncode: int) -> str:
    if returncode in (-signal.SIGILL, 128 + signal.SIGILL):
        return "illegal instruction: its runtime uses an instruction this core lacks, as on a real board; "
    return f"exit {returncode}; "


def _last_line(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "it printed nothing"
