"""Two PyTorch processes sharing the cores, with OpenMP's threads spinning or sleeping while they wait.

Why the test suite's two workers set ``OMP_WAIT_POLICY=PASSIVE`` (tests/conftest.py): yolov5n's forward on
``--threads`` threads, timed alone and then as two such processes at once, under OpenMP's default wait policy (its
threads spin a while at every barrier) and under PASSIVE (they sleep). Rounds interleave the policies, each
measurement in fresh processes:

    python bench/omp_wait_policy.py --assets ../shared/assets --save bench/results/avx2
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

from common import save, timing_parser

POLICIES = {"default (spin, then sleep)": None, "PASSIVE (sleep)": "PASSIVE"}
FORWARD = """
import sys, time, torch
from yolo_optimize.checkpoint import load_model, resolve_source
torch.set_num_threads(int(sys.argv[2]))
model = load_model(resolve_source(sys.argv[1])).eval()
image = torch.zeros(1, 3, 640, 640)
with torch.inference_mode():
    for _ in range(3):
        model(image)
    print("ready", flush=True)
    sys.stdin.readline()  # every process of the measurement starts timing at once
    started, calls = time.perf_counter(), 0
    while time.perf_counter() - started < float(sys.argv[3]):
        model(image)
        calls += 1
print((time.perf_counter() - started) / calls * 1e3, flush=True)
"""


def forward_ms(weights: Path, threads: int, seconds: float, policy: str | None, processes: int) -> list[float]:
    """ms per forward of each of ``processes`` processes timed together under ``policy``."""
    env = {key: value for key, value in os.environ.items() if key != "OMP_WAIT_POLICY"}
    env = {**env, "YOLO_OPTIMIZE_OFFLINE": "1", **({"OMP_WAIT_POLICY": policy} if policy else {})}
    started = [subprocess.Popen([sys.executable, "-c", FORWARD, str(weights), str(threads), str(seconds)], env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for _ in range(processes)]
    for process in started:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    for process in started:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    return [float(process.communicate()[0].strip()) for process in started]


def main() -> None:
    parser = timing_parser(__doc__, seconds=8.0)
    parser.add_argument("--assets", type=Path, default=Path("../shared/assets"))
    args = parser.parse_args()
    weights = args.assets / "weights" / "yolov5n.pt"
    runs: dict[str, dict[str, list[float]]] = {name: {"alone_ms": [], "together_ms": []} for name in POLICIES}
    for round_ in range(args.repeats):
        for name, policy in POLICIES.items():
            runs[name]["alone_ms"] += forward_ms(weights, args.threads, args.seconds, policy, 1)
            runs[name]["together_ms"] += forward_ms(weights, args.threads, args.seconds, policy, 2)
            print(f"round {round_ + 1} {name}: alone {runs[name]['alone_ms'][-1]:.1f} ms, two at once "
                  f"{runs[name]['together_ms'][-2]:.1f} / {runs[name]['together_ms'][-1]:.1f} ms")
    summary = {}
    for name, found in runs.items():
        alone, together = statistics.median(found["alone_ms"]), statistics.median(found["together_ms"])
        # two processes' forwards per second over one alone's: 1.0 = the pair gets the work of one done each
        summary[name] = {"alone_ms": round(alone, 1), "together_ms": round(together, 1),
                         "slowdown_together": round(together / alone, 2),
                         "pair_throughput_over_alone": round(2 * alone / together, 2)}
        print(f"{name}: alone {alone:.1f} ms, two at once {together:.1f} ms each ({together / alone:.2f}x slower; "
              f"the pair does {2 * alone / together:.2f}x the work of one alone)")
    save(args.save, "omp_wait_policy", {"threads": args.threads, "seconds": args.seconds, "runs": runs,
                                        "summary": summary}, args.threads)


if __name__ == "__main__":
    main()
