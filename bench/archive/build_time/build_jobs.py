"""A build's wall time and CPU time with one node at a time against two, in interleaved rounds of fresh builds.

    python -m bench.archive.build_time.build_jobs --assets ../shared/assets [--repeats 3] [--shapes small,session,int8]

Every node of a build runs in a spawned worker, and each worker imports PyTorch and the model's package before it
does anything (yolov5's brings torchvision, matplotlib, seaborn and pandas: seconds per process). ``--jobs 2`` pays
that twice, and on a 2-CPU host the two workers' threads then share the cores that one worker's two threads had.
Whether the overlap wins it back depends on the build's shape, so this measures the shapes that matter: a small
build (what most tests and first users run), the session build of the tests (three targets by two precisions, 640)
and an INT8 build (NNCF's calibration and the gate in their own nodes).

Each round builds each shape with ``--jobs 1`` and ``--jobs 2`` (the order rotated each round), each into a fresh
``--out`` (no cached node) but one shared cache of the machine's limits, measured before the first round. CPU
time is the children's user + system time, every worker included. Saves the rounds and medians under
``--save``.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from bench.harness import by_round, optimize, paired_rounds, parser_for, results_folder, save

JOBS = (1, 2)
SHAPES = {
    "small": ["--imgsz", "320", "--targets", "onnx,openvino", "--precisions", "fp32"],
    "session": ["--targets", "torchscript,onnx,openvino", "--precisions", "fp32,fp16"],
    "int8": ["--imgsz", "320", "--targets", "onnx,openvino", "--precisions", "int8", "--calib-images", "16",
             "--gate-images", "24", "--max-map-drop", "3"],
}


def main() -> None:
    parser = parser_for(__doc__)
    parser.add_argument("--assets", type=Path, default=Path("../shared/assets"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--shapes", default="small,session,int8")
    parser.add_argument("--save", type=Path, default=results_folder("build_jobs"))
    args = parser.parse_args()
    shapes = args.shapes.split(",")
    with tempfile.TemporaryDirectory(prefix="build-jobs-") as scratch:
        env = {"XDG_CACHE_HOME": f"{scratch}/cache"}
        optimize("info", "--rounds", "2", env=env, capture=True)  # the limits INT8 builds read, measured once
        builds = [(shape, jobs) for shape in shapes for jobs in JOBS]
        runs = paired_rounds(builds, args.repeats, lambda build: _built(args.assets, *build, Path(scratch), env))
    rounds = [{shape: {jobs: entry[shape, jobs] for jobs in JOBS} for shape in shapes}
              for entry in by_round(builds, runs)]
    summary = {shape: _summary([r[shape] for r in rounds]) for shape in shapes}
    for shape, line in summary.items():
        print(f"{shape}: " + "; ".join(f"--jobs {jobs} wall {m['wall_s']:.1f} s, cpu {m['cpu_s']:.1f} s"
                                       for jobs, m in line.items()))
    save(args.save, "build_jobs", {"shapes": {s: SHAPES[s] for s in shapes}, "rounds": rounds,
                                   "medians": summary}, 2)


def _built(assets: Path, shape: str, jobs: int, scratch: Path, env: dict[str, str]) -> dict[str, float]:
    """One build of ``shape`` with ``--jobs jobs`` into a folder of its own: its wall and CPU seconds."""
    out = Path(tempfile.mkdtemp(prefix=f"out-{shape}-{jobs}-", dir=scratch))
    ran = optimize("build", assets / "weights" / "yolov5n.pt", "--out", out, "--jobs", jobs, "--parity-data",
                   assets / "coco_val128", "--calib-data", assets / "coco128", *SHAPES[shape], env=env, capture=True)
    found = {"wall_s": round(ran.wall_s, 2), "cpu_s": round(ran.cpu_s, 2)}
    print(f"{shape} --jobs {jobs}: {found}", flush=True)
    return found


def _summary(rounds: list[dict[int, dict[str, float]]]) -> dict[int, dict[str, float]]:
    return {jobs: {key: round(statistics.median(r[jobs][key] for r in rounds), 2) for key in ("wall_s", "cpu_s")}
            for jobs in JOBS}


if __name__ == "__main__":
    main()
