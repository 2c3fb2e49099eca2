"""Data inputs by content: a calibration image, a gate image, a gate label or a parity image edited in place changes
the keys of exactly the nodes that read it; an unchanged input is trusted by its stamp, and ``--verify`` hashes it
again."""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from tests.building.test_dag import REQUEST, keys
from tests.conftest import CALIB_DATA, VAL_DATA, WEIGHTS
from yolo_optimize.building.build_requests import request_contents
from yolo_optimize.building.contents import RECORD, Digests
from yolo_optimize.building.int8_split import int8_inputs
from yolo_optimize.building.options import BuildOptions
from yolo_optimize.building.request import BuildRequest
from yolo_optimize.families import family_named
from yolo_optimize.images import list_images
from yolo_optimize.runtime.dataset import label_path

INT8 = {"onnx-int8", "openvino-int8"}


@pytest.fixture
def data(tmp_path: Path) -> tuple[Path, Path]:
    """Twelve labelled coco128 images (calibration, half held out for the gate) and four coco_val128 images for
    parity, copied so that a test may edit them."""
    calib, parity = tmp_path / "calib", tmp_path / "parity"
    for source, folder, count in ((CALIB_DATA, calib, 12), (VAL_DATA, parity, 4)):
        for image in [p for p in list_images(source) if label_path(p).is_file()][:count]:
            for path in (image, label_path(image)):
                target = folder / path.relative_to(source)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
    return calib, parity


def planned(calib: Path, parity: Path, *, verify: bool = False) -> BuildRequest:
    """yolov5n's INT8 request for these folders, its contents read as a build reads them (``requests_for``)."""
    options = BuildOptions(model=str(WEIGHTS), targets=("onnx", "openvino"), precisions=("fp32", "int8"),
                           calib_data=calib, out=calib.parent / "out", verify=verify)
    digests = Digests(options.out / RECORD, full=verify)
    int8 = int8_inputs(family_named("yolov5"), options, digests)
    images = [str(p.resolve()) for p in list_images(parity)]
    contents = request_contents(images, int8, digests)
    digests.save()
    return replace(REQUEST, targets=options.targets, precisions=options.precisions, parity_images=tuple(images),
                   contents=contents, **int8)


def rewritten(path: Path, data: bytes) -> None:
    """``path`` given other bytes in place, as an editor or a copy over it does (another modification time)."""
    stamp = path.stat().st_mtime_ns
    path.write_bytes(data)
    os.utime(path, ns=(stamp + 1_000_000_000, stamp + 1_000_000_000))


def test_an_input_edited_in_place_changes_the_keys_of_the_nodes_that_read_it_and_no_other(
        data: tuple[Path, Path]) -> None:
    calib, parity = data
    request = planned(calib, parity)
    before = keys(request)
    assert keys(planned(calib, parity)) == before, "unchanged inputs keep every key"
    gate, calibration = Path(request.int8_gate.images.images[0]), Path(request.calib_images[0])
    other = Path(request.calib_images[1]).read_bytes()

    rewritten(calibration, other)
    after = keys(planned(calib, parity))
    assert {name for name in before if before[name] != after[name]} == INT8, "a calibration image"
    rewritten(label_path(gate), label_path(gate).read_bytes() + b"0 0.5 0.5 0.1 0.1\n")
    edited = keys(planned(calib, parity))
    assert {name for name in after if after[name] != edited[name]} == INT8, "a gate image's labels"
    rewritten(gate, other)
    again = keys(planned(calib, parity))
    assert {name for name in edited if edited[name] != again[name]} == INT8, "a gate image"
    parity_image = list_images(parity)[0]
    rewritten(parity_image, list_images(parity)[1].read_bytes())
    last = keys(planned(calib, parity))
    assert {name for name in again if again[name] != last[name]} == set(last) - {"load", "onnx-export"}, "parity"


def test_an_unchanged_stamp_is_trusted_and_verify_hashes_every_input_again(data: tuple[Path, Path]) -> None:
    """An edit that keeps the size and the modification time (restored by hand) is seen by --verify only; a build
    without it reads the record (a cached build stays fast), and --verify's key is the true one from then on."""
    calib, parity = data
    request = planned(calib, parity)
    before = keys(request)
    record = calib.parent / "out" / RECORD
    assert str(Path(request.calib_images[0])) in record.read_text()
    calibration = Path(request.calib_images[0])
    facts, content = calibration.stat(), bytearray(calibration.read_bytes())
    content[15] ^= 1  # the JFIF header's horizontal density: another file, the same size, the same pixels
    calibration.write_bytes(content)
    os.utime(calibration, ns=(facts.st_atime_ns, facts.st_mtime_ns))
    assert keys(planned(calib, parity)) == before, "trusted by its stamp"
    verified = keys(planned(calib, parity, verify=True))
    assert {name for name in before if before[name] != verified[name]} == INT8
