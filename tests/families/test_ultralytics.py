"""The Ultralytics families (YOLOv3, v6, v8, v9, YOLO11, YOLO12 with the NMS head; YOLO26 and YOLOv10 with either
head; RT-DETR): the decode against Ultralytics' own, users' checkpoints, real builds."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

from tests.conftest import CALIB_DATA, VAL_DATA, brief, optimize, statuses
from yolo_optimize.artifact import Manifest
from yolo_optimize.checkpoint import load_model, pickle_globals, resolve_source
from yolo_optimize.errors import UserError
from yolo_optimize.families import family_named
from yolo_optimize.families.suppression import NmsSettings
from yolo_optimize.images import list_images, to_input
from yolo_optimize.optimize.int8_openvino import DEFAULT_RANGES_ROUTE, OpenVinoInt8
from yolo_optimize.runtime.runners import open_runner

ULTRALYTICS = family_named("ultralytics")


def scored(raw: np.ndarray) -> np.ndarray:
    """A random-weight head scores every class alike (about 1e-4): give the raw output varied, seeded scores."""
    rng = np.random.default_rng(0)
    scores = rng.random(raw[:, 4:].shape, dtype=np.float32)
    scores[rng.random(scores.shape) > 0.003] = 0  # about 2,000 candidates per image: NMS stays quick
    return np.concatenate([raw[:, :4], scores], axis=1)


def test_decode_matches_ultralytics_validator_on_the_same_raw_output() -> None:
    """Same boxes, scores and classes as DetectionValidator.postprocess at Ultralytics' val settings."""
    from ultralytics.models.yolo.detect.val import DetectionValidator

    model = load_model(resolve_source("yolo11n", random_weights=True))
    images = np.stack([ULTRALYTICS.preprocess(p, 640).pixels for p in list_images(VAL_DATA)[:2]])
    with torch.no_grad():
        raw = scored(model(torch.from_numpy(to_input(images))).numpy())
    assert raw.shape == (2, 84, 8400)
    ours = ULTRALYTICS.predictions(raw)
    validator = DetectionValidator(args={"conf": 0.001, "iou": 0.7, "max_det": 300})
    validator.end2end = False
    theirs = validator.postprocess(torch.from_numpy(raw))
    for mine, reference in zip(ours, theirs):
        expected = np.concatenate([reference["bboxes"], reference["conf"][:, None], reference["cls"][:, None]], 1)
        assert len(mine) == 300
        np.testing.assert_array_equal(rows_sorted(mine), rows_sorted(expected))  # equal scores may swap places


def rows_sorted(detected: np.ndarray) -> np.ndarray:
    return detected[np.lexsort(detected.T[::-1])]


def test_yolov5s_nms_would_misread_this_layout() -> None:
    """Why the family owns its decode: YOLOv5's NMS takes [B, 84, 8400] as 84 anchors of 8400 columns."""
    model = load_model(resolve_source("yolo11n", random_weights=True))
    with torch.no_grad():
        raw = scored(model(torch.zeros(1, 3, 640, 640)).numpy())
    wrong = family_named("yolov5").decode(raw, 0.001, 0.7, multi_label=False, max_det=300)[0]
    assert len(wrong) <= 84 and not np.array_equal(wrong, ULTRALYTICS.predictions(raw)[0][: len(wrong)])


def test_a_checkpoint_saved_the_ultralytics_way_loads_through_the_allow_list(tmp_path: Path) -> None:
    from ultralytics.nn.tasks import DetectionModel
    from ultralytics.utils import IterableSimpleNamespace
    from ultralytics.utils.torch_utils import strip_optimizer

    torch.manual_seed(1)
    trained = DetectionModel("yolov8n.yaml", nc=3, verbose=False)
    trained.names = {0: "cat", 1: "dog", 2: "bird"}
    trained.args = IterableSimpleNamespace(imgsz=640, task="detect")
    checkpoint = tmp_path / "pets.pt"
    torch.save({"model": trained, "ema": None, "train_args": {"imgsz": 640}}, checkpoint)
    strip_optimizer(checkpoint)  # what ultralytics does at the end of training: FP16, args as a dict
    assert any(n.startswith("ultralytics.nn.modules.") for n in pickle_globals(checkpoint))
    source = resolve_source(str(checkpoint))
    assert (source.family, source.model_id, source.pretrained) == ("ultralytics", "pets", True)
    model = load_model(source)
    assert model.names == {0: "cat", 1: "dog", 2: "bird"}
    with torch.no_grad():
        got = model(torch.zeros(1, 3, 320, 320))
    assert got.shape == (1, 4 + 3, 40 * 40 + 20 * 20 + 10 * 10)


