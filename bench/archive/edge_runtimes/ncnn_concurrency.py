"""Would NCNN gain a throughput configuration from Python: several extractors at once in threads, one image and one
NCNN thread each, as ONNX Runtime's and OpenVINO's throughput rows run?

    optimize build yolov5n --weights-dir ../shared/assets/weights --targets ncnn --precisions fp32 --imgsz 320 \
        --out /tmp/ncnn-artifacts
    python -m bench.archive.edge_runtimes.ncnn_concurrency /tmp/ncnn-artifacts/yolov5n/ncnn-fp32

Issue 45. Three ways to run the same images through the artifact's .param/.bin, each in a fresh process, the three
in turns in every round (the order rotated): `latency` (one net with every thread, the images one after another:
what the runner does at batch 1), `concurrent` (one net with one thread, the images spread over as many Python
threads, an extractor each: what it does for a batch) and `one thread` (one net with one thread, one after another:
what `concurrent` would be if the threads took turns, as they would if ncnn's Python `extract` held the GIL). Saves
`ncnn_concurrency-<time>.json` (img/s of every round).
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from bench.harness import by_name, by_round, paired_rounds, save, timing_parser
from yolo_optimize.host.processes import in_own_process

WAYS = ("latency", "concurrent", "one thread")


def images_per_second(folder: Path, way: str, threads: int, seconds: float) -> float:
    """One way's rate over batches of ``threads`` images, repeated for ``seconds`` after a warm-up batch."""
    import ncnn

    net = ncnn.Net()
    net.opt.num_threads = threads if way == "latency" else 1
    for option in ("use_fp16_storage", "use_fp16_packed", "use_fp16_arithmetic"):
        setattr(net.opt, option, False)
    net.load_param(str(folder / "model.ncnn.param"))
    net.load_model(str(folder / "model.ncnn.bin"))
    side = int(json.loads((folder / "metadata.json").read_text())["imgsz"][0])
    images = np.random.default_rng(0).random((threads, 3, side, side), dtype=np.float32)

    def one(image: np.ndarray) -> np.ndarray:
        with net.create_extractor() as extractor:
            extractor.input(net.input_names()[0], ncnn.Mat(image))
            return np.array(extractor.extract(net.output_names()[0])[1])

    pool = ThreadPoolExecutor(threads)

    def batch() -> None:
        if way == "concurrent":
            list(pool.map(one, images))
        else:
            [one(image) for image in images]

    batch()
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        batch()
        done += len(images)
    return done / (time.perf_counter() - start)


def main() -> None:
    parser = timing_parser(__doc__, "ncnn_concurrency", 3.0)
    parser.add_argument("artifact", type=Path, help="an ncnn-fp32 artifact folder (its model.ncnn.param)")
    args = parser.parse_args()
    folder = next(args.artifact.rglob("model.ncnn.param")).parent
    runs = paired_rounds(WAYS, args.repeats, lambda way: round(in_own_process(
        by_name(images_per_second), folder, way, args.threads, args.seconds), 2))
    rounds = by_round(WAYS, runs)
    for rates in rounds:
        print(rates)
    save(args.save, "ncnn_concurrency", {"artifact": str(folder), "threads": args.threads, "rounds": rounds},
         args.threads)


if __name__ == "__main__":
    main()
