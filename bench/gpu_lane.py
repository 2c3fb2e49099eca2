"""Issue 33's benchmark: the GPU rows of an evaluation against a hand-written probe of what the same PyTorch gets
from the same GPU, in the same run.

    python -m bench.gpu_lane --assets ../shared/assets        # on a GPU machine (../shared/gpu's kit runs it there)

1. The probe, in this process: yolov5n (the real weights) in FP16, channels-last, cuDNN's autotuner on, timed by CUDA
   events (compute only: the input already on the GPU) eager and replayed from one CUDA graph, and by the host's clock
   the deployed path: a pinned uint8 NHWC batch -> asynchronous copy -> /255, layout and FP16 on the GPU -> graph
   replay -> NMS on the GPU (0.25 / 0.6, as the evaluation keeps) -> the detections on the host.
2. Reading images for the end-to-end path: JPEG decode and letterbox of 64 images by OpenCV on 1, 4, 8 and every
   usable CPU but two threads (what the evaluation's decoders use), against nvJPEG on the GPU
   (``torchvision.io.decode_jpeg(device="cuda")``, one call per batch) and a bilinear resize there.
3. The tool: ``optimize build yolov5n --device cuda`` (default targets, FP32 and FP16) then three evaluations at the
   same batch sizes: the default (one CUDA stream at every batch size; accuracy and end to end; each row's
   CUDA-event compute phase is what the probe's compute-only figure measures), ``--mode throughput`` (two streams
   from batch 2: what they bring), and the default again (speed only), which must agree with the first within 10%
   per speedup with the same ranking.
4. Saves, per batch size, each row's img/s, the probe's and their ``ratio``, with the GPU, its driver and torch.

``--skip-build`` evaluates the artifacts already in --out; ``--probe-only`` measures the probes alone.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from bench.harness import NODE_FAILED, optimize, results_folder, save, study_parser

BATCHES = (1, 8, 32, 64)
CALLS_S = 1.0  # seconds of calls per figure (after warm-up)


def gpu_facts() -> dict[str, Any]:
    import pynvml
    import torch

    pynvml.nvmlInit()
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
    finally:
        pynvml.nvmlShutdown()
    return {"gpu": torch.cuda.get_device_name(0), "driver": driver, "torch": torch.__version__,
            "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version()}


def gpu_kind(name: str) -> str:
    """The results folder of a GPU: its model (``NVIDIA H100 80GB HBM3`` -> ``h100``)."""
    model = re.search(r"\b([A-Z]\d{2,4})\b", name)
    return model.group(1).lower() if model else "gpu"


def captured(forward: Any) -> tuple[Any, Any]:
    """``forward`` warmed up on a side stream, then captured in one CUDA graph: (graph, its output)."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            forward()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        output = forward()
    return graph, output


def gpu_rate(call: Any, batch: int) -> float:
    """Images per second of ``call`` by CUDA events over at least CALLS_S of calls (GPU time, no host wait)."""
    import torch

    for _ in range(3):
        call()
    torch.cuda.synchronize()
    calls, started = 0, time.perf_counter()
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    while time.perf_counter() - started < CALLS_S or calls < 20:
        call()
        calls += 1
        if calls % 20 == 0:
            torch.cuda.synchronize()
    end.record()
    end.synchronize()
    return round(batch * calls / (begin.elapsed_time(end) / 1e3), 1)


