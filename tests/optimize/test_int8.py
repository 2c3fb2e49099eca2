"""INT8: calibrated on real images, the Detect head's decode in float, gated on labelled images, honest about
precision."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import openvino as ov
import pytest
from onnx import numpy_helper

from tests.conftest import CALIB_DATA, INT8_ARGS, VAL_DATA, brief, build_args, optimize
from yolo_optimize.artifact import Manifest, read_valid
from yolo_optimize.host.cpu import has_native_bf16, has_vnni, usable_cpus
from yolo_optimize.limits.choices import bf16_evidence, float_parts_precision
from yolo_optimize.limits.peaks import cached_limits
from yolo_optimize.metadata import ArtifactMetadata
from yolo_optimize.optimize.int8_openvino import OpenVinoInt8
from yolo_optimize.optimize.nncf_int8 import ACCURACY_CONTROL_ROUTE, NO_TUNING_IMAGES, ROUTE
from yolo_optimize.runtime.dataset import Dataset, PreparedImages
from yolo_optimize.runtime.runners.onnxruntime import INTEGER_CONVOLUTION_SUFFIX

# ONNX Runtime computes a convolution in int8 only where it can fuse DQ -> Conv -> Q; onnx-int8 completes NNCF's
# graph for it (the stem as space-to-depth) and runs the three Detect outputs as integer GEMMs, so every convolution
# runs on int8 kernels, read back from the runtime; AOTInductor's keep the Detect outputs in float. OpenVINO computes
# an INT8 IR's float parts in bf16 where its bf16 kernels measure faster than its fp32 ones on this CPU.


def float_parts() -> str:
    """What OpenVINO INT8's float parts should compute in here, from this session's measured limits."""
    if not has_native_bf16():
        return "fp32"
    return float_parts_precision(bf16_evidence(cached_limits(usable_cpus()), "openvino"))


def executed(target: str) -> str:
    return {"onnx": "int8+fp32", "openvino": f"int8+{float_parts()}",
            "aoti": "int8+fp32 (57 of 60 convolutions in int8)"}[target]


@pytest.mark.parametrize("target", ["onnx", "openvino", "aoti"])
def test_int8_artifact_passes_its_gate_and_records_it(built_int8: Path, target: str) -> None:
    manifest = read_valid(built_int8 / f"{target}-int8")
    assert manifest is not None and manifest.precision == "int8"
    gate = manifest.info["gate"]
    assert gate["passed"] and gate["drop_points"] <= gate["max_drop_points"] == 3.0
    assert gate["gate_data"] == str(CALIB_DATA.resolve()) and gate["gate_images"] == 24
    assert gate["held_out"].startswith("held out of --calib-data: 50% of its 128 images")
    images = gate["images"]
    assert (len(images["calibrated"]), len(images["gated"])) == (16, 24) and images["tuned"] == []
    assert not {Path(name).name for name in images["calibrated"]} & {Path(name).name for name in images["gated"]}
    assert gate["route"] and 0.2 < gate["fp32_score"] < 0.7 and gate["metric"] == "mAP50-95"
    assert gate["attempts"][-1]["route"] == gate["route"] and gate["attempts"][-1]["passed"]
    low, high = gate["drop_90ci_points"]
    assert low <= gate["drop_points"] <= high and high - low > 0.1, "24 gate images cannot pin the drop down"
    assert gate["bootstrap_resamples"] == 100 and "--max-map-drop" in gate["rule"]
    assert gate["verdict"] == ("within noise of the limit" if low <= 3.0 <= high else "clear")
    assert manifest.parity and manifest.parity["executed_precision"] == executed(target)
    assert manifest.parity["tolerance"]["precision"] == "int8"


def evaluator_map(folder: Path, dataset: Dataset, prepared: PreparedImages, pixels: np.ndarray) -> float:
    """mAP50-95 of the artifact in ``folder`` on ``dataset`` (``prepared`` as ``pixels``), by the evaluator's own code:
    its runner, predict_all, the COCO metric."""
    from yolo_optimize.runtime.accuracy import coco_results, mean_average_precision, predict_all
    from yolo_optimize.runtime.runners import open_runner

    manifest = Manifest.read(folder)
    with open_runner(folder, manifest) as runner:
        found = predict_all(ArtifactMetadata.of(manifest).model_family(), runner, pixels, 8)
    return float(mean_average_precision(coco_results(found, dataset, prepared), dataset).map50_95 or 0.0)


@pytest.mark.slow
def test_the_gate_at_its_default_limit_records_the_drop_the_evaluator_measures(built: Path, tmp_path: Path,
                                                                               machine_cache: dict[str, str]) -> None:
    """openvino-int8 of the real yolov5n with the gate's defaults: calibrated on half of coco128, gated on the other
    half (64 images) at --max-map-drop 1.0. The drop is computed again from the two published files by the
    evaluator's own code on the images the manifest says it gated on, not read from the manifest."""
    from yolo_optimize.families import family_named
    from yolo_optimize.runtime.dataset import load_dataset, prepare_images

    out = tmp_path / "artifacts"
    shutil.copytree(built.parent, out)
    result = optimize(*build_args(out, "--targets", "openvino", "--precisions", "int8", "--calib-data", CALIB_DATA),
                      env=machine_cache)
    assert result.returncode == 0, brief(result)
    int8 = Manifest.read(out / "yolov5n" / "openvino-int8")
    gate = int8.info["gate"]
    assert gate["max_drop_points"] == 1.0 and gate["gate_images"] == 64 and len(gate["images"]["calibrated"]) == 64
    dataset = load_dataset(CALIB_DATA).subset(int8.params["gate"]["images"]["images"])
    prepared = prepare_images(dataset, family_named("yolov5"), 640, tmp_path)
    pixels = np.load(prepared.pixels)
    maps = {node: evaluator_map(out / "yolov5n" / node, dataset, prepared, pixels)
            for node in ("openvino-fp32", "openvino-int8")}
    drop = (maps["openvino-fp32"] - maps["openvino-int8"]) * 100
    assert abs(drop - gate["drop_points"]) <= 1e-3 and abs(maps["openvino-fp32"] - gate["fp32_score"]) <= 1e-4
    assert gate["passed"] and drop <= 1.0, gate