def test_an_ultralytics_classifier_checkpoint_is_refused_in_one_line(tmp_path: Path) -> None:
    from ultralytics.nn.tasks import ClassificationModel

    checkpoint = tmp_path / "cls.pt"
    torch.save({"model": ClassificationModel("yolov8n-cls.yaml", nc=3, verbose=False)}, checkpoint)
    with pytest.raises(UserError, match="an Ultralytics checkpoint but not a detection model"):
        load_model(resolve_source(str(checkpoint)))


@pytest.mark.slow
def test_yolo11n_builds_to_every_cpu_target_with_parity_and_evaluates(tmp_path: Path) -> None:
    out = tmp_path / "artifacts"
    result = optimize("build", "yolo11n", "--random-weights", "--imgsz", "320",
                      "--targets", "torchscript,onnx,openvino",
                      "--precisions", "fp32,int8", "--batch-sizes", "1,2", "--out", out, "--parity-data", VAL_DATA,
                      "--calib-data", CALIB_DATA, "--calib-images", "4", "--gate-images", "8")
    assert result.returncode == 0, brief(result)
    int8 = json.loads((out / "yolo11n-random" / "onnx-int8" / "manifest.json").read_text())
    assert int8["info"]["gate"]["verdict"].startswith("vacuous: the FP32 model scores 0 mAP")
    graph = onnx.load(str(out / "yolo11n-random" / "onnx-fp32" / "yolo11n-random.onnx")).graph
    kept = {node.name: node.op_type for node in graph.node if node.name in int8["info"]["kept_in_float"]}
    assert next(n.name for n in graph.node if "output0" in n.output) in kept, "the decode stays in float"
    assert list(kept.values()).count("Conv") >= 4, "the class convolutions and the DFL convolution stay in float"
    part = json.loads((out / "yolo11n-random" / "onnx-fp32" / "manifest.json").read_text())["info"]["float_part"]
    head_convolutions = [node.name for node in graph.node if node.op_type == "Conv" and node.name in part]
    assert len(head_convolutions) > list(kept.values()).count("Conv"), "Detect's own 3x3 convolutions are int8"
    ov_int8 = json.loads((out / "yolo11n-random" / "openvino-int8" / "manifest.json").read_text())
    fallback = f"{DEFAULT_RANGES_ROUTE} ({OpenVinoInt8.route} could not calibrate: "  # numpy's words follow
    assert ov_int8["info"]["gate"]["route"].startswith(fallback), "random weights' activations have no histogram"
    int8_folder = out / "yolo11n-random" / "onnx-int8"
    with open_runner(int8_folder, Manifest.read(int8_folder)) as runner:
        counted = re.search(r"(\d+) of (\d+) convolutions in int8", runner.executed_precision)
    # 80 of 88 (the rest: the head's float convolutions); before C3k2's Splits and bias-free convolutions were
    # completed for ONNX Runtime's int8 kernels, 2
    assert counted and int(counted[1]) >= 0.85 * int(counted[2]), runner.executed_precision
    shutil.rmtree(out / "yolo11n-random" / "onnx-int8")  # measured elsewhere; keep the evaluation below short
    shutil.rmtree(out / "yolo11n-random" / "openvino-int8")
    assert {statuses(result)[n] for n in ("torchscript-fp32", "onnx-fp32", "openvino-fp32")} == {"built"}
    for node in ("torchscript-fp32", "onnx-fp32", "openvino-fp32"):
        manifest = json.loads((out / "yolo11n-random" / node / "manifest.json").read_text())
        assert manifest["metadata"]["family"] == "ultralytics" and not manifest["metadata"]["pretrained"]
        assert manifest["metadata"]["output"]["shape"] == ["batch", 84, "anchors"]
        assert manifest["parity"]["passed"] and manifest["parity"]["batch_sizes"] == [1, 2]
        assert manifest["parity"]["max_abs_diff_boxes_px"] < 0.05
    report = tmp_path / "report"
    result = optimize("eval", out, "--data", VAL_DATA, "--max-images", "4", "--batch-sizes", "1",
                      "--min-time", "0.1", "--repeats", "1", "--out", report)
    assert result.returncode == 0, brief(result)
    rows = json.loads((report / "results.json").read_text())["rows"]
    assert {r["name"] for r in rows} == {"pytorch-fp32", "torchscript-fp32", "onnx-fp32", "openvino-fp32"}
    assert all(r["accuracy"]["note"] == "n/a (random weights)" for r in rows)