def host_rate(call: Any, batch: int) -> float:
    """Images per second of ``call`` (which ends with its result on the host) by the host's clock."""
    for _ in range(3):
        call()
    times: list[float] = []
    while sum(times) < CALLS_S or len(times) < 20:
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    times.sort()
    return round(batch / times[len(times) // 2], 1)


def batched_detections(raw: Any, conf: float = 0.25, iou: float = 0.6, max_det: int = 300) -> list[Any]:
    """YOLOv5's raw [B, anchors, 85] -> per image its detections on the host, every image in one NMS call (boxes
    keyed by image and class), then one copy back: the probe's hand-written GPU post-processing."""
    import torch
    import torchvision

    best, label = (raw[..., 5:] * raw[..., 4:5]).max(-1)
    image, anchor = (best > conf).nonzero(as_tuple=True)
    centre, size = raw[image, anchor, :2], raw[image, anchor, 2:4]
    boxes = torch.cat([centre - size / 2, centre + size / 2], 1)
    score, cls = best[image, anchor], label[image, anchor]
    keep = torchvision.ops.batched_nms(boxes, score, image * raw.shape[-1] + cls, iou)
    rows = torch.cat([boxes[keep], score[keep, None], cls[keep, None].float()], 1).cpu()
    owner = image[keep].cpu()
    return [rows[owner == index][:max_det] for index in range(raw.shape[0])]


def probe(assets: Path) -> dict[int, dict[str, float]]:
    """The hand-written probe at every batch size (module docstring, 1)."""
    import numpy as np
    import torch

    from yolo_optimize.checkpoint import load_model, resolve_source
    from yolo_optimize.families import family_named

    torch.backends.cudnn.benchmark = True
    model = load_model(resolve_source("yolov5n", weights_dir=assets / "weights")).cuda().half().eval()
    for weight in model.parameters():  # channels-last weights (Module.to(memory_format) refuses the 5-D grids)
        weight.data = weight.data.contiguous(memory_format=torch.channels_last) if weight.dim() == 4 else weight.data
    family = family_named("yolov5")
    files = sorted((assets / "coco_val128" / "images").rglob("*.jpg"))[:64]
    pixels = np.stack([family.preprocess(path, 640).pixels for path in files])
    found: dict[int, dict[str, float]] = {}
    with torch.inference_mode():
        for batch in BATCHES:
            images = torch.rand(batch, 3, 640, 640, device="cuda").half().contiguous(memory_format=torch.channels_last)
            graph, _ = captured(lambda images=images: model(images))
            host = torch.from_numpy(pixels[np.arange(batch) % len(pixels)]).pin_memory()
            on_gpu = torch.empty_like(host, device="cuda")
            deployed_graph, raw = captured(lambda on_gpu=on_gpu: model(on_gpu.permute(0, 3, 1, 2).half().div(255)))

            def deployed(host=host, on_gpu=on_gpu, deployed_graph=deployed_graph, raw=raw) -> list[Any]:
                on_gpu.copy_(host, non_blocking=True)
                deployed_graph.replay()
                return batched_detections(raw.float())

            found[batch] = {"eager": gpu_rate(lambda images=images: model(images), batch),
                            "graph": gpu_rate(graph.replay, batch), "deployed": host_rate(deployed, batch)}
            print(f"probe b{batch}: {found[batch]}", flush=True)
            del graph, deployed_graph, raw
            torch.cuda.empty_cache()
    return found


def decode_rates(assets: Path) -> dict[str, float]:
    """Images per second read and letterboxed to 640: OpenCV on thread pools of several sizes (module docstring, 2),
    and nvJPEG with a resize on the GPU (None where this torchvision cannot decode on the GPU)."""
    from concurrent.futures import ThreadPoolExecutor

    import cv2
    import torch
    import torchvision

    from yolo_optimize.evaluation.measuring.end_to_end import prepare
    from yolo_optimize.families import family_named
    from yolo_optimize.host.cpu import usable_cpus

    cv2.setNumThreads(1)
    family = family_named("yolov5")
    files = sorted((assets / "coco_val128" / "images").rglob("*.jpg"))[:64]
    found: dict[str, float] = {}
    for threads in sorted({1, 4, 8, max(1, usable_cpus() - 2)}):
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda path: prepare(family, path, 640), files[:8]))  # warm-up
            started = time.perf_counter()
            list(pool.map(lambda path: prepare(family, path, 640), files))
            found[f"opencv_{threads}_threads"] = round(len(files) / (time.perf_counter() - started), 1)
    data = [torchvision.io.read_file(str(path)) for path in files]

    def on_gpu() -> None:
        for image in torchvision.io.decode_jpeg(data, device="cuda"):
            scale = 640 / max(image.shape[1:])
            size = [round(image.shape[1] * scale), round(image.shape[2] * scale)]
            torch.nn.functional.interpolate(image[None].float(), size=size, mode="bilinear")
        torch.cuda.synchronize()

    try:
        on_gpu()
        started = time.perf_counter()
        on_gpu()
        found["nvjpeg_batch"] = round(len(files) / (time.perf_counter() - started), 1)
    except (RuntimeError, TypeError) as err:
        found["nvjpeg_batch"] = None  # type: ignore[assignment]  # a JSON record of mixed values
        found["nvjpeg_error"] = str(err)[:200]  # type: ignore[assignment]  # a JSON record of mixed values
    print(f"decode: {found}", flush=True)
    return found


