"""The INT8 gate's images are never calibration images: half of a labelled --calib-data held out, stratified and
seeded; a --gate-data that shares an image with the calibration set refused in one line."""

from __future__ import annotations

import shutil
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CALIB_DATA, VAL_DATA, brief, build_args, optimize
from yolo_optimize.building.contents import RECORD, Digests
from yolo_optimize.building.held_out import ImageSet, split_held_out, stratum_of
from yolo_optimize.building.int8_split import int8_inputs
from yolo_optimize.building.options import BuildOptions
from yolo_optimize.errors import UserError
from yolo_optimize.families import family_named
from yolo_optimize.runtime.dataset import Dataset, load_dataset

YOLOV5 = family_named("yolov5")
OPTIONS = BuildOptions(model="yolov5n", calib_data=CALIB_DATA)


def int8_of(options: BuildOptions) -> dict[str, Any]:
    """The INT8 inputs a build of ``options`` takes, every image hashed (no record read or written)."""
    return int8_inputs(YOLOV5, options, Digests(options.out / RECORD, full=True))


def test_a_labelled_set_splits_into_disjoint_halves_every_class_in_proportion_the_same_every_time() -> None:
    dataset = load_dataset(CALIB_DATA)
    split = split_held_out(dataset)
    assert len(split.calibration) == len(split.gate) == 64
    assert not set(split.calibration) & set(split.gate) and set(split.calibration) | set(split.gate) == set(
        dataset.images)
    assert split_held_out(dataset) == split, "seeded: the same halves every build, so the cache key holds"
    assert split_held_out(dataset, seed=1).gate != split.gate
    strata = dict(zip(dataset.images, stratum_of(dataset)))
    everywhere, gated = Counter(strata.values()), Counter(strata[image] for image in split.gate)
    assert len(everywhere) > 10, "coco128's images have many most-frequent classes"
    for stratum, count in everywhere.items():
        assert abs(gated[stratum] - count / 2) <= 1, (stratum, gated[stratum], count)
    assert "50% of its 128 images, seed 0, stratified by most frequent labelled class" in split.rule


def test_a_classifier_set_is_stratified_by_its_class_folders() -> None:
    images = [Path(f"/data/{cls}/{i}.jpg") for cls in ("cat", "dog", "fox") for i in range(5)]
    dataset = Dataset(Path("/data"), images, list(range(15)), None, [0, 1, 2], [p.parent.name for p in images])
    split = split_held_out(dataset)
    assert sorted(Counter(p.parent.name for p in split.gate).values()) in ([2, 2, 3], [2, 3, 3])
    assert "stratified by class folder" in split.rule


def test_the_build_gates_on_the_held_out_half_and_tunes_on_the_calibration_half() -> None:
    found = int8_of(replace(OPTIONS, calib_images=16, gate_images=24))
    gate = found["gate"]
    assert len(found["calib_images"]) == 16 and len(gate.images.images) == 24
    assert not set(found["calib_images"]) & set(gate.images.images)
    assert gate.tuning == ImageSet(str(CALIB_DATA.resolve()), found["calib_images"])
    assert gate.images.root == str(CALIB_DATA.resolve()) and gate.held_out.startswith("held out of --calib-data")
    assert int8_of(replace(OPTIONS, gate_data=CALIB_DATA)) == int8_of(OPTIONS), \
        "--gate-data naming the calibration folder itself is the default split"


def test_a_separate_gate_set_is_used_whole_and_one_sharing_an_image_is_refused(tmp_path: Path) -> None:
    separate = int8_of(replace(OPTIONS, gate_data=VAL_DATA))
    assert len(separate["calib_images"]) == 128 and len(separate["gate"].images.images) == 128
    assert separate["gate"].held_out.startswith("given by --gate-data")
    copy = tmp_path / "copy"
    shutil.copytree(VAL_DATA, copy)
    shutil.copy(next((CALIB_DATA / "images").rglob("*.jpg")), next((copy / "images").iterdir()) / "renamed.jpg")
    with pytest.raises(UserError, match=r"--gate-data .*copy shares 1 image\(s\) with the calibration images \(.*"
                                        r"renamed.jpg is a copy of .*coco128.*\): the gate must score images the "
                                        r"quantizer never saw") as refused:
        int8_of(replace(OPTIONS, gate_data=copy))
    assert "\n" not in str(refused.value)