def test_openvino_int8_says_how_its_float_parts_compute_and_its_gate_measured_that(built_int8: Path) -> None:
    """The IR carries the hint it was gated with: bf16 float parts only where this CPU's OpenVINO bf16 kernels
    measured faster than its fp32 ones (the session's limits), the two figures recorded beside the choice."""
    manifest = Manifest.read(built_int8 / "openvino-int8")
    chosen = float_parts()
    hint = {"bf16": "bf16", "fp32": "f32"}[chosen]
    assert manifest.metadata["compile_config"] == {"INFERENCE_PRECISION_HINT": hint}
    assert manifest.info["float_precision"] == chosen and manifest.metadata["float_precision"] == chosen
    evidence = manifest.info["float_precision_evidence"]
    if has_native_bf16():
        limits = cached_limits(usable_cpus())
        assert limits is not None and evidence["decided_by"] == "measured rates"
        assert (evidence["bf16_gops"], evidence["fp32_gops"]) == (limits.peak_gops("openvino", "bf16"),
                                                                  limits.peak_gops("openvino", "fp32"))
        assert (chosen == "bf16") == (evidence["ratio"] >= evidence["margin"])
    else:
        assert chosen == "fp32" and "no native bf16" in evidence["decided_by"]
    model = ov.Core().read_model(str(built_int8 / "openvino-int8" / "yolov5n_openvino_model" / "yolov5n.xml"))
    compile_config = model.get_rt_info(["model_info", "compile_config"]).astype(str)
    assert compile_config == f'{{"INFERENCE_PRECISION_HINT": "{hint}"}}'


def test_onnx_int8_stem_runs_as_space_to_depth_on_int8_kernels(built_int8: Path) -> None:
    manifest = Manifest.read(built_int8 / "onnx-int8")
    assert manifest.info["space_to_depth"] == ["node_conv2d"] and manifest.metadata["space_to_depth"] == ["node_conv2d"]
    model = onnx.load(str(built_int8 / "onnx-int8" / "yolov5n.onnx"))
    produced_by = {out: n for n in model.graph.node for out in n.output}
    stem = next(n for n in model.graph.node if n.name == "node_conv2d")
    assert produced_by[stem.input[0]].op_type == "DequantizeLinear"
    assert produced_by[produced_by[stem.input[0]].input[0]].op_type == "SpaceToDepth"


