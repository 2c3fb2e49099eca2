"""A COCO instances file is checked entry by entry as it is read: coco128's own file passes, and one corrupted entry
(a NaN or negative box size, a category or image it does not list, a missing or mistyped field, a repeated id) is
refused in one line naming the file and the entry, before anything is measured."""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CALIB_DATA, brief, optimize
from tests.runtime.runners.handmade import ncnn_model
from yolo_optimize.errors import UserError
from yolo_optimize.runtime.dataset import load_dataset

ANNOTATIONS = CALIB_DATA / "annotations" / "instances_train2017.json"
IMAGES = 4  # of coco128 copied beside the file: the loader reads the listed images it finds


def coco_file(root: Path, corrupt: Callable[[dict[str, Any]], Any] = lambda truth: None) -> Path:
    """coco128's annotations, ``corrupt`` applied, written to ``root/annotations/instances_train2017.json`` with a few
    of its images in ``root/images/train2017``, where the loader finds them."""
    truth = json.loads(ANNOTATIONS.read_text())
    corrupt(truth)
    images = root / "images" / "train2017"
    images.mkdir(parents=True)
    for entry in sorted(truth["images"], key=lambda e: str(e.get("file_name")))[:IMAGES] \
            if isinstance(truth["images"], list) else []:
        shutil.copy(CALIB_DATA / "images" / "train2017" / entry["file_name"], images)
    path = root / "annotations" / "instances_train2017.json"
    path.parent.mkdir()
    path.write_text(json.dumps(truth))  # NaN written as the literal NaN, as json writes it by default
    return path


def annotation(index: int, **changes: Any) -> Callable[[dict[str, Any]], Any]:
    return lambda truth: truth["annotations"][index].update(changes)


def box(index: int, position: int, value: Any) -> Callable[[dict[str, Any]], Any]:
    return lambda truth: truth["annotations"][index]["bbox"].__setitem__(position, value)


def image(index: int, **changes: Any) -> Callable[[dict[str, Any]], Any]:
    return lambda truth: truth["images"][index].update(changes)


def dropped(section: str, index: int, key: str) -> Callable[[dict[str, Any]], Any]:
    return lambda truth: truth[section][index].pop(key)


def repeated_id(section: str, index: int) -> Callable[[dict[str, Any]], Any]:
    return lambda truth: truth[section][index].update(id=truth[section][index - 1]["id"])


def test_coco128s_own_file_passes_and_loads() -> None:
    dataset = load_dataset(ANNOTATIONS)
    assert len(dataset.images) == 128 and dataset.ground_truth and len(dataset.ground_truth["annotations"]) == 939


def test_a_box_of_zero_width_or_height_is_accepted(tmp_path: Path) -> None:
    """COCO's evaluation keeps a zero-size ground truth (a missed object): refusing it would refuse files it scores."""
    path = coco_file(tmp_path, lambda truth: (box(17, 2, 0)(truth), box(18, 3, 0.0)(truth)))
    assert len(load_dataset(path).images) == IMAGES


ID_17 = 'annotations\\[17\\] \\(id \\d+\\)'
BAD = {
    "NaN width": (box(17, 2, math.nan), rf"{ID_17}: bbox \[[\d.]+, [\d.]+, NaN, [\d.]+\] has a negative or "
                                        r"non-finite width/height"),
    "negative height": (box(17, 3, -4.5), rf"{ID_17}: bbox .*-4.5\] has a negative or non-finite width/height"),
    "infinite x": (box(17, 0, math.inf), rf"{ID_17}: bbox \[Infinity, .*\] has a non-finite x/y"),
    "3 numbers": (lambda truth: truth["annotations"][17]["bbox"].pop(), rf"{ID_17}: bbox \[.*\] is not 4 numbers"),
    "strings": (annotation(17, bbox=["1", "2", "3", "4"]), rf"{ID_17}: bbox \[\"1\", .*\] is not 4 numbers"),
    "no bbox": (dropped("annotations", 17, "bbox"), rf"{ID_17}: has no bbox$"),
    "unknown category": (annotation(17, category_id=91), rf"{ID_17}: category_id 91 is not the id of a listed "
                                                         r"category"),
    "unknown image": (annotation(17, image_id=-1), rf"{ID_17}: image_id -1 is not the id of a listed image"),
    "NaN area": (annotation(17, area=math.nan), rf"{ID_17}: area NaN is not a finite number >= 0"),
    "iscrowd 2": (annotation(17, iscrowd=2), rf"{ID_17}: iscrowd 2 is not 0 or 1"),
    "string id": (annotation(17, id="a17"), r"annotations\[17\]: id \"a17\" is not an integer"),
    "repeated annotation id": (repeated_id("annotations", 17), rf"{ID_17}: id \d+ is listed twice \(also "
                                                               r"annotations\[16\]\)"),
    "not an object": (lambda truth: truth["annotations"].__setitem__(17, 5), r"annotations\[17\] is a number, "
                                                                            r"not an object"),
    "no file_name": (dropped("images", 3, "file_name"), r"images\[3\] \(id \d+\): has no file_name"),
    "string width": (image(3, width="640"), r"images\[3\] \(id \d+\): width \"640\" is not a positive number"),
    "NaN height": (image(3, height=math.nan), r"images\[3\] \(id \d+\): height NaN is not a positive number"),
    "repeated image id": (repeated_id("images", 3), r"images\[3\] \(id \d+\): id \d+ is listed twice"),
    "images an object": (lambda truth: truth.update(images={"0": truth["images"][0]}),
                         r"instances_train2017.json: images is an object, not a list"),
    "repeated category id": (repeated_id("categories", 5), r"categories\[5\] \(id 5\): id 5 is listed twice"),
}


@pytest.mark.parametrize(("corrupt", "message"), BAD.values(), ids=BAD.keys())
def test_a_bad_entry_is_refused_in_one_line_naming_the_file_and_the_entry(
        tmp_path: Path, corrupt: Callable[[dict[str, Any]], Any], message: str) -> None:
    path = coco_file(tmp_path, corrupt)
    with pytest.raises(UserError, match=message) as refused:
        load_dataset(path)
    said = str(refused.value)
    assert said.startswith(str(path)) and "\n" not in said, said


def test_eval_refuses_bad_annotations_in_one_line_before_measuring(tmp_path: Path) -> None:
    """``optimize eval MODEL --data bad.json``: exit 2 and one line, before the host is even watched (the cheapest
    real model to get there: a hand-written NCNN graph)."""
    data = coco_file(tmp_path / "coco", box(17, 2, math.nan))
    model = ncnn_model(tmp_path / "model").parent
    result = optimize("eval", model, "--family", "yolov5", "--imgsz", "32", "--data", data, "--out", tmp_path / "out")
    assert result.returncode == 2, brief(result)
    assert result.stderr.strip().splitlines() == [result.stderr.strip()] and "annotations[17] (id " in result.stderr
    assert "has a negative or non-finite width/height" in result.stderr
    assert "watching the host" not in result.stdout + result.stderr and not (tmp_path / "out").exists()
