"""Where an AOTInductor package for CUDA dies with the GPU machine's torch (issue 33): compile, then load and run,
each step in a process of its own with Python's fault handler on, so a native crash names the Python call it
happened in and the next step still runs.

    python -m bench.archive.gpu_lane.aoti_cuda_probe --assets ../shared/assets --save DIR     # on a GPU machine

yolov5n (real weights) at 320, FP16, on the GPU, exported with a static batch of 1 (``--dynamic``: batch 1-64, as
the aoti stage exports): 1. export and compile (``aoti_compile_and_package``), then load and run in the same
process; 2. load and run in a fresh process. Saves each step's exit status (negative: the signal that killed it),
seconds, what it printed and the end of its error stream.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.harness import results_folder

STEP_S = 240


def compile_and_run(assets: Path, package: Path, dynamic: bool) -> None:
    """Step 1, in its own process."""
    import torch

    from yolo_optimize.checkpoint import load_model, resolve_source

    model = load_model(resolve_source("yolov5n", weights_dir=assets / "weights")).cuda().half().eval()
    example = torch.rand(1, 3, 320, 320, device="cuda").half()
    with torch.inference_mode():
        model(example)  # YOLOv5's Detect caches its grids (as the aoti stage's warm-up does)
    shapes = ({0: torch.export.Dim("batch", min=1, max=64)},) if dynamic else None
    started = time.perf_counter()
    program = torch.export.export(model, (example,), dynamic_shapes=shapes)
    print(f"exported in {time.perf_counter() - started:.1f} s", flush=True)
    started = time.perf_counter()
    torch._inductor.aoti_compile_and_package(program, package_path=str(package))
    print(f"compiled in {time.perf_counter() - started:.1f} s: {package.stat().st_size / 2**20:.1f} MiB", flush=True)
    load_and_run(package, model, example)


def load_and_run(package: Path, model: Any = None, example: Any = None) -> None:
    """Step 2 (and the end of step 1): load the package, run it, compare with eager when the model is at hand."""
    import torch

    started = time.perf_counter()
    loaded = torch._inductor.aoti_load_package(str(package))
    print(f"loaded in {time.perf_counter() - started:.1f} s", flush=True)
    example = example if example is not None else torch.rand(1, 3, 320, 320, device="cuda").half()
    with torch.inference_mode():
        found = loaded(example)
        torch.cuda.synchronize()
        print(f"ran: output {tuple(found.shape) if hasattr(found, 'shape') else type(found)}", flush=True)
        if model is not None:
            print(f"max difference from eager: {(found - model(example)).abs().max().item():.4f}", flush=True)


def step(name: str, *args: str) -> dict[str, object]:
    started = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-X", "faulthandler", __file__, name, *args], capture_output=True,
                              text=True, timeout=STEP_S)
        code, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as expired:
        code, out, err = None, f"timed out after {STEP_S} s\n{str(expired.stdout or '')}", str(expired.stderr or "")
    print(f"{name}: exit {code}\n{out}{err[-3000:]}", flush=True)
    return {"exit": code, "seconds": round(time.perf_counter() - started, 1), "printed": out.splitlines(),
            "stderr_tail": err.splitlines()[-30:]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", nargs="?", choices=("compile", "load"))
    parser.add_argument("--assets", type=Path, default=Path("../shared/assets"))
    parser.add_argument("--package", type=Path, default=Path("/tmp/aoti-cuda-probe/yolov5n-fp16.pt2"))
    parser.add_argument("--dynamic", action="store_true")
    parser.add_argument("--save", type=Path, default=results_folder("aoti_cuda_probe"))
    args = parser.parse_args()
    if args.step == "compile":
        compile_and_run(args.assets, args.package, args.dynamic)
        return
    if args.step == "load":
        load_and_run(args.package)
        return
    import json

    import torch

    args.package.parent.mkdir(parents=True, exist_ok=True)
    extra = ["--dynamic"] if args.dynamic else []
    found = {"torch": torch.__version__, "cuda": torch.version.cuda, "dynamic_batch": args.dynamic,
             "compile_and_run": step("compile", "--assets", str(args.assets), "--package", str(args.package), *extra)}
    if args.package.exists():
        found["load_in_a_fresh_process"] = step("load", "--package", str(args.package))
    args.save.mkdir(parents=True, exist_ok=True)
    (args.save / "aoti_cuda_probe.json").write_text(json.dumps(found, indent=2))


if __name__ == "__main__":
    main()