@pytest.mark.slow
def test_the_aoti_export_of_an_ultralytics_head_keeps_the_batch_dynamic() -> None:
    """Its Detect head compares the whole input shape with its anchors' on every call: a warm-up pass before
    torch.export would pin the program's batch to the example's (Family.export_warm_up: no warm-up here)."""
    from yolo_optimize.building.loading import example_input, export_module
    from yolo_optimize.export.aoti import exported

    model = export_module(resolve_source("yolo12n", random_weights=True), "float")
    program = exported(model, example_input("float", 2, 64), warm_up=ULTRALYTICS.export_warm_up).module()
    with torch.no_grad():
        for batch in (1, 3):
            images = torch.rand(batch, 3, 64, 64)
            torch.testing.assert_close(program(images), model(images), rtol=1e-4, atol=1e-3)


def test_every_accepted_name_has_a_config_the_installed_ultralytics_ships() -> None:
    from yolo_optimize.families.ultralytics import CONFIGS, _config

    assert {"yolo12n", "yolov6x", "yolov9e", "yolov3-tiny", "yolo11n", "yolov8x", "yolov5nu"} <= set(
        ULTRALYTICS.model_names())
    assert all(_config(name)[0].is_file() for name in CONFIGS)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["yolo12n", "yolov9t", "yolov3-tiny"])
def test_the_other_anchor_free_generations_build_with_parity_and_decode(name: str, tmp_path: Path) -> None:
    """YOLO12's attention blocks, YOLOv9's GELAN and ADown blocks, YOLOv3-tiny's two-scale head: the same Detect
    head, so the same decode; each exports to ONNX and OpenVINO with parity at batch 1 and 2 at a small size
    (random weights)."""
    import yolo_optimize as yo

    out = tmp_path / "artifacts"
    build = yo.build(name, random_weights=True, imgsz=[160], targets=["onnx", "openvino"], precisions=["fp32"],
                     batch_sizes=[1, 2], parity_data=VAL_DATA, out=out)
    assert {build.statuses()[n] for n in ("onnx-fp32", "openvino-fp32")} == {"built"}
    for node in ("onnx-fp32", "openvino-fp32"):
        manifest = json.loads((out / f"{name}-random" / node / "manifest.json").read_text())
        assert manifest["parity"]["passed"] and manifest["metadata"]["output"]["shape"] == ["batch", 84, "anchors"]
    model = load_model(resolve_source(name, random_weights=True))
    images = np.stack([ULTRALYTICS.preprocess(p, 160).pixels for p in list_images(VAL_DATA)[:2]])
    with torch.inference_mode():
        raw = model(torch.from_numpy(to_input(images))).numpy()
    detections = ULTRALYTICS.decode(scored(raw), 0.25, 0.7, multi_label=False, max_det=300)
    assert len(detections) == 2 and all(d.shape[1] == 6 and len(d) for d in detections)


