"""NCNN files: loadable by plain ncnn (no torch, no model code) with the metadata beside them, as close to PyTorch
as their precision allows, FP16 weights in half the bytes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from yolo_optimize.artifact import Manifest
from yolo_optimize.building.parity import REFERENCE_FILE, TOLERANCES
from yolo_optimize.export.ncnn import refuse_unconverted, scratch_paths
from yolo_optimize.families import family_named

# A fresh interpreter where torch, the model code and this package cannot be imported: ncnn and numpy only.
LOAD_WITH_NCNN_ALONE = """
import json, sys
for name in ("torch", "yolov5", "models", "utils", "yolo_optimize", "ultralytics"):
    sys.modules[name] = None
import ncnn, numpy as np
param, reference, out = sys.argv[1:4]
net = ncnn.Net()
for option in ("use_fp16_storage", "use_fp16_packed", "use_fp16_arithmetic"):
    setattr(net.opt, option, False)
net.load_param(param); net.load_model(param.replace(".param", ".bin"))
images = np.load(reference)["images"][:2]
outputs = []
for image in images:
    extractor = net.create_extractor()
    pixels = np.ascontiguousarray(image.transpose(2, 0, 1), dtype=np.float32) / 255.0  # ncnn.Mat shares its memory
    extractor.input("in0", ncnn.Mat(pixels))
    outputs.append(np.array(extractor.extract("out0")[1]))
np.save(out, np.stack(outputs))
"""


def test_an_ncnn_file_runs_in_plain_ncnn_without_torch_and_matches_pytorch(built_edge: Path, tmp_path: Path) -> None:
    folder = built_edge / "ncnn-fp32"
    manifest = Manifest.read(folder)
    reference = built_edge / ".cache" / "reference" / REFERENCE_FILE
    result = subprocess.run([sys.executable, "-c", LOAD_WITH_NCNN_ALONE, str(folder / str(manifest.entry)),
                             str(reference), str(tmp_path / "out.npy")], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    got, want = np.load(tmp_path / "out.npy"), np.load(reference)["outputs"][:2]
    assert got.shape == want.shape == (2, 6300, 85)
    assert np.abs(got[..., 4:] - want[..., 4:]).max() <= TOLERANCES["fp32"].max_score_diff
    beside = json.loads((folder / str(manifest.entry)).with_name("metadata.json").read_text())
    assert beside == manifest.metadata and beside["names"][0] == "person" and beside["imgsz"] == [320, 320]


def test_fp32_and_fp16_pass_parity_at_their_precisions_tolerance_and_fp16_stores_half_the_bytes(
        built_edge: Path) -> None:
    """ncnn-fp16 is held to the FP16 tolerance; on a CPU without FP16 arithmetic (x86) it says NCNN computed in
    FP32 from FP16 weights."""
    import ncnn

    fp32, fp16 = (Manifest.read(built_edge / f"ncnn-{precision}") for precision in ("fp32", "fp16"))
    assert fp32.parity and fp32.parity["passed"] and fp32.parity["tolerance"]["precision"] == "fp32"
    assert fp32.parity["executed_precision"] == "fp32"
    assert fp16.parity and fp16.parity["passed"] and fp16.parity["tolerance"]["precision"] == "fp16"
    assert fp16.parity["executed_precision"] == ("fp16" if ncnn.cpu_support_arm_asimdhp() else
                                                 "fp32 (fp16 storage: NCNN computes in fp32 on a CPU without fp16 "
                                                 "arithmetic)")
    weights = [(built_edge / m.node / str(m.entry)).with_suffix(".bin").stat().st_size for m in (fp32, fp16)]
    assert 0.45 < weights[1] / weights[0] < 0.55, weights
    assert fp32.info["layers"]["Convolution"] == 60 and fp32.info["layers"]["Input"] == 1


def test_every_convolution_is_recorded_with_the_module_it_came_from(built_edge: Path) -> None:
    """What ncnn-int8 reads to keep the family's float module in float: pnnx's layer names paired with the module
    paths of its own IR, in order, each pair of the same output channels."""
    from yolo_optimize.runtime.runners.ncnn import read_layers

    manifest = Manifest.read(built_edge / "ncnn-fp32")
    modules = manifest.info["convolution_modules"]
    layers = {layer.name: layer for layer in read_layers(built_edge / "ncnn-fp32" / str(manifest.entry))}
    assert len(modules) == 60 and all(layers[name].kind == "Convolution" for name in modules)
    assert (modules["conv_7"], modules["conv_8"]) == ("model.model.0.conv", "model.model.1.conv")
    assert {name: modules[name] for name in ("conv_64", "conv_65", "conv_66")} == {
        f"conv_{64 + i}": f"model.model.24.m.{i}" for i in range(3)}
    assert all(layers[name].param(0) == 255 for name in ("conv_64", "conv_65", "conv_66"))


class TopK(torch.nn.Module):
    """A convolution, then the top-k an NMS-free head picks its detections with."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return torch.topk(self.conv(images).flatten(1), 5, dim=1).values


@pytest.fixture
def topk_graph(tmp_path: Path) -> Path:
    """The .param pnnx writes for ``TopK``: torch.topk left in it, unconverted."""
    import pnnx

    param = tmp_path / "model.ncnn.param"
    with torch.no_grad():
        pnnx.export(TopK().eval(), str(tmp_path / "model.pt"), (torch.rand(1, 3, 16, 16),), check_trace=False,
                    ncnnparam=str(param), ncnnbin=str(tmp_path / "model.ncnn.bin"), **scratch_paths(tmp_path))
    return param


def test_an_operator_ncnn_lacks_is_named_in_one_line(topk_graph: Path) -> None:
    """pnnx leaves torch.topk unconverted (YOLO26's and YOLOv10's NMS-free heads,
    bench/archive/edge_runtimes/edge_families.py): the export names it, instead of writing a graph NCNN refuses to load,
    and says which head NCNN runs."""
    with pytest.raises(RuntimeError, match=r"^NCNN has no layer for torch.topk: pnnx left them unconverted "
                                           r"\(ultralytics-end2end picks its detections with a top-k: --head "
                                           r"one-to-many builds its NMS head, which NCNN runs\)$"):
        refuse_unconverted(topk_graph, family_named("ultralytics-end2end"))


def test_the_refusals_hint_fits_a_family_without_another_head(topk_graph: Path) -> None:
    """RT-DETR's decoder ranks its queries with a top-k too, but it has no NMS head: its hint says to build another
    target, never to pass a --head it does not have (the refusal comes after pnnx's conversion, so the graph is
    converted here rather than an RT-DETR built)."""
    with pytest.raises(RuntimeError) as refused:
        refuse_unconverted(topk_graph, family_named("rtdetr"))
    assert str(refused.value) == ("NCNN has no layer for torch.topk: pnnx left them unconverted (rtdetr ranks its "
                                  "detections with a top-k in its own head and has no head without one: build it for "
                                  "another target, such as onnx or openvino)")
    assert "--head" not in str(refused.value) and "YOLO" not in str(refused.value)
