"""The processes the package starts: none outlives the command that started it, however that command dies (SIGKILL of
its main process only, as a container supervisor, an OOM killer or a CI timeout does)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import QUICK_EVAL, WEIGHTS, eval_args
from yolo_optimize.artifact import process_state

WORKER_MARK = "spawn_main"  # in the command line of every spawned child, not in the resource tracker's


def _session(leader: int) -> dict[int, str]:
    """pid -> command line of every live process (zombies are gone) in ``leader``'s session."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if int(fields[3]) == leader and process_state(int(entry.name)) not in ("Z", "X"):
                found[int(entry.name)] = command
        except (OSError, IndexError, ValueError):
            continue
    return found


def _kill_main_once_workers_run(args: list[str], started_after_s: float = 2.0) -> dict[int, str]:
    """Start the command in a session of its own, SIGKILL its main process alone once its workers have started, and
    return the processes of the session still alive 20 s later."""
    main = subprocess.Popen([sys.executable, "-m", "yolo_optimize", *args], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "YOLO_OPTIMIZE_OFFLINE": "1"})
    deadline = time.monotonic() + 180
    while not any(WORKER_MARK in command for pid, command in _session(main.pid).items() if pid != main.pid):
        assert main.poll() is None and time.monotonic() < deadline, "the command ended before starting a worker"
        time.sleep(0.2)
    time.sleep(started_after_s)
    workers = {pid for pid in _session(main.pid) if pid != main.pid}
    assert workers, "nothing to orphan"
    os.kill(main.pid, signal.SIGKILL)
    main.wait()
    deadline = time.monotonic() + 20
    while _session(main.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = _session(main.pid)
    for pid in left:  # never leave them to the rest of the suite
        os.kill(pid, signal.SIGKILL)
    return left


def test_no_process_outlives_a_build_whose_main_process_is_killed(tmp_path: Path) -> None:
    """The pool worker (idle or building) and multiprocessing's resource tracker end with the build."""
    left = _kill_main_once_workers_run(["build", WEIGHTS, "--out", tmp_path, "--targets", "onnx", "--precisions",
                                        "fp32", "--imgsz", "320", "--batch-sizes", "1"])
    assert not left, f"still running 20 s after the build was killed: {left}"


def test_no_process_outlives_an_evaluation_whose_main_process_is_killed(small_artifacts: Path, tmp_path: Path) -> None:
    left = _kill_main_once_workers_run([str(a) for a in eval_args(small_artifacts, tmp_path / "report", *QUICK_EVAL)])
    assert not left, f"still running 20 s after the evaluation was killed: {left}"
    assert not (tmp_path / "report").exists(), "a killed evaluation writes no report"


def test_a_child_killed_while_the_kernel_counted_an_out_of_memory_kill_is_said_to_be_out_of_memory() -> None:
    """The kernel's own count (/proc/vmstat) decides: a SIGKILL while it moved is the out-of-memory killer's."""
    from yolo_optimize.host.processes import ended, oom_kills

    now = oom_kills()
    if now is None:
        pytest.skip("this kernel does not count out-of-memory kills in /proc/vmstat")
    assert ended(-signal.SIGKILL, now - 1) == "out of memory: the kernel's out-of-memory killer ended the process"
    assert ended(None, now - 1).startswith("out of memory")
    assert ended(-signal.SIGKILL, now) == "crashed: the process was killed by SIGKILL"
    assert ended(-signal.SIGSEGV, now - 1) == "crashed: the process was killed by SIGSEGV"
    assert ended(3, now) == "crashed: the process died (exit code 3)"


def test_a_full_device_and_exhausted_memory_are_classified_whatever_raised_them() -> None:
    from yolo_optimize.host.processes import resource_shortage

    with pytest.raises(OSError) as full:
        with open("/dev/full", "wb") as handle:  # every write: ENOSPC, as on a full disk
            handle.write(b"x")
    assert resource_shortage(full.value) == "disk full"
    assert resource_shortage(MemoryError()) == "out of memory"
    allocator = RuntimeError("[enforce fail] DefaultCPUAllocator: can't allocate memory: you tried to allocate 8 GB")
    assert resource_shortage(allocator) == "out of memory"
    assert resource_shortage(RuntimeError("ONNX export: No space left on device")) == "disk full"
    assert resource_shortage(ValueError("shape mismatch")) is None


def test_a_failure_line_drops_the_terminal_colour_codes_a_tool_put_in_its_message() -> None:
    """torch.onnx colours its 'This is step 3/3' in its exception text; the report's reason column must not show it."""
    from yolo_optimize.host.processes import classified

    err = RuntimeError("Failed to convert. \x1b[96mThis is step 3/3\x1b[0m of exporting the model to ONNX.\nNext steps")
    assert classified(err) == "Failed to convert. This is step 3/3 of exporting the model to ONNX."


def _print_unflushed_and_hook_the_exit(marker: str) -> None:
    """A child's work that leaves text in Python's and in C's stdout buffers (no newline, no flush), as a native
    library's printf does, and an atexit hook behind."""
    import atexit
    import ctypes

    atexit.register(Path(marker).write_text, "the interpreter was torn down")
    print("printed by Python", end="")
    ctypes.CDLL(None).printf(b"printed by C")


def test_a_child_ends_as_a_forked_one_with_its_output_flushed_and_no_interpreter_teardown(tmp_path: Path) -> None:
    """A spawned child ends by ``os._exit`` once multiprocessing has cleaned up and flushed its streams, as a forked
    child does: what it printed arrives, C's buffered output too, and the interpreter's teardown (about 2 s of a CPU
    once yolov5n is loaded, bench/archive/test_suite_time/README.md), atexit hooks included, never runs."""
    marker = tmp_path / "torn-down"
    code = ("from tests.host.test_processes import _print_unflushed_and_hook_the_exit as work\n"
            "from yolo_optimize.host.processes import in_own_process\n"
            f"in_own_process(work, {str(marker)!r})\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr[-2000:]
    assert sorted(done.stdout.split("printed by ")) == ["", "C", "Python"], done.stdout  # two buffers: either first
    assert not marker.exists(), "the child ran the interpreter's teardown"