def test_onnx_int8_keeps_the_decode_in_float_and_its_output_convolutions_unrounded(built_int8: Path) -> None:
    """The decode reads float: the head's three convolutions are integer GEMMs writing float (never a u8 output), on
    weights of the file's bit width."""
    manifest = Manifest.read(built_int8 / "onnx-int8")
    model = onnx.load(str(built_int8 / "onnx-int8" / "yolov5n.onnx"))
    kept = set(manifest.info["kept_in_float"])
    ops = {n.name: n.op_type for n in model.graph.node}
    assert {"Sigmoid", "Concat"} <= {ops[n] for n in kept if n in ops}
    produced_by = {out: n for n in model.graph.node for out in n.output}
    final = produced_by[model.graph.output[0].name]
    assert final.op_type == "Concat" and final.name in kept
    sigmoid_inputs = [produced_by.get(n.input[0]) for n in model.graph.node
                      if n.op_type == "Sigmoid" and n.name in kept]
    assert all(p is None or p.op_type != "DequantizeLinear" for p in sigmoid_inputs), "sigmoid fed by INT8 activations"
    assert manifest.info["integer_head"] is True
    assert not [n for n in model.graph.node if n.op_type == "Conv" and n.name in kept], "no float head convolution"
    heads = [n for n in model.graph.node if n.op_type == "MatMulIntegerToFloat"]
    assert sorted(n.name.removesuffix(INTEGER_CONVOLUTION_SUFFIX) for n in heads) == [
        "node_conv2d_57", "node_conv2d_58", "node_conv2d_59"]
    weights = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    levels = 2 ** (manifest.metadata["weight_bits"] - 1) - 1
    for node in heads:
        assert weights[node.input[1]].dtype == np.int8 and np.abs(weights[node.input[1]]).max() == levels, node.name
        assert [n.op_type for n in model.graph.node if node.output[0] in n.input] == ["Reshape"], "float out"
    assert sum(n.op_type == "QuantizeLinear" for n in model.graph.node) > 20
    assert {p.key: p.value for p in model.metadata_props}["precision"] == "int8"


def test_onnx_int8_weights_fit_the_cpu_it_was_built_on(built_int8: Path) -> None:
    """7-bit weights without VNNI (u8 x s8 sums cannot saturate), 8-bit with it, and the file says which."""
    model = onnx.load(str(built_int8 / "onnx-int8" / "yolov5n.onnx"))
    metadata = {p.key: p.value for p in model.metadata_props}
    weights = [numpy_helper.to_array(i) for i in model.graph.initializer if i.data_type == onnx.TensorProto.INT8
               and len(i.dims) == 4]
    assert len(weights) > 20
    widest = max(int(np.abs(w.astype(np.int16)).max()) for w in weights)
    if has_vnni():
        assert metadata["weight_bits"] == "8" and metadata["requires_vnni"] == "true" and widest > 64
    else:
        assert metadata["weight_bits"] == "7" and metadata["requires_vnni"] == "false" and widest <= 64
    assert Manifest.read(built_int8 / "onnx-int8").info["built_on_cpu"]["vnni"] == has_vnni()
    session = ort.InferenceSession(str(built_int8 / "onnx-int8" / "yolov5n.onnx"), providers=["CPUExecutionProvider"])
    assert session.get_outputs()[0].shape[1:] == [25200, 85]


def test_openvino_int8_quantizes_the_head_convolutions_and_keeps_the_decode_in_float(built_int8: Path) -> None:
    """OpenVINO's recipe (histogram ranges, full bias correction) quantizes the Detect head's three output
    convolutions like every other one; the sigmoid and box arithmetic after them read float."""
    model = ov.Core().read_model(str(built_int8 / "openvino-int8" / "yolov5n_openvino_model" / "yolov5n.xml"))
    ops = model.get_ordered_ops()
    assert [op.get_type_name() for op in ops].count("FakeQuantize") > 20
    assert model.get_rt_info(["model_info", "precision"]).astype(str) == "int8"
    manifest = Manifest.read(built_int8 / "openvino-int8")
    assert manifest.info["gate"]["route"] == OpenVinoInt8.route
    kept = set(manifest.info["kept_in_float"])
    assert {op.get_type_name() for op in ops if op.get_friendly_name() in kept} >= {"Sigmoid"}
    assert not [op for op in ops if op.get_type_name() == "Convolution" and op.get_friendly_name() in kept]
    head = [op for op in ops if op.get_type_name() == "Convolution"
            and op.get_output_partial_shape(0)[1].get_length() == 255]
    assert len(head) == 3 and all(op.input_value(0).get_node().get_type_name() == "FakeQuantize" for op in head)
    sigmoid_inputs = [op.input_value(0).get_node().get_type_name() for op in ops if op.get_type_name() == "Sigmoid"
                      and op.get_friendly_name() in kept]
    assert sigmoid_inputs and "FakeQuantize" not in sigmoid_inputs, "the decode reads int8 activations"


def test_bf16_and_fp16_are_different_things_on_every_cpu(built_int8: Path) -> None:
    bf16, fp16 = read_valid(built_int8 / "openvino-bf16"), read_valid(built_int8 / "openvino-fp16")
    assert bf16 is not None and bf16.parity and bf16.parity["passed"] and fp16 is not None and fp16.parity
    if has_native_bf16():
        assert bf16.parity["executed_precision"] == "bf16" and bf16.parity["tolerance"]["precision"] == "bf16"
    else:
        assert bf16.parity["executed_precision"] == "fp32 (no native bf16 on this CPU)"
    assert fp16.parity["executed_precision"] == "fp32 (fp16 weights)" and fp16.parity["compute_precision"] == "fp32"
    assert fp16.metadata["compile_config"] == {"INFERENCE_PRECISION_HINT": "f32"}
    assert bf16.metadata["compile_config"] == {"INFERENCE_PRECISION_HINT": "bf16"}
    fp32 = Manifest.read(built_int8 / "openvino-fp32").parity
    assert fp32["executed_precision"] == "fp32" and fp32["tolerance"]["precision"] == "fp32"
    assert fp32["cpu"]["native_bf16"] == has_native_bf16()