def end_to_end_checkpoint(folder: Path) -> Path:
    """A YOLO26n trained on three classes, as Ultralytics saves one: seeded random weights drawn to carry the
    image through (Ultralytics' initialization scores every anchor alike, and a top-k of ties may pick any), its
    box distances positive (random ones draw boxes inside out, which no overlap can match)."""
    from ultralytics.nn.tasks import DetectionModel
    from ultralytics.utils.torch_utils import strip_optimizer

    torch.manual_seed(2)
    trained = DetectionModel("yolo26n.yaml", nc=3, verbose=False)
    trained.names = {0: "cat", 1: "dog", 2: "bird"}
    with torch.no_grad():
        for module in trained.modules():
            if isinstance(module, torch.nn.Conv2d):
                torch.nn.init.kaiming_normal_(module.weight)
        for branch in trained.model[-1].one2one_cv3:
            branch[-1].weight.mul_(10)
            branch[-1].bias.copy_(torch.randn(3))
        for branch in trained.model[-1].one2one_cv2:
            branch[-1].weight.mul_(0.001)
            branch[-1].bias.fill_(1.0)
    checkpoint = folder / "pets26.pt"
    torch.save({"model": trained, "ema": None, "train_args": {"imgsz": 640}}, checkpoint)
    strip_optimizer(checkpoint)
    return checkpoint


@pytest.mark.slow
def test_a_yolo26_checkpoint_builds_its_nms_free_head_to_every_cpu_target_with_its_own_classes(tmp_path: Path) -> None:
    """The checkpoint's classes cannot tell YOLO26 from YOLO11: the loaded model does. Its one-to-one head's top-k,
    in the graph, returns the PyTorch model's detections row for row in ONNX, OpenVINO, TorchScript and
    AOTInductor, at batch 1 and 2, and decodes to boxes of its own classes."""
    checkpoint = end_to_end_checkpoint(tmp_path)
    source = resolve_source(str(checkpoint))
    assert (source.family, source.model_id) == ("ultralytics-end2end", "pets26")
    out = tmp_path / "artifacts"
    targets = ["onnx", "openvino", "torchscript", "aoti"]
    yo_build(checkpoint, imgsz=[160], targets=targets, precisions=["fp32"], batch_sizes=[1, 2], out=out)
    family = family_named("ultralytics-end2end")
    images = np.stack([family.preprocess(p, 160).pixels for p in list_images(VAL_DATA)[:2]])
    with torch.inference_mode():
        expected = load_model(source)(torch.from_numpy(to_input(images))).numpy()
    assert expected.shape == (2, 300, 6) and len(np.unique(expected[..., 4])) > 500, "scores without ties"
    for target in targets:
        folder = out / "pets26" / f"{target}-fp32"
        manifest = Manifest.read(folder)
        metadata = manifest.metadata
        assert (metadata["family"], metadata["names"]) == ("ultralytics-end2end", ["cat", "dog", "bird"])
        assert metadata["output"]["shape"] == ["batch", 300, 6] and metadata["output"]["head"].startswith("one-to-one")
        assert manifest.parity["passed"] and "agreement_enforced" not in manifest.parity
        with open_runner(folder, manifest) as runner:
            got = runner.infer(runner.input_of(images))
        np.testing.assert_allclose(got, expected, atol=2e-3, err_msg=target)  # row for row: the same top-k
    detections = family.postprocess(expected)
    assert all(len(d) and set(d[:, 5]) <= {0, 1, 2} for d in detections)


def yo_build(model: str | Path, **options: object) -> None:
    import yolo_optimize as yo

    yo.build(model, parity_data=VAL_DATA, **options)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "family"), [("yolov10n", "ultralytics-end2end"), ("rtdetr-l", "rtdetr")])
