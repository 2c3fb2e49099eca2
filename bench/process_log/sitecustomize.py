"""Logs every Python process of a run as it exits: its arguments, wall and CPU seconds, which heavy packages it
imported and the test that was running (``PYTEST_CURRENT_TEST``, which the processes a test starts inherit).

Put this folder on PYTHONPATH (Python imports ``sitecustomize`` at start-up) and name the log:

    PROCESS_LOG=/tmp/processes.jsonl PYTHONPATH=bench/process_log python -m pytest
    python bench/suite_processes.py /tmp/processes.jsonl --label <commit>

Each process logs as multiprocessing's exit runs its finalizers: at the interpreter's exit in a process that
imported multiprocessing, and at the end of every child the package starts, which then ends by ``os._exit``
(``host.processes``) and runs no ``atexit`` hook. A process killed by a signal is not logged; its parent's figures
do not include it either.
"""

import json
import multiprocessing.util
import os
import resource
import sys
import time

HEAVY = ("torch", "torchvision", "yolov5", "ultralytics", "openvino", "onnxruntime", "nncf", "executorch", "ncnn",
         "ray")
_started = time.time()


def _log() -> None:
    used = resource.getrusage(resource.RUSAGE_SELF)
    record = {"pid": os.getpid(), "ppid": os.getppid(), "argv": sys.argv[:3],
              "wall_s": round(time.time() - _started, 2), "cpu_s": round(used.ru_utime + used.ru_stime, 2),
              "imported": [name for name in HEAVY if name in sys.modules],
              "test": os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]}
    with open(os.environ["PROCESS_LOG"], "a") as log:
        log.write(json.dumps(record) + "\n")


if os.environ.get("PROCESS_LOG"):
    multiprocessing.util.Finalize(None, _log, exitpriority=-1)  # after the process's own children are joined
