"""What a spawned child's end costs once its work is done: ended as ``host.processes.SPAWN`` ends its children now
(multiprocessing's cleanup, the flushed streams, then ``os._exit``, as a forked child ends) against spawn's own end
(``sys.exit``: the interpreter torn down module by module).

Each child does what a build worker or a PyTorch row's measuring process does first: imports torch, torchvision and
yolov5 and loads the official yolov5n.pt (``checkpoint.load_model``); with ``--export`` it then exports the model to
ONNX at 320 as the builds do (torch's dynamo exporter). It answers with its own CPU seconds; the parent times from
that answer to the child's join, and reads the child's CPU seconds spent after answering (the children's total
from ``getrusage`` less what the child reported). The two ways alternate, ``--repeats`` children each.

    python bench/process_end.py --save bench/results/avx2 [--export]
"""

from __future__ import annotations

import multiprocessing
import resource
import statistics
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from yolo_optimize.host.processes import SPAWN

WEIGHTS = Path(__file__).resolve().parents[2] / "shared" / "assets" / "weights" / "yolov5n.pt"


def child(conn: Connection, export: bool) -> None:
    """Load yolov5n (and export it to ONNX), then answer with this process's CPU seconds so far."""
    import torch

    from yolo_optimize.checkpoint import load_model, resolve_source

    model = load_model(resolve_source(str(WEIGHTS)))
    if export:
        with tempfile.TemporaryDirectory() as folder:
            torch.onnx.export(model, (torch.rand(1, 3, 320, 320),), f"{folder}/yolov5n.onnx", dynamo=True)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    conn.send(usage.ru_utime + usage.ru_stime)


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def ending(context: Any, export: bool) -> dict[str, float]:
    """One child of ``context``: seconds from its answer to its join, and CPU seconds it spent after answering."""
    from process_end import child as by_name  # by module name: SPAWN's children never import the caller's __main__

    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=by_name, args=(sender, export))
    cpu_before = _cpu_of_children()
    process.start()
    sender.close()
    cpu_at_answer = receiver.recv()
    answered = time.perf_counter()
    process.join()
    ended = time.perf_counter()
    return {"end_s": round(ended - answered, 3), "end_cpu_s": round(_cpu_of_children() - cpu_before - cpu_at_answer, 3)}


def main() -> None:
    from common import save, timing_parser  # here, not at the top: the children import this module, and not that

    parser = timing_parser(__doc__, 0.0)
    parser.add_argument("--export", action="store_true", help="export the model to ONNX before answering")
    args = parser.parse_args()
    ways = {"os._exit (SPAWN now)": SPAWN, "sys.exit (spawn's own)": multiprocessing.get_context("spawn")}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in ways}
    for round_ in range(args.repeats):
        for name, context in ways.items():
            found = ending(context, args.export)
            runs[name].append(found)
            print(f"round {round_} {name:24s} end {found['end_s']:5.2f} s  "
                  f"CPU after answering {found['end_cpu_s']:5.2f} s")
    medians = {name: {key: statistics.median(run[key] for run in found) for key in found[0]}
               for name, found in runs.items()}
    for name, median in medians.items():
        print(f"median {name:24s} end {median['end_s']:5.2f} s  CPU after answering {median['end_cpu_s']:5.2f} s")
    save(args.save, "process_end" + ("-export" if args.export else ""),
         {"export": args.export, "runs": runs, "medians": medians}, args.threads)


if __name__ == "__main__":
    main()