def test_yolov10_and_rt_detr_build_to_onnx_and_openvino_matching_pytorch(name: str, family: str,
                                                                         tmp_path: Path) -> None:
    """YOLOv10's one-to-one head and RT-DETR's decoder (grid_sample, query ranking), random weights: parity with
    the PyTorch model at batch 1 and 2, the same [B, 300, 6] layout, RT-DETR's boxes in input pixels."""
    out = tmp_path / "artifacts"
    yo_build(name, random_weights=True, imgsz=[160], targets=["onnx", "openvino"], precisions=["fp32"],
             batch_sizes=[1, 2], out=out)
    for node in ("onnx-fp32", "openvino-fp32"):
        manifest = Manifest.read(out / f"{name}-random" / node)
        assert manifest.metadata["family"] == family and manifest.parity["passed"]
        assert manifest.parity["max_abs_diff_scores"] < 1e-3 and manifest.metadata["output"]["shape"][1:] == [300, 6]
    model = load_model(resolve_source(name, random_weights=True))
    with torch.inference_mode():
        found = model(torch.rand(2, 3, 160, 160)).numpy()
    assert found.shape == (2, 300, 6)
    boxes = found[..., :4]
    assert (boxes[..., 2:] >= boxes[..., :2]).all() and np.abs(boxes).max() > 10, "corner boxes in input pixels"


def test_the_one_to_many_head_of_yolo26_is_the_nms_head_in_its_own_folder() -> None:
    source = resolve_source("yolo26n", random_weights=True, head="one-to-many")
    assert (source.family, source.model_id) == ("ultralytics", "yolo26n-random-one-to-many")
    assert resolve_source("yolo26n", random_weights=True, head="one-to-one") == resolve_source(
        "yolo26n", random_weights=True)
    with torch.inference_mode():
        raw = load_model(source)(torch.zeros(1, 3, 160, 160))
    assert raw.shape == (1, 84, 20 * 20 + 10 * 10 + 5 * 5)
    facts = ULTRALYTICS.embedded_facts(load_model(source))
    assert ULTRALYTICS.output_spec(facts)["head"] == "one-to-many (needs NMS)"
    assert "head" not in ULTRALYTICS.embedded_facts(load_model(resolve_source("yolo11n", random_weights=True)))
    nms = resolve_source("yolo26n", random_weights=True, head="one-to-many", nms=NmsSettings())
    assert (nms.family, nms.model_id) == ("ultralytics+nms", "yolo26n-random-one-to-many-nms")


def test_a_checkpoint_with_classes_the_installed_ultralytics_lacks_is_refused_in_one_line(tmp_path: Path) -> None:
    """A checkpoint of a newer Ultralytics (a head class this version does not have) is refused before unpickling."""
    import zipfile

    checkpoint = tmp_path / "future.pt"
    torch.save({"model": None}, checkpoint)
    with zipfile.ZipFile(checkpoint) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    data = next(name for name in files if name.endswith("data.pkl"))
    files[data] = b"\x80\x02cultralytics.nn.modules.head\nDetect2027\nq\x00."  # the class its pickle imports
    with zipfile.ZipFile(checkpoint, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    with pytest.raises(UserError, match=r"its classes ultralytics.nn.modules.head.Detect2027 are not in the "
                                        r"installed ultralytics 8\.\d+\.\d+ \(made by a newer version"):
        resolve_source(str(checkpoint))


@pytest.mark.parametrize(("config", "family"), [("yolov10n.yaml", "ultralytics-end2end"), ("rtdetr-l.yaml", "rtdetr"),
                                                ("yolo11n.yaml", "ultralytics")])
def test_a_trained_checkpoint_is_decoded_by_the_family_its_head_makes(config: str, family: str,
                                                                       tmp_path: Path) -> None:
    """YOLOv10's, RT-DETR's and YOLO11's checkpoints pickle the same kind of classes: the loaded model names the
    family that decodes its artifacts, with the checkpoint's own classes."""
    from ultralytics.nn.tasks import DetectionModel, RTDETRDetectionModel

    kind = RTDETRDetectionModel if config.startswith("rtdetr") else DetectionModel
    trained = kind(config, nc=2, verbose=False)
    trained.names = {0: "apple", 1: "pear"}
    checkpoint = tmp_path / "fruit.pt"
    torch.save({"model": trained}, checkpoint)
    source = resolve_source(str(checkpoint), verdicts=tmp_path / "verdicts")
    assert (source.family, source.model_id) == (family, "fruit")
    assert family_named(family).embedded_facts(load_model(source))["names"] == ["apple", "pear"]