def tool_rows(args: Any) -> dict[str, Any]:
    """Build on the GPU, then the three evaluations of the module's docstring (3): each one's exit and rows."""
    sizes = ",".join(map(str, BATCHES))
    found: dict[str, Any] = {}
    if not args.skip_build:
        targets = ["--targets", args.targets] if args.targets else []  # default: the default targets
        found["build_exit"] = optimize("build", "yolov5n", "--weights-dir", str(args.assets / "weights"), "--device",
                                       "cuda", "--parity-data", str(args.assets / "coco_val128"), "--batch-sizes",
                                       sizes, "--out", str(args.out), *targets,
                                       allowed=(0, NODE_FAILED)).code
    evaluations = {"auto": (), "throughput": ("--mode", "throughput", "--no-accuracy", "--no-end-to-end"),
                   "auto_again": ("--no-accuracy", "--no-end-to-end")}
    for name, extra in evaluations.items():
        report = args.report.parent / f"{args.report.name}-{name}" if name != "auto" else args.report
        exit_code = optimize("eval", str(args.out), "--device", "cuda", "--data", str(args.assets / "coco_val128"),
                             "--batch-sizes", sizes, "--repeats", args.repeats, "--min-time", "1", "--out",
                             str(report), *extra, allowed=(0, NODE_FAILED)).code
        found[name] = {"exit": exit_code, "rows": rows_of(report) if exit_code == 0 else {}}
    return found


def rows_of(folder: Path) -> dict[str, dict[int, dict[str, Any]]]:
    """Each row of the evaluation in ``folder``: per batch size its timed img/s, its compute phase's img/s, the
    configuration it ran in; its mAP; or why it was not measured."""
    from yolo_optimize.evaluation.reporting.report import load_report

    rows: dict[str, dict[int, dict[str, Any]]] = {}
    report = load_report(folder)
    for row in report.rows:
        if row.error or row.skipped or not row.measurements:
            rows[row.name] = {"status": row.error or row.skipped}  # type: ignore[dict-item]  # a JSON record of mixed values
            continue
        rows[row.name] = {}
        for result in row.measurements[0].batches:
            compute = result.phases_ms.get("compute") if result.phases_ms else None
            rows[row.name][result.batch] = {
                "deployed_ips": result.throughput_ips, "error": result.error, "end_to_end_ips": result.end_to_end_ips,
                "compute_ips": round(result.batch / (compute.p50_ms / 1e3), 1) if compute else None,
                "execution": result.execution}
        rows[row.name]["map50_95"] = row.accuracy.map50_95 if row.accuracy else None  # type: ignore[assignment, index]  # a JSON record of mixed keys
    return rows


