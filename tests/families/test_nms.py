"""NMS inside the artifact (``optimize build --nms``): every image of a batch gets what the host-side NMS gives it, in
every format; the same mAP as the host path; options it cannot take refused in one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import yolo_optimize as yo
from tests.conftest import VAL_DATA, WEIGHTS, brief, optimize
from yolo_optimize.artifact import Manifest
from yolo_optimize.checkpoint import load_model, resolve_source
from yolo_optimize.errors import UserError
from yolo_optimize.families import family_named
from yolo_optimize.families.host_nms import HostNms
from yolo_optimize.families.suppression import NmsSettings
from yolo_optimize.formats import nms_targets
from yolo_optimize.images import list_images, to_input
from yolo_optimize.runtime.runners import open_runner

YOLOV5 = family_named("yolov5")
SIZE = 320
IMAGES = 64  # scored by the evaluator and by host NMS (the evaluator takes the first N images, as ImageSet.of does)

@pytest.mark.parametrize(("model", "options", "said"), [
    ("yolo26n", {"nms": True}, "yolo26n has no NMS to put inside the artifact: its head returns final detections "
                               r"\(one-to-one .*; build it with --head one-to-many to have one"),
    ("rtdetr-l", {"nms": True}, "rtdetr-l has no NMS to put inside the artifact: its head returns final detections "
                                r"\(DETR decoder"),
    ("resnet18", {"nms": True}, "resnet18 has no NMS to put inside the artifact: it is a classifier"),
    ("yolo11n", {"head": "one-to-many"}, r"--head one-to-many: yolo11n has no such head \(it has one head\)"),
    ("yolov5n", {"nms_conf": 0.1, "max_det": 10}, "--nms-conf, --max-det set without --nms"),
    ("yolov5n", {"nms": True, "targets": ["onnx", "trt"]}, "--nms is built for torchscript, aoti, onnx, openvino, "
                                                          "not tensorrt"),
    ("yolo27n", {}, "unknown model 'yolo27n': use .*yolo26n-yolo26x, yolov10n/s/m/b/l/x; rtdetr-l"),
])
def test_what_a_model_cannot_have_is_refused_in_one_line_before_any_work(model: str, options: dict[str, object],
                                                                         said: str, tmp_path: Path) -> None:
    with pytest.raises(UserError, match=said) as refused:
        yo.build(model, random_weights=True, out=tmp_path / "out", **options)
    assert "\n" not in str(refused.value) and not (tmp_path / "out").exists()


def test_the_cli_refuses_nms_on_an_nms_free_head_with_one_line_and_exit_2(tmp_path: Path) -> None:
    result = optimize("build", "yolo26n", "--random-weights", "--nms", "--out", tmp_path / "out")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, brief(result)
    assert "needs no NMS" in result.stderr or "no NMS to put inside" in result.stderr


def test_the_settings_are_recorded_in_the_source_the_key_and_the_folder() -> None:
    plain = resolve_source("yolov5n", random_weights=True)
    inside = resolve_source("yolov5n", random_weights=True, nms=NmsSettings(conf=0.3))
    assert (inside.family, inside.model_id, inside.identity) == ("yolov5+nms", "yolov5n-random-nms", plain.identity)
    assert inside.nms == NmsSettings(conf=0.3, iou=YOLOV5.map_iou, max_det=300, multi_label=False)
    assert nms_targets() == ("torchscript", "aoti", "onnx", "openvino")


def host_detections(images: np.ndarray) -> list[np.ndarray]:
    """What the host-side decode keeps of the plain model's output: YOLOv5's NMS at the deployment settings."""
    model = load_model(resolve_source(str(WEIGHTS)))
    with torch.inference_mode():
        return YOLOV5.postprocess(model(torch.from_numpy(to_input(images))).numpy())


@pytest.mark.slow
def test_an_ultralytics_model_builds_with_nms_inside_to_onnx_and_openvino(tmp_path: Path) -> None:
    """Ultralytics imports torchvision only when it runs its own NMS: the ONNX exporter built its table of operators
    without torchvision::nms and failed ('No ONNX function found'). Random weights, 320, batches 1 and 2."""
    out = tmp_path / "artifacts"
    yo.build("yolo11n", random_weights=True, nms=True, imgsz=[SIZE], targets=["onnx", "openvino"],
             precisions=["fp32"], batch_sizes=[1, 2], parity_data=VAL_DATA, out=out)
    for node in ("onnx-fp32", "openvino-fp32"):
        manifest = Manifest.read(out / "yolo11n-random-nms" / node)
        assert manifest.metadata["output"]["shape"] == ["batch", 300, 6] and manifest.parity["passed"], node


@pytest.mark.slow
def test_every_image_of_a_batch_of_8_gets_what_host_nms_gives_it_in_every_format(tmp_path: Path) -> None:
    """The Ultralytics nms=True exports answered for the first image of a batch only (ultralytics#21188): here a batch
    of 8 different images, each compared with the host-side NMS of the same model on the same image."""
    out = tmp_path / "artifacts"
    common = {"imgsz": [SIZE], "precisions": ["fp32"], "batch_sizes": [1, 8], "parity_data": VAL_DATA, "out": out}
    yo.build(WEIGHTS, nms=True, targets=list(nms_targets()), **common)
    images = np.stack([YOLOV5.preprocess(p, SIZE).pixels for p in list_images(VAL_DATA)[:8]])
    expected = host_detections(images)
    assert len({len(d) for d in expected}) > 1 and all(len(d) for d in expected), "8 different images, each found"
    family = family_named("yolov5+nms")
    for node in nms_targets():
        folder = out / "yolov5n-nms" / f"{node}-fp32"
        manifest = Manifest.read(folder)
        assert manifest.metadata["output"]["shape"] == ["batch", 300, 6] and manifest.parity["passed"]
        assert manifest.metadata["nms"] == {"conf": 0.25, "iou": 0.6, "max_det": 300, "multi_label": False}
        with open_runner(folder, manifest) as runner:
            got = family.postprocess(runner.infer(runner.input_of(images)))
            blank = runner.infer(runner.input_of(np.full((2, SIZE, SIZE, 3), 114, np.uint8)))
        for image, (mine, theirs) in enumerate(zip(got, expected)):
            assert mine.shape == theirs.shape, f"{node}: image {image} of the batch"
            np.testing.assert_allclose(mine, theirs, atol=0.05, err_msg=f"{node}: image {image} of the batch")
        assert blank.shape == (2, 300, 6) and not blank.any(), f"{node}: nothing found is all zero rows"


@pytest.mark.slow
def test_the_evaluator_scores_an_nms_inside_artifact_as_host_nms_scores_the_plain_model_and_runs_no_host_nms(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Built at validation's settings (conf 0.001, every class), the artifact's mAP50-95 as ``optimize eval`` reports
    it is what the plain model with host NMS scores on the same 64 images, within 0.005; the evaluator's scoring
    of it (``predict_all`` and the COCO metric, here in this process) calls no host NMS: the families' is made to raise.
    Evaluated beside the model without NMS inside, the recommendation compares the two paths end to end."""
    from yolo_optimize.building.gate import Gate
    from yolo_optimize.building.held_out import ImageSet

    out = tmp_path / "artifacts"
    common = {"imgsz": [SIZE], "targets": ["onnx"], "precisions": ["fp32"], "batch_sizes": [1, 8],
              "parity_data": VAL_DATA, "out": out}
    yo.build(WEIGHTS, nms=True, nms_conf=0.001, nms_multi_label=True, **common)
    yo.build(WEIGHTS, **common)
    report = yo.evaluate(out, data=VAL_DATA, batch_sizes=[8], max_images=IMAGES, min_time=0, repeats=1)
    assert {(row.model, row.name) for row in report.rows if row.measurements and not row.error} == {
        ("yolov5n", "pytorch-fp32"), ("yolov5n", "onnx-fp32"), ("yolov5n-nms", "pytorch-fp32"),
        ("yolov5n-nms", "onnx-fp32")}
    compared = yo.recommend(report, batch_size=8, model="yolov5n-nms").recommendation.against_host_nms
    assert compared.startswith("end to end at b8, NMS inside the graph vs host NMS: onnx-fp32 ")
    assert yo.recommend(report, batch_size=8, model="yolov5n").recommendation.against_host_nms == ""
    row = next(r for r in report.rows if (r.model, r.name) == ("yolov5n-nms", "onnx-fp32"))
    assert row.accuracy is not None and row.accuracy.images == IMAGES
    every_image = ImageSet.of(VAL_DATA, IMAGES)
    host_gate, inside_gate = Gate(every_image, YOLOV5, SIZE, 2), Gate(every_image, family_named("yolov5+nms"), SIZE, 2)
    try:
        model = load_model(resolve_source(str(WEIGHTS)))
        with torch.inference_mode():
            host = host_gate.score_raw([model(torch.from_numpy(x)).numpy() for x in host_gate.inputs()]).value

        def no_host_nms(*args: object, **kwargs: object) -> None:
            raise AssertionError("host NMS ran for an artifact with NMS inside")

        monkeypatch.setattr(HostNms, "__call__", no_host_nms)
        folder = out / "yolov5n-nms" / "onnx-fp32"
        in_process = inside_gate.score(folder, Manifest.read(folder)).value
    finally:
        host_gate.close()
        inside_gate.close()
    assert host > 0.2 and abs(row.accuracy.map50_95 - host) <= 0.005, (row.accuracy.map50_95, host)
    assert abs(in_process - row.accuracy.map50_95) <= 1e-4