def test_a_set_of_one_image_cannot_be_split(tmp_path: Path) -> None:
    (tmp_path / "images").mkdir()
    (tmp_path / "labels").mkdir()
    shutil.copy(next((CALIB_DATA / "images").rglob("*.jpg")), tmp_path / "images" / "one.jpg")
    (tmp_path / "labels" / "one.txt").write_text("0 0.5 0.5 0.2 0.2\n")
    with pytest.raises(UserError, match="has 1 image: the INT8 gate holds half of it out, so it needs 2 or more"):
        int8_of(replace(OPTIONS, calib_data=tmp_path))


def test_the_cli_refuses_a_gate_set_that_is_the_calibration_set_in_another_folder(tmp_path: Path) -> None:
    copy = tmp_path / "gate"
    shutil.copytree(CALIB_DATA, copy)
    result = optimize(*build_args(tmp_path / "out", "--targets", "onnx", "--precisions", "int8", "--calib-data",
                                  CALIB_DATA, "--gate-data", copy))
    assert result.returncode == 2 and result.stderr.count("\n") == 1, brief(result)
    assert "shares 128 image(s) with the calibration images" in result.stderr and not (tmp_path / "out").exists()


def test_duplicate_images_split_across_a_held_out_gate_blame_calib_data_not_gate_data(tmp_path: Path) -> None:
    """Two copies of one image in --calib-data (no --gate-data given): the split puts one on each side, and the
    build is refused before anything is written, saying --calib-data holds duplicates, naming both, saying what to
    do (not blaming a --gate-data never given)."""
    calib = tmp_path / "calib"
    (calib / "images").mkdir(parents=True)
    (calib / "labels").mkdir()
    image = next((CALIB_DATA / "images").rglob("*.jpg"))
    label = CALIB_DATA / "labels" / image.parent.name / f"{image.stem}.txt"
    for name in ("a", "b"):
        shutil.copy(image, calib / "images" / f"{name}.jpg")
        shutil.copy(label, calib / "labels" / f"{name}.txt")
    result = optimize(*build_args(tmp_path / "out", "--targets", "onnx", "--precisions", "int8", "--calib-data", calib))
    assert result.returncode == 2 and result.stderr.count("\n") == 1, brief(result)
    said = result.stderr.strip()
    assert said.startswith(f"error: --calib-data {calib} holds duplicate images (") and "--gate-data" not in said
    assert {f"{calib}/images/{name}.jpg" for name in "ab"} <= set(said.replace("(", " ").split())
    assert said.endswith("have the same bytes): the INT8 gate is held out of it and must score images the quantizer "
                         "never saw; remove the duplicates from --calib-data")
    assert not (tmp_path / "out").exists()


def unboxed(folder: Path, count: int) -> Path:
    """``count`` coco128 images, each with a label file that holds no box (background images, as COCO has some)."""
    for image in list((CALIB_DATA / "images").rglob("*.jpg"))[:count]:
        (folder / "images").mkdir(parents=True, exist_ok=True)
        (folder / "labels").mkdir(parents=True, exist_ok=True)
        shutil.copy(image, folder / "images" / image.name)
        (folder / "labels" / f"{image.stem}.txt").write_text("")
    return folder


def test_a_gate_set_without_a_single_labelled_box_is_refused_not_passed(tmp_path: Path) -> None:
    """COCOeval scores such a set -1 on both models, so the drop would read 0 and the INT8 file 'clear': no gate is
    passed on no evidence, whether the gate is held out of --calib-data or given by --gate-data."""
    empty = unboxed(tmp_path / "empty", 8)
    with pytest.raises(UserError, match=r"gate's 4 images from .*empty hold not a single labelled box"):
        int8_of(replace(OPTIONS, calib_data=empty))
    with pytest.raises(UserError, match=r"gate's 8 images from .*empty hold not a single labelled box"):
        int8_of(replace(OPTIONS, gate_data=empty))
