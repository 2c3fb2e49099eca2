"""The NCNN runner in an evaluation: measured beside the baseline, one image at a time on every thread at batch 1
and one image per thread at batch 2, scored as PyTorch scores; its snippets run as printed; its threads set on the
running net; a prepared uint8 image converted by NCNN itself; its per-layer times read from NCNN's own timer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from tests.runtime.runners.handmade import ncnn_model
from yolo_optimize.artifact import Manifest
from yolo_optimize.evaluation.measuring.external import external_artifacts, inspect_entries
from yolo_optimize.evaluation.reporting.deployment_snippet import snippet
from yolo_optimize.evaluation.results import Report
from yolo_optimize.runtime.runners import open_runner
from yolo_optimize.runtime.runners.ncnn import benchmark_layers, ncnn_input, read_layers

SAVED_BENCHMARK = Path(__file__).parent / "data" / "ncnn_benchmark_yolov5n_int8_640.txt"


def test_ncnn_rows_are_measured_image_by_image_and_score_what_pytorch_scores(edge_evaluated: Report) -> None:
    rows = {row.name: row for row in edge_evaluated.rows}
    baseline = rows["pytorch-fp32"].accuracy
    for name in ("ncnn-fp32", "ncnn-fp16"):
        row = rows[name]
        assert not row.error and row.accuracy and baseline, name
        assert abs(row.accuracy.map50_95 - baseline.map50_95) < (0.001 if name == "ncnn-fp32" else 0.01), name
        executions = {batch.batch: batch.execution for batch in row.measurements[0].batches}
        threads = edge_evaluated.settings.threads
        half = dict.fromkeys(("use_fp16_storage", "use_fp16_packed", "use_fp16_arithmetic"), name == "ncnn-fp16")
        assert executions[1]["mode"] == "latency" and executions[1]["settings"] == {"num_threads": threads, **half}
        assert executions[2]["mode"] == "throughput" and executions[2]["streams"] == threads, "one image per thread"
        assert executions[2]["settings"] == {"num_threads": 1, **half}


@pytest.mark.parametrize(("form", "batch"), [("float", 1), ("uint8", 1), ("uint8", 2)])
def test_the_printed_snippet_run_as_printed_gives_what_the_runner_gave(built_edge: Path, form: str,
                                                                      batch: int) -> None:
    """The row's snippet for its execution at the batch size (latency at 1, a thread per image at 2) executed on
    float CHW images or the prepared uint8 HWC ones NCNN converts itself."""
    folder = built_edge / "ncnn-fp32"
    manifest = Manifest.read(folder)
    pixels = np.random.default_rng(0).integers(0, 256, (batch, 320, 320, 3), dtype=np.uint8)
    images = pixels if form == "uint8" else np.ascontiguousarray(pixels.transpose(0, 3, 1, 2), dtype=np.float32) / 255
    with open_runner(folder, manifest, threads=2, mode="auto") as runner:
        execution, want = runner.execution(batch), runner.infer(images)
    code = snippet("ncnn", "fp32", str(folder / str(manifest.entry)), asdict(execution), form)
    assert ("ThreadPoolExecutor(2)" in code) == (batch > 1)
    scope = {"image": images[0], "images": list(images)}
    exec(code, scope)
    got = np.stack(scope["outputs"]) if batch > 1 else scope["outputs"][None]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


def test_the_threads_are_set_on_the_running_net(built_edge: Path) -> None:
    folder = built_edge / "ncnn-fp32"
    images = np.zeros((2, 3, 320, 320), np.float32)
    with open_runner(folder, Manifest.read(folder), threads=2) as runner:
        before = runner.infer(images)
        runner.set_threads(1)
        assert runner.net.opt.num_threads == 1 and runner.execution(1).settings["num_threads"] == 1
        np.testing.assert_array_equal(runner.infer(images), before)


def test_a_prepared_uint8_image_becomes_in_ncnn_the_float_input_the_float_path_feeds() -> None:
    """NCNN's from_pixels and x 1/255 (what the runner and the INT8 calibration feed a uint8 artifact) against the
    float CHW image divided by 255 outside: the same Mat within float rounding."""
    image = np.random.default_rng(0).integers(0, 256, (48, 64, 3), dtype=np.uint8)
    converted = np.array(ncnn_input(image))
    assert converted.shape == (3, 48, 64)
    np.testing.assert_allclose(converted, image.transpose(2, 0, 1) / np.float32(255), rtol=0, atol=1e-6)
    float_path = np.ascontiguousarray(image.transpose(2, 0, 1), dtype=np.float32) / 255
    np.testing.assert_array_equal(np.array(ncnn_input(float_path)), float_path)


@pytest.mark.parametrize("form", ["transposed view", "float64"])
def test_a_float_image_in_any_layout_or_type_reaches_ncnn_as_its_values(form: str) -> None:
    """``ncnn.Mat`` reads the raw buffer as C-ordered float32: a strided view or a float64 array must be made so, and
    kept alive until NCNN has copied it (a temporary freed first gave garbage)."""
    chw = np.random.default_rng(0).random((3, 96, 128), dtype=np.float32)
    image = chw.transpose(0, 2, 1) if form == "transposed view" else chw.astype(np.float64)
    np.testing.assert_array_equal(np.array(ncnn_input(image)), np.ascontiguousarray(image, dtype=np.float32))


def test_ncnn_benchmark_lines_give_each_layer_its_time_precision_and_operations(built_edge_int8: Path) -> None:
    """One pass of yolov5n's INT8 file at 640 as an ncnn built with NCNN_BENCHMARK printed it (saved from the build
    bench/archive/edge_runtimes/ncnn_layers.py describes), read against the fixture's .param (pnnx names the layers
    alike in every build): every layer the graph runs timed once, in the order it ran; the 57 convolutions the .param
    gives int8 scales in int8 and the Detect head's 3 in fp32; their operations summing to yolov5n's 4.5 GFLOPs at 640;
    two passes read as their mean."""
    folder = built_edge_int8 / "ncnn-int8"
    param = folder / str(Manifest.read(folder).entry)
    printed = SAVED_BENCHMARK.read_text()
    layers, events = benchmark_layers(printed, param, "fp32", runs=1)
    assert [layer.name for layer in layers] == [event["name"] for event in events]
    assert {layer.name for layer in layers} == {layer.name for layer in read_layers(param) if layer.kind != "Input"}
    assert (layers[0].name, layers[0].kind, layers[0].ms, layers[0].executed) == ("conv_7", "Convolution", 9.36, "int8")
    convolutions = [layer for layer in layers if layer.gflops is not None]
    assert len(convolutions) == 60 and all(layer.kind == "Convolution" for layer in convolutions)
    assert [layer.executed for layer in convolutions].count("int8") == 57
    assert {layer.name for layer in convolutions if layer.executed == "fp32"} == {"conv_64", "conv_65", "conv_66"}
    assert 4.4 < sum(layer.gflops or 0 for layer in convolutions) < 4.6
    assert benchmark_layers(printed * 2, param, "fp32", runs=2)[0] == layers


def test_the_pypi_ncnn_has_no_per_layer_timer_and_the_profile_says_how_to_get_one(built_edge: Path,
                                                                                  tmp_path: Path) -> None:
    folder = built_edge / "ncnn-fp32"
    with open_runner(folder, Manifest.read(folder), threads=2) as runner, \
            pytest.raises(NotImplementedError, match="built without NCNN_BENCHMARK.*bench/archive/edge_runtimes"):
        runner.profile_layers(np.zeros((1, 3, 320, 320), np.float32), 2, tmp_path / "trace.json")
    assert not (tmp_path / "trace.json").exists()


def cut_short(param: Path) -> None:
    weights = param.with_suffix(".bin")
    weights.write_bytes(weights.read_bytes()[:20])


def unknown_layer(param: Path) -> None:
    param.write_text(param.read_text().replace("Convolution", "Convolution3000"))


@pytest.mark.parametrize(("damage", "message"), [
    (cut_short, "NCNN could not read the weights model.ncnn.bin (missing, cut short, or not this graph's)"),
    (unknown_layer, "NCNN could not read the graph model.ncnn.param (malformed .param)")], ids=["weights", "graph"])
def test_files_ncnn_cannot_read_fail_the_runner_in_one_line_instead_of_crashing_the_process(
        tmp_path: Path, damage: Callable[[Path], None], message: str) -> None:
    """NCNN returns -1 for a graph or weights it could not read and goes on: the first image then crashed the row's
    process (SIGSEGV). These pass the files' check before loading (``files_problem``: the .bin is there and not empty,
    the .param well formed), so the runner itself refuses them."""
    param = ncnn_model(tmp_path / "model")
    damage(param)
    [candidate] = external_artifacts(inspect_entries((str(param.parent),), "yolov5", 32), {})
    assert candidate.manifest is not None
    with pytest.raises(RuntimeError) as refused, open_runner(candidate.folder, candidate.manifest) as runner:
        runner.infer(np.zeros((1, 3, 32, 32), np.float32))
    assert str(refused.value) == message