def test_every_artifact_records_the_precision_it_executed_in(built_int8: Path) -> None:
    labels = {"fp32": {"fp32"}, "fp16": {"fp32 (fp16 cast up)", "fp32 (fp16 weights)"},
              "int8": {executed(t) for t in ("onnx", "openvino", "aoti")},
              "bf16": {"bf16", "fp32 (no native bf16 on this CPU)"}}
    for folder in built_int8.iterdir():
        if (folder / "manifest.json").is_file():
            manifest = Manifest.read(folder)
            assert manifest.parity["executed_precision"] in labels[manifest.precision], folder.name


def black_images(folder: Path, labelled: bool) -> Path:
    """A calibration set of one black image (with a box label, where ``labelled``): every activation range it gives
    is far too narrow."""
    import cv2

    (folder / "images").mkdir(parents=True)
    cv2.imwrite(str(folder / "images" / "black.jpg"), np.zeros((480, 640, 3), np.uint8))
    if labelled:
        (folder / "labels").mkdir()
        (folder / "labels" / "black.txt").write_text("0 0.5 0.5 0.2 0.2\n")
    return folder


@pytest.mark.parametrize("labelled", [True, False])
def test_a_missed_limit_tries_the_accuracy_aware_route_on_the_calibration_images_only(
        built_int8: Path, tmp_path: Path, labelled: bool) -> None:
    """Calibrated on one black image, the default route loses points on any CPU, and the node fails without touching
    the artifact published before. With a label on that image, the accuracy-aware route tunes on it (reverting
    NNCF's 8 most harmful quantizer groups cannot win the points back) and both routes are named with their drops;
    without one, it has nothing to tune on but the gate's images, so it is not tried, and the failure says why.
    Two gate images (the accuracy-aware route re-validates once per quantizer group)."""
    shutil.copytree(built_int8.parent, tmp_path, dirs_exist_ok=True)  # never touch the folder other tests read
    black = black_images(tmp_path / "black", labelled)
    result = optimize(*build_args(tmp_path, "--targets", "onnx", "--precisions", "int8", "--calib-data", black,
                                  "--gate-data", CALIB_DATA, "--gate-images", "2", "--max-map-drop", "0"))
    assert result.returncode == 1 and "accuracy gate failed" in result.stdout, brief(result)
    assert f"{ROUTE}: " in result.stdout, brief(result)
    tried, skipped = f"{ACCURACY_CONTROL_ROUTE}: ", f"{ACCURACY_CONTROL_ROUTE} not tried: {NO_TUNING_IMAGES}"
    assert (tried in result.stdout, skipped in " ".join(result.stdout.split())) == (labelled, not labelled), \
        brief(result)
    assert read_valid(tmp_path / "yolov5n" / "onnx-int8") == read_valid(built_int8 / "onnx-int8")


def test_int8_without_calibration_data_names_the_option(tmp_path: Path) -> None:
    result = optimize(*build_args(tmp_path / "out", "--targets", "onnx", "--precisions", "int8"))
    assert result.returncode == 2 and "--calib-data" in result.stderr and not (tmp_path / "out").exists()


def test_calibration_folder_without_images(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = optimize(*build_args(tmp_path / "out", "--precisions", "int8", "--calib-data", tmp_path / "empty"))
    assert result.returncode == 2 and "no images" in result.stderr


def test_gate_set_without_labels(tmp_path: Path) -> None:
    images = tmp_path / "unlabelled" / "images"
    images.mkdir(parents=True)
    for image in sorted((VAL_DATA / "images").rglob("*.jpg"))[:2]:
        (images / image.name).write_bytes(image.read_bytes())
    result = optimize(*build_args(tmp_path / "out", "--precisions", "int8", "--calib-data", tmp_path / "unlabelled"))
    assert result.returncode == 2 and "needs labels" in result.stderr and "--gate-data" in result.stderr


def test_int8_for_a_target_that_cannot_do_it_is_skipped_with_the_reason(tmp_path: Path,
                                                                         machine_cache: dict[str, str]) -> None:
    """An INT8 build reads the machine's measured limits first: the session's, measured once (machine_cache)."""
    result = optimize(*build_args(tmp_path, "--targets", "torchscript", "--precisions", "int8", *INT8_ARGS),
                      env=machine_cache)
    assert result.returncode == 0, brief(result)
    assert "INT8 is not available for torchscript" in result.stdout
