"""Model files this tool did not build, measured beside its artifacts: a yolov5n ONNX written by yolov5's own export.py
and a YOLO11n OpenVINO IR written by Ultralytics' exporter, in one matrix with ours."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import VAL_DATA, WEIGHTS, brief, optimize, written_matrix
from tests.runtime.runners.handmade import CHANNELS, ncnn_model
from yolo_optimize.errors import UserError
from yolo_optimize.evaluation.measuring.external import external_artifacts, file_labels, inspect_entries
from yolo_optimize.runtime.runners import open_runner

EXPORTS = """
import os, sys
os.chdir(sys.argv[1])
os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"  # yolov5 7.0.14's loader predates torch's weights_only default
from yolo_optimize.host.environment import configure
configure()
from yolov5 import export
# an absolute path: yolov5's loader asks the Hugging Face hub first for a bare name like 'yolov5n.pt'
export.run(weights=os.path.abspath("yolov5n.pt"), include=("onnx",), imgsz=(640, 640), opset=17)
from ultralytics import YOLO
YOLO("yolo11n.yaml").export(format="openvino", imgsz=640)
"""


@pytest.fixture(scope="module")
def foreign(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("foreign")
    shutil.copy(WEIGHTS, folder / "yolov5n.pt")
    result = subprocess.run([sys.executable, "-c", EXPORTS, str(folder)], capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    return {"onnx": folder / "yolov5n.onnx", "openvino": folder / "yolo11n_openvino_model"}


@pytest.mark.slow
def test_foreign_exports_join_the_matrix_measured_like_ours(small_artifacts: Path, foreign: dict[str, Path],
                                                            tmp_path: Path) -> None:
    """The yolov5 ONNX joins our yolov5n group (our baseline, our ONNX file, images and rounds): measured, its mAP
    what ours gives, its predictions agreeing with PyTorch's, labelled external with its sha256; the Ultralytics IR
    (another family, named on its --add) gets a group of its own."""
    out = tmp_path / "report"
    ours = shutil.copytree(small_artifacts, tmp_path / "artifacts", ignore=shutil.ignore_patterns("openvino-*"))
    result = optimize("eval", ours, "--data", VAL_DATA, "--max-images", "16", "--min-time", "0",
                      "--repeats", "1", "--batch-sizes", "1", "--no-end-to-end", "--out", out,
                      "--add", foreign["onnx"], "--family", "yolov5", "--add", f"ultralytics={foreign['openvino']}")
    assert result.returncode == 0, brief(result)
    results = json.loads((out / "results.json").read_text())
    rows = {row["name"]: row for row in results["rows"]}
    lines = {(line.model, line.artifact): line for line in written_matrix(out)}
    ours, theirs = lines[("yolov5n", "onnx-fp32")], lines[("yolov5n", "onnx-fp32-external-yolov5n")]
    assert theirs.status == "ok" and theirs.at(1).speedup > 0.5 and theirs.executed_precision == "fp32"
    assert abs(theirs.map50_95 - ours.map50_95) < 0.01, (theirs.map50_95, ours.map50_95)
    external = rows["onnx-fp32-external-yolov5n"]["external"]
    assert external["sha256"] == hashlib.sha256(foreign["onnx"].read_bytes()).hexdigest()
    assert external["parity"]["agreement"] > 0.9 and external["imgsz"] == 640
    assert theirs.note.startswith("external: ")
    ir = lines[("yolo11n-external", "openvino-fp32-external-yolo11n")]
    assert ir.status == "ok" and ir.at(1).throughput_ips > 0 and ir.at(1).speedup is None  # no baseline given
    assert "yolo11n-external" in (out / "matrix.md").read_text()


def identity_onnx(path: Path) -> Path:
    """A valid ONNX file taking a [1, 3, 64, 64] image (its content never matters where it is used)."""
    import onnx
    from onnx import TensorProto, helper

    image = helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 64, 64])
    output = helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, 64, 64])
    onnx.save(helper.make_model(helper.make_graph([helper.make_node("Identity", ["images"], ["output"])], "g",
                                                  [image], [output])), path)
    return path


def test_a_file_of_no_known_family_or_format_is_refused_in_one_line(tmp_path: Path) -> None:
    model = tmp_path / "model.tflite"
    model.write_bytes(b"tflite")
    text = tmp_path / "text.onnx"
    text.write_text("a text file named .onnx")
    unnamed = identity_onnx(tmp_path / "unnamed.onnx")
    for args, message in (((model, "--family", "yolov5"), "not a model file this tool runs"),
                          ((tmp_path / "m.onnx", "--family", "yolov5"), "no such file"),
                          ((tmp_path / "m.onnx",), "no such file"),  # missing: said first, whatever else is wrong
                          ((text,), "not a readable ONNX model"),  # not ONNX: said before the family is asked for
                          ((unnamed,), "which model family? pass --family"),
                          ((tmp_path, "--add", f"yolo9={unnamed}"), "unknown model family 'yolo9'")):
        result = optimize("eval", *args, "--out", tmp_path / "report")
        assert result.returncode == 2 and message in result.stderr, result.stderr


def test_a_whole_ncnn_folder_passes_the_check_and_runs_in_ncnn(tmp_path: Path) -> None:
    """The hand-written graph the broken ones below are made from is one NCNN loads and runs."""
    param = ncnn_model(tmp_path / "model")
    [candidate] = external_artifacts(inspect_entries((str(param.parent),), "yolov5", 32), {})
    assert candidate.manifest is not None
    with open_runner(candidate.folder, candidate.manifest) as runner:
        outputs = runner.infer(np.full((1, 3, 32, 32), 0.5, np.float32))
    assert outputs.shape == (1, CHANNELS, 32, 32) and np.allclose(outputs, 1.5)  # 3 channels x weight 1 x 0.5


def layer_lines(param: Path, count: int) -> None:
    param.write_text("\n".join(param.read_text().splitlines()[:2 + count]) + "\n")


NCNN_DAMAGE = {
    "no .bin": (lambda param: param.with_suffix(".bin").unlink(), "its weights model.ncnn.bin are missing beside it"),
    "empty .bin": (lambda param: param.with_suffix(".bin").write_bytes(b""),
                   "its weights model.ncnn.bin are empty, and its layers have weights"),
    "nonsense .param": (lambda param: param.write_text("layers: [conv]\n"),
                        "its first line is not NCNN's magic number 7767517: not an NCNN .param"),
    "no counts": (lambda param: param.write_text(param.read_text().replace("\n2 2\n", "\ntwo layers\n")),
                  "its second line is not '<layer count> <blob count>'"),
    "a layer short": (lambda param: layer_lines(param, 1), "it counts 2 layers but has 1 layer lines (cut short?)"),
    "a short layer line": (lambda param: param.write_text(param.read_text().replace("in0 out0", "in0")),
                           "line 4 is not '<type> <name> <inputs> <outputs> <input names> <output names>"),
}


@pytest.mark.parametrize(("damage", "message"), NCNN_DAMAGE.values(), ids=NCNN_DAMAGE.keys())
def test_a_broken_ncnn_folder_is_refused_in_one_line_before_ncnn_loads_it(
        tmp_path: Path, damage: Callable[[Path], Any], message: str) -> None:
    """Without its .bin NCNN crashed the row (SIGSEGV); with a nonsense .param the row failed with an IndexError."""
    param = ncnn_model(tmp_path / "model")
    damage(param)
    with pytest.raises(UserError) as refused:
        inspect_entries((str(param.parent),), "yolov5", 32)
    assert str(refused.value).startswith(f"--add {param}: {message}") and "\n" not in str(refused.value)


def test_eval_refuses_an_ncnn_folder_without_its_weights_in_one_line(tmp_path: Path) -> None:
    param = ncnn_model(tmp_path / "model")
    param.with_suffix(".bin").unlink()
    result = optimize("eval", param.parent, "--family", "yolov5", "--imgsz", "32", "--out", tmp_path / "report")
    assert result.returncode == 2, brief(result)
    assert result.stderr.strip().splitlines() == [f"error: --add {param}: its weights model.ncnn.bin are missing "
                                                  f"beside it"], result.stderr
    assert not (tmp_path / "report").exists()


def test_files_of_one_name_are_told_apart_by_their_folders() -> None:
    """Training runs all export best.onnx: each row is named after as many folders as tell the files apart."""
    paths = [Path("/runs/exp1/weights/best.onnx"), Path("/runs/exp2/weights/best.onnx"), Path("/models/yolov5n.onnx")]
    assert file_labels(paths) == ["exp1-weights-best", "exp2-weights-best", "yolov5n"]
    collide = [Path("/p/b-c.onnx"), Path("/q/b/c.onnx"), Path("/r/x/c.onnx")]  # b-c, b + c: joined, one text
    assert file_labels(collide) == ["b-c-1", "c-2", "c-3"]
    assert file_labels([]) == []


def test_a_file_added_twice_is_refused_in_one_line(tmp_path: Path) -> None:
    model = identity_onnx(tmp_path / "best.onnx")
    result = optimize("eval", model, "--add", tmp_path / "." / "best.onnx", "--family", "yolov5",
                      "--out", tmp_path / "report")
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        f"error: --add {tmp_path}/best.onnx: {tmp_path}/best.onnx is already added (each file is measured once)"], \
        result.stderr
    assert not (tmp_path / "report").exists()


def ultralytics_layout(source: Path, folder: Path, files: dict[str, str], imgsz: int) -> Path:
    """``source``'s files copied under the names Ultralytics' exporter gives them, with its metadata.yaml."""
    import yaml

    folder.mkdir()
    for theirs, ours in files.items():
        shutil.copy(source / ours, folder / theirs)
    names = {i: name for i, name in enumerate(json.loads((source / "manifest.json").read_text())["metadata"]["names"])}
    (folder / "metadata.yaml").write_text(yaml.safe_dump({"task": "detect", "batch": 1, "imgsz": [imgsz, imgsz],
                                                          "half": False, "names": names}))
    return folder


@pytest.mark.slow
def test_ncnn_and_executorch_folders_made_elsewhere_join_the_matrix_measured_like_ours(
        built_edge: Path, tmp_path: Path) -> None:
    """An NCNN folder and an ExecuTorch folder as Ultralytics' exporter lays them out (model.ncnn.param/.bin,
    model.pte, metadata.yaml with its names and imgsz), holding our yolov5n files: each joins our yolov5n group,
    its size and names read from the metadata beside it, and scores what our own file scores."""
    from tests.conftest import EDGE_SIZE

    graph = {f"model.ncnn.{suffix}": f"yolov5n_ncnn_model/model.ncnn.{suffix}" for suffix in ("param", "bin")}
    ncnn = ultralytics_layout(built_edge / "ncnn-fp32", tmp_path / "yolov5n_ncnn_model", graph, EDGE_SIZE)
    pte = ultralytics_layout(built_edge / "executorch-fp32", tmp_path / "yolov5n_executorch_model",
                             {"model.pte": "yolov5n.pte"}, EDGE_SIZE)
    ours = shutil.copytree(built_edge, tmp_path / "artifacts" / "yolov5n",
                           ignore=shutil.ignore_patterns("*-fp16", ".store"))
    out = tmp_path / "report"
    result = optimize("eval", ours.parent, "--data", VAL_DATA, "--max-images", "16", "--min-time", "0", "--repeats",
                      "1", "--batch-sizes", "1", "--no-end-to-end", "--out", out, "--add", ncnn, "--add", pte,
                      "--family", "yolov5")
    assert result.returncode == 0, brief(result)
    lines = {(line.model, line.artifact): line for line in written_matrix(out)}
    for target in ("ncnn", "executorch"):
        mine = lines[("yolov5n", f"{target}-fp32")]
        found = [line for (_, name), line in lines.items() if name.startswith(f"{target}-fp32-external-")]
        assert len(found) == 1 and found[0].model == "yolov5n", lines.keys()
        theirs = found[0]
        assert theirs.status == "ok" and theirs.at(1).speedup > 0.5 and theirs.map50_95 == mine.map50_95, target
