"""The GPU lane on a real yolov5n: the forward replayed from CUDA graphs on pinned uint8 input gives the eager GPU
outputs, the NMS on the GPU keeps what the host's keeps, and a GPU build and evaluation run end to end. These need
a CUDA device: elsewhere they skip with that reason (CI has none; ../shared/gpu's kit runs them on one)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import VAL_DATA, WEIGHTS, brief, eval_args, optimize, statuses, written_matrix
from yolo_optimize.artifact import Manifest
from yolo_optimize.host.cpu import usable_cpus


@pytest.fixture(scope="module")
def cuda() -> None:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device is visible to torch: the GPU lane needs one")


@pytest.fixture(scope="module")
def yolov5n_and_pixels(cuda: None) -> tuple[object, np.ndarray]:
    import torch

    from yolo_optimize.checkpoint import load_model, resolve_source
    from yolo_optimize.families import family_named

    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    model = load_model(resolve_source("yolov5n", weights_dir=WEIGHTS.parent)).cuda().eval()
    files = sorted((VAL_DATA / "images").rglob("*.jpg"))[:8]
    return model, np.stack([family_named("yolov5").preprocess(path, 320).pixels for path in files])


def test_a_captured_forward_gives_the_eager_gpu_outputs_at_every_batch_size_and_for_new_images(
        yolov5n_and_pixels: tuple[object, np.ndarray]) -> None:
    import torch

    from yolo_optimize.images import to_input
    from yolo_optimize.runtime.runners.cuda_graph import CapturedForward

    model, pixels = yolov5n_and_pixels
    forward = CapturedForward(model, torch.float32, takes_pixels=False, channels_last=False)
    for batch, start in ((1, 0), (3, 0), (8, 0), (1, 5), (3, 4)):  # the last two replay graphs with other images
        chunk = np.ascontiguousarray(pixels[start:start + batch])
        got = forward(chunk).cpu().numpy()
        with torch.inference_mode():
            want = model(torch.from_numpy(to_input(chunk)).cuda()).cpu().numpy()
        assert forward.captured(batch), forward.not_captured
        assert np.abs(got - want).max() < 1e-3, f"batch {batch} from image {start}"


def test_nms_on_the_gpu_keeps_what_the_host_nms_keeps(yolov5n_and_pixels: tuple[object, np.ndarray]) -> None:
    import torch

    from yolo_optimize.families import family_named
    from yolo_optimize.images import to_input

    model, pixels = yolov5n_and_pixels
    family = family_named("yolov5")
    with torch.inference_mode():
        raw = model(torch.from_numpy(to_input(pixels)).cuda())
    on_gpu, on_host = family.kept_on_device(raw, 320), family.postprocess(raw.cpu().numpy())
    assert sum(len(kept) for kept in on_host) > 8, "too few detections to compare"
    for mine, theirs in zip(on_gpu, on_host):
        assert mine.shape == theirs.shape
        assert np.abs(mine - theirs).max() < 1e-2


@pytest.fixture(scope="module")
def gpu_build(cuda: None, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """yolov5n built on the GPU at 320 (TorchScript, ONNX, OpenVINO; FP32 and FP16): the folder, each node's status."""
    out = tmp_path_factory.mktemp("gpu") / "art"
    built = optimize("build", WEIGHTS, "--out", out, "--parity-data", VAL_DATA, "--device", "cuda",
                     "--targets", "torchscript,onnx,openvino", "--precisions", "fp32,fp16", "--imgsz", "320",
                     "--batch-sizes", "1,4")
    assert built.returncode == 0, brief(built)
    return out, statuses(built)


def test_the_throughput_mode_on_two_streams_keeps_what_one_stream_keeps(
        gpu_build: tuple[Path, dict[str, str]], yolov5n_and_pixels: tuple[object, np.ndarray]) -> None:
    """A batch of 5 (split 3 + 2 over the two streams, each part its own graph) and of 8, twice each (replays)."""
    from yolo_optimize.runtime.runners import open_runner

    folder = gpu_build[0] / "yolov5n" / "torchscript-fp32"
    _, pixels = yolov5n_and_pixels
    kept = {}
    for mode in ("latency", "throughput"):
        with open_runner(folder, Manifest.read(folder), device="cuda", mode=mode) as runner:
            kept[mode] = [runner.kept(runner.input_of(pixels[:size])) for size in (5, 8, 5, 8)]
            execution = runner.execution(8)
        assert execution.mode == mode and execution.settings["cuda_graph"], execution
    assert execution.streams == 2 and execution.request_batch == 4
    assert sum(len(rows) for batch in kept["latency"] for rows in batch) > 20, "too few detections to compare"
    for one, two in zip(kept["latency"], kept["throughput"]):
        assert [len(rows) for rows in one] == [len(rows) for rows in two]
        assert all(np.abs(a - b).max(initial=0) < 1e-2 for a, b in zip(one, two))


def test_a_gpu_build_publishes_every_target_it_can_and_the_gpu_evaluation_measures_graphs(
        gpu_build: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    art, done = gpu_build
    assert {done[n] for n in ("torchscript-fp32", "torchscript-fp16", "onnx-fp32", "onnx-fp16")} == {"built"}, done
    parity = {node: Manifest.read(art / "yolov5n" / node).parity for node in ("torchscript-fp32", "onnx-fp32")}
    assert parity["torchscript-fp32"]["device"] == "cuda" and parity["onnx-fp32"]["device"] == "cpu"
    report = tmp_path / "report"
    evaluated = optimize(*eval_args(art, report, "--device", "cuda", "--batch-sizes", "1,4",
                                    "--min-time", "0.5", "--repeats", "1", "--max-images", "32"))
    assert evaluated.returncode == 0, brief(evaluated)
    rows = {line.artifact: line for line in written_matrix(report)}
    assert {"pytorch-fp32", "pytorch-fp16", "torchscript-fp32", "torchscript-fp16"} <= {
        name for name, line in rows.items() if line.status == "ok"}, {n: r.status for n, r in rows.items()}
    assert rows["onnx-fp32"].status.startswith("skipped: this onnxruntime")
    if done["openvino-fp32"] == "built":  # OpenVINO computes on the CPU: a GPU evaluation skips it
        assert rows["openvino-fp32"].status.startswith("skipped: OpenVINO runs on the CPU")
    else:
        assert done["openvino-fp32"] == "skipped" and "openvino-fp32" not in rows  # not installed there
    results = json.loads((report / "results.json").read_text())["rows"]
    executions = {row["name"]: {b["batch"]: b["execution"] for b in row["measurements"][0]["batches"]}
                  for row in results if row["name"].startswith(("pytorch", "torchscript")) and row["measurements"]}
    assert executions and all(e["settings"]["cuda_graph"] for row in executions.values() for e in row.values())
    for row in executions.values():  # auto: one stream at every batch size (two measured slower); decoders beside
        assert (row[1]["mode"], row[4]["mode"]) == ("latency", "latency") and "two measured slower" in row[4]["note"]
        assert row[4]["end_to_end"]["decoder_threads"] == max(1, usable_cpus() - 2)