def ratios(found: dict[int, dict[str, float]], evaluations: dict[str, Any]) -> dict[str, dict[int, dict[str, Any]]]:
    """Per row and batch size of the default evaluation: its compute-only img/s against the probe's graph, its
    deployed img/s (as the matrix reports it) against the probe's deployed path; beside them, on two streams."""
    table: dict[str, dict[int, dict[str, Any]]] = {}
    deployed, streams = evaluations["auto"]["rows"], evaluations["throughput"]["rows"]
    for name, batches in deployed.items():
        for batch, cells in batches.items():
            if not isinstance(batch, int) or not cells.get("deployed_ips"):
                continue
            compute, probe_row = cells["compute_ips"], found[batch]
            table.setdefault(name, {})[batch] = {
                "compute_ips": compute, "probe_graph_ips": probe_row["graph"],
                "ratio": round(compute / probe_row["graph"], 3) if compute else None,
                "deployed_ips": cells["deployed_ips"], "probe_deployed_ips": probe_row["deployed"],
                "deployed_ratio": round(cells["deployed_ips"] / probe_row["deployed"], 3),
                "two_streams_deployed_ips": streams.get(name, {}).get(batch, {}).get("deployed_ips"),
                "end_to_end_ips": cells.get("end_to_end_ips"), "mode": cells["execution"]["label"]}
    return table


def agreement(evaluations: dict[str, Any]) -> dict[str, Any]:
    """The two default evaluations' speedups over PyTorch FP32 per row and batch size, the largest relative
    difference, and whether each batch size ranks the rows the same."""
    speedups = {}
    for name in ("auto", "auto_again"):
        rows = evaluations[name]["rows"]
        speedups[name] = {row: {batch: cells["deployed_ips"] / rows["pytorch-fp32"][batch]["deployed_ips"]
                                for batch, cells in batches.items() if isinstance(batch, int) and cells["deployed_ips"]}
                          for row, batches in rows.items() if "pytorch-fp32" in rows and "status" not in batches}
    first, second = speedups["auto"], speedups["auto_again"]
    differences = [abs(second[row][batch] / value - 1) for row in first for batch, value in first[row].items()
                   if batch in second.get(row, {})]
    same_ranking = {batch: sorted(first, key=lambda row: -first[row].get(batch, 0))
                    == sorted(second, key=lambda row: -second[row].get(batch, 0)) for batch in BATCHES}
    return {"speedups": speedups, "max_difference": round(max(differences), 3) if differences else None,
            "same_ranking": same_ranking}


def markdown(found: dict[int, dict[str, float]], table: dict[str, dict[int, dict[str, Any]]]) -> str:
    lines = ["| row | batch | mode | compute img/s | probe graph | ratio | deployed img/s | two streams | "
             "probe deployed | ratio | e2e img/s |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, batches in table.items():
        for batch, c in batches.items():
            lines.append(f"| {name} | {batch} | {c['mode']} | {c['compute_ips']} | {c['probe_graph_ips']} | "
                         f"{c['ratio']} | {c['deployed_ips']} | {c['two_streams_deployed_ips']} | "
                         f"{c['probe_deployed_ips']} | {c['deployed_ratio']} | {c['end_to_end_ips']} |")
    probe_lines = [f"| probe | {b} | | eager {v['eager']} | graph {v['graph']} | | deployed {v['deployed']} | | | | |"
                   for b, v in found.items()]
    return "\n".join([*lines, *probe_lines])


def main() -> None:
    parser = study_parser(__doc__, "gpu_lane", "/tmp/gpu-lane/artifacts", "1")
    parser.add_argument("--probe-only", action="store_true")
    parser.add_argument("--targets", default="", help="what to build (default: the default targets)")
    parser.add_argument("--save", type=Path, help="default: bench/results/<the GPU's model, e.g. h100>/gpu_lane")
    args = parser.parse_args()
    facts = gpu_facts()
    print(json.dumps(facts), flush=True)
    found = probe(args.assets)
    result: dict[str, Any] = {"gpu": facts, "probe": found, "decode": decode_rates(args.assets)}
    if not args.probe_only:
        evaluations = tool_rows(args)
        result |= {"evaluations": evaluations}
        if all(evaluation["exit"] == 0 for evaluation in evaluations.values()):
            result |= {"ratios": ratios(found, evaluations), "agreement": agreement(evaluations)}
            print(markdown(found, result["ratios"]))
            print(json.dumps({k: v for k, v in result["agreement"].items() if k != "speedups"}))
    save(args.save or results_folder("gpu_lane", gpu_kind(facts["gpu"])), "gpu_lane", result, threads=0)


if __name__ == "__main__":
    main()
