"""INT8 NCNN models: ncnn's own quantization (its tools' histograms and int8 weight layout) written in Python,
with the Detect head's convolutions left in float through the module paths the export recorded, gated like every
INT8 artifact and run by NCNN's own INT8 inference."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.conftest import CALIB_DATA, EDGE_SIZE, INT8_ARGS, VAL_DATA, assert_gated_yolov5n_int8, brief, optimize
from yolo_optimize.artifact import Manifest
from yolo_optimize.evaluation.results import Report
from yolo_optimize.families import family_named
from yolo_optimize.images import list_images
from yolo_optimize.optimize.calibration import calibration_inputs
from yolo_optimize.optimize.int8_ncnn import CLIP_SHARE, INT8_TAG, clip_bin, float_net, input_scales, quantize
from yolo_optimize.runtime.runners.ncnn import read_layers

ncnn = pytest.importorskip("ncnn", reason="the ncnn target needs ncnn and pnnx: pip install 'yolo-optimize[edge]'")

YOLOV5 = family_named("yolov5")
HEAD = {"conv_64", "conv_65", "conv_66"}  # yolov5n's Detect convolutions, as pnnx names them


def outputs(param: Path, images: list[np.ndarray]) -> np.ndarray:
    net = float_net(param, 2)
    found = []
    for image in images:
        with net.create_extractor() as extractor:
            extractor.input("in0", ncnn.Mat(np.ascontiguousarray(image[0])).clone())
            found.append(np.array(extractor.extract("out0")[1]))
    return np.stack(found)


def test_the_range_kept_is_the_share_of_magnitudes_the_histogram_holds_below_it() -> None:
    histogram = np.zeros(2048, np.int64)
    histogram[:100] = 1000
    histogram[1500] = 1  # one outlier in 100001: outside the 99.999% range
    assert clip_bin(histogram) == 99
    histogram[1500] = 0
    histogram[1800] = 100  # a tail of 0.1%: inside it
    assert clip_bin(histogram) == 1800 and CLIP_SHARE == 0.99999


@pytest.fixture(scope="module")
def quantized_edge(built_edge: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, float]]:
    """The session's 320 ncnn-fp32 of yolov5n quantized on 4 calibration images, head in float: (fp32 .param,
    int8 .param, the input scales)."""
    fp32 = built_edge / "ncnn-fp32" / str(Manifest.read(built_edge / "ncnn-fp32").entry)
    modules = Manifest.read(built_edge / "ncnn-fp32").info["convolution_modules"]
    images = calibration_inputs(YOLOV5, tuple(list_images(CALIB_DATA)[:4]), EDGE_SIZE)
    scales = input_scales(fp32, [name for name in modules if name not in HEAD], images, 2)
    int8 = tmp_path_factory.mktemp("ncnn-int8") / "model.ncnn.param"
    quantize(fp32, int8, scales)
    return fp32, int8, scales


def test_the_quantized_convolutions_carry_int8_weights_and_scales_where_ncnn_reads_them(
        quantized_edge: tuple[Path, Path, dict[str, float]]) -> None:
    """The .param keeps every layer and line but for ``8=2`` on each quantized convolution; its .bin holds, for each,
    the int8 tag, one byte a weight, the bias, a scale per output channel and the input scale: a quarter of the
    float weights' bytes, plus the head's float ones."""
    fp32, int8, scales = quantized_edge
    before, after = read_layers(fp32), read_layers(int8)
    assert [layer.name for layer in before] == [layer.name for layer in after]
    for old, new in zip(before, after):
        assert new.params == (*old.params, "8=2") if old.name in scales else new.params == old.params, old.name
    assert len(scales) == 57 and not HEAD & set(scales)
    assert fp32.read_text().splitlines()[:2] == int8.read_text().splitlines()[:2]
    first = next(layer for layer in after if layer.kind == "Convolution")
    assert int.from_bytes(int8.with_suffix(".bin").read_bytes()[:4], "little") == INT8_TAG, first.name
    assert 0.25 < int8.with_suffix(".bin").stat().st_size / fp32.with_suffix(".bin").stat().st_size < 0.45


def test_ncnn_runs_the_file_in_int8_close_to_float_and_a_wrong_scale_shows(
        quantized_edge: tuple[Path, Path, dict[str, float]], tmp_path: Path) -> None:
    """Scores of two validation images within INT8 noise of the FP32 model, and one convolution's input scale
    multiplied by 8 moves the scores far more than the quantization does: NCNN reads the scales, which only its INT8
    path uses. (The same .bin loaded with INT8 inference off, read as float weights, was garbage until NCNN crashed
    on it once, a segmentation fault in ``load_model``, 2026-11-29: a file of int8 codes is not a float file, and
    NCNN does not check.)"""
    fp32, int8, scales = quantized_edge
    images = calibration_inputs(YOLOV5, tuple(list_images(VAL_DATA)[:2]), EDGE_SIZE)
    want, got = outputs(fp32, images), outputs(int8, images)
    error = float(np.quantile(np.abs(got[..., 4:] - want[..., 4:]), 0.999))
    assert error < 0.15
    broken = tmp_path / "model.ncnn.param"
    quantize(fp32, broken, {**scales, "conv_8": scales["conv_8"] * 8})
    assert float(np.quantile(np.abs(outputs(broken, images)[..., 4:] - want[..., 4:]), 0.999)) > 2 * error


def test_weights_of_a_layer_it_cannot_read_are_refused_in_one_line(built_edge: Path, tmp_path: Path) -> None:
    folder = shutil.copytree(built_edge / "ncnn-fp32", tmp_path / "copy")
    param = folder / str(Manifest.read(folder).entry)
    with param.with_suffix(".bin").open("ab") as weights:
        weights.write(bytes(64))
    with pytest.raises(RuntimeError, match=r"^NCNN INT8: the \.bin holds 64 bytes more than its convolutions', "
                                           r"InnerProduct and MemoryData layers'; the weights of BinaryOp, Concat, "
                                           r".* cannot be read"):
        quantize(param, tmp_path / "out.param", {})


@pytest.mark.slow
def test_an_int8_model_passes_its_gate_and_parity_and_runs_its_convolutions_in_int8(built_edge_int8: Path) -> None:
    manifest = Manifest.read(built_edge_int8 / "ncnn-int8")
    assert_gated_yolov5n_int8(manifest)
    assert set(manifest.info["float_convolutions"]) == HEAD
    weights = [next((built_edge_int8 / node).rglob("*.bin")).stat().st_size for node in ("ncnn-int8", "ncnn-fp32")]
    assert weights[0] < 0.45 * weights[1]


@pytest.mark.slow
def test_the_int8_row_scores_close_to_pytorch_in_an_evaluation(edge_int8_evaluated: Report) -> None:
    """The drop recomputed by the evaluator on 32 coco_val128 images, apart from the build's gate: within 5 points
    (with ncnn2table's KL thresholds it lost 2.8 on all 128)."""
    rows = {row.name: row for row in edge_int8_evaluated.rows}
    row, baseline = rows["ncnn-int8"], rows["pytorch-fp32"]
    assert not row.error and row.accuracy and baseline.accuracy
    assert baseline.accuracy.map50_95 - row.accuracy.map50_95 < 0.05
    assert row.measurements[0].executed_precision == "int8+fp32 (57 of 60 convolutions in int8)"


@pytest.mark.slow
def test_a_yolo11_graph_with_grouped_convolutions_builds_with_its_whole_head_in_float(tmp_path: Path) -> None:
    """YOLO11n (seeded random weights: the gate is vacuous, parity is not): its head caches anchors per input shape,
    which pnnx could not write as a meshgrid until the export ran the example once; its depthwise convolutions
    (ConvolutionDepthWise) are paired with their modules too and stay in float, like the Detect head's 25."""
    result = optimize("build", "yolo11n", "--random-weights", "--imgsz", str(EDGE_SIZE), "--targets", "ncnn",
                      "--precisions", "fp32,int8", "--parity-data", VAL_DATA, "--out", tmp_path, *INT8_ARGS)
    assert result.returncode == 0, brief(result)
    fp32, int8 = (Manifest.read(tmp_path / "yolo11n-random" / f"ncnn-{p}") for p in ("fp32", "int8"))
    assert fp32.parity and fp32.parity["passed"] and fp32.info["layers"]["ConvolutionDepthWise"] == 7
    assert len(fp32.info["convolution_modules"]) == 88 and int8.info["kept_in_float"] == ["model.23"]
    head = [name for name, module in fp32.info["convolution_modules"].items() if module.startswith("model.23.")]
    assert sorted(int8.info["float_convolutions"]) == sorted(head) and len(head) == 25
    assert int8.info["int8_convolutions"] == [62, 88] and int8.parity and int8.parity["passed"]
    assert int8.parity["executed_precision"] == "int8+fp32 (62 of 88 convolutions in int8)"


class Classifier(torch.nn.Module):
    """A convolution, then its pooled features into a fully connected layer: a ResNet's end (NCNN's InnerProduct)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.fc = torch.nn.Linear(16, 10)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.conv(images)).mean((2, 3)))


def test_a_classifiers_inner_product_is_copied_in_float_beside_its_int8_convolutions(tmp_path: Path) -> None:
    """resnet18's ncnn-int8 was refused: the stage could not size an InnerProduct's weights in the .bin. Now they are
    copied as they are, in float, and NCNN's INT8 inference runs the file close to the float model."""
    import pnnx

    from yolo_optimize.export.ncnn import scratch_paths

    param = tmp_path / "model.ncnn.param"
    with torch.no_grad():
        pnnx.export(Classifier().eval(), str(tmp_path / "model.pt"), (torch.rand(1, 3, 32, 32),), check_trace=False,
                    ncnnparam=str(param), ncnnbin=str(param.with_suffix(".bin")), fp16=False,
                    **scratch_paths(tmp_path))
    layers = read_layers(param)
    weighted = [layer for layer in layers if layer.kind in ("Convolution", "InnerProduct")]
    assert [layer.kind for layer in weighted] == ["Convolution", "InnerProduct"]
    images = [np.random.default_rng(seed).random((1, 3, 32, 32), np.float32) for seed in range(4)]
    int8 = tmp_path / "int8" / "model.ncnn.param"
    int8.parent.mkdir()
    quantize(param, int8, input_scales(param, [weighted[0].name], images, 1))
    assert [layer.params for layer in read_layers(int8)] == [
        (*layer.params, "8=2") if layer is weighted[0] else layer.params for layer in layers]
    float_weights = 4 * (1 + 16 * 10 + 10)  # the InnerProduct's tag, weights and bias, at the end of the .bin
    assert int8.with_suffix(".bin").read_bytes()[-float_weights:] == param.with_suffix(".bin").read_bytes()[
        -float_weights:]
    want, got = outputs(param, images), outputs(int8, images)
    assert np.abs(got - want).max() < 0.05 * np.abs(want).max()
