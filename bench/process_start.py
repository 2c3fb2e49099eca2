"""What a fresh process pays before it can run yolov5n: spawned (``host.processes.SPAWN``, as every build worker and
measuring process starts today) against forked from a server that imported torch, torchvision and yolov5 once
(multiprocessing's forkserver with preloaded modules), and whether the forked one then runs the model as fast and in
as much memory.

Each child loads the official yolov5n.pt as the PyTorch rows do (``checkpoint.load_model``), then times batch-1
inferences at 640 on ``--threads`` threads for ``--seconds``; the two ways alternate, ``--repeats`` children each.
The forkserver's own start (its imports, paid once per command that would use it) is timed apart. Both start with
the measuring processes' allocator settings (``ALLOCATOR_ENV``) in their environment.

    python bench/process_start.py --save bench/results/avx2
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import statistics
import time
from pathlib import Path
from typing import Any

from yolo_optimize.host.processes import ALLOCATOR_ENV, SPAWN

WEIGHTS = Path(__file__).resolve().parents[2] / "shared" / "assets" / "weights" / "yolov5n.pt"
PRELOADED = ["torch", "torchvision", "yolov5.models.yolo", "yolo_optimize.checkpoint"]


def child(started: float, threads: int, seconds: float) -> dict[str, float]:
    """Seconds from the parent's start call to a loaded model; then the model's batch-1 latency and peak RSS."""
    import torch

    from yolo_optimize.checkpoint import load_model, resolve_source

    model = load_model(resolve_source(str(WEIGHTS)))
    ready = time.time() - started
    torch.set_num_threads(threads)
    image, times = torch.rand(1, 3, 640, 640), []
    with torch.inference_mode():
        model(image)
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            tick = time.perf_counter()
            model(image)
            times.append((time.perf_counter() - tick) * 1e3)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"ready_s": round(ready, 3), "p50_ms": round(statistics.median(times), 2), "peak_rss_mb": round(peak_mb, 1)}


def in_child(context: multiprocessing.context.BaseContext, threads: int, seconds: float) -> dict[str, float]:
    """``child`` in one new process of ``context``, named by this module's name: SPAWN's children never import the
    caller's ``__main__``."""
    from process_start import child as by_name

    with context.Pool(1) as pool:  # type: ignore[attr-defined]  # every concrete context has Pool
        return pool.apply(by_name, (time.time(), threads, seconds))


def main() -> None:
    from common import save, timing_parser  # here, not at the top: the children import this module, and not that

    args = timing_parser(__doc__, 5.0).parse_args()
    os.environ.update(ALLOCATOR_ENV)
    forkserver = multiprocessing.get_context("forkserver")
    forkserver.set_forkserver_preload(PRELOADED)
    tick = time.time()
    with forkserver.Pool(1) as pool:  # starts the server: its imports
        pool.apply(time.time)
    server_s = round(time.time() - tick, 3)
    runs: dict[str, list[dict[str, Any]]] = {"spawn": [], "forkserver": []}
    for round_ in range(args.repeats):
        for name, context in (("spawn", SPAWN), ("forkserver", forkserver)):
            found = in_child(context, args.threads, args.seconds)
            runs[name].append(found)
            print(f"round {round_} {name:10s} ready {found['ready_s']:6.2f} s  b1 p50 {found['p50_ms']:7.2f} ms  "
                  f"peak RSS {found['peak_rss_mb']:7.1f} MB")
    medians = {name: {key: statistics.median(run[key] for run in found) for key in found[0]}
               for name, found in runs.items()}
    print(f"forkserver's own start (once per command): {server_s:.2f} s")
    for name, median in medians.items():
        print(f"median {name:10s} ready {median['ready_s']:6.2f} s  b1 p50 {median['p50_ms']:7.2f} ms  "
              f"peak RSS {median['peak_rss_mb']:7.1f} MB")
    save(args.save, "process_start", {"preloaded": PRELOADED, "threads": args.threads, "seconds": args.seconds,
                                      "forkserver_start_s": server_s, "runs": runs, "medians": medians}, args.threads)


if __name__ == "__main__":
    main()
