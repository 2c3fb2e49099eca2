"""ExecuTorch programs: lowered to XNNPACK at batch 1, what XNNPACK left recorded, the metadata beside them; a float16
program that XNNPACK takes whole, its head in float32."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from yolo_optimize.artifact import Manifest
from yolo_optimize.export.executorch import quantized_fallback
from yolo_optimize.host.cpu import has_fp16_arithmetic
from yolo_optimize.runtime.runners.executorch import FP16_STORAGE


def test_a_program_passes_parity_and_records_what_xnnpack_did_not_take(built_edge: Path) -> None:
    manifest = Manifest.read(built_edge / "executorch-fp32")
    assert manifest.parity and manifest.parity["passed"] and manifest.parity["tolerance"]["precision"] == "fp32"
    assert manifest.info["xnnpack_partitions"] >= 1
    fallback = manifest.info["fallback"]
    assert "aten.convolution.default" not in fallback and all(count > 0 for count in fallback.values())
    executed = manifest.parity["executed_precision"]
    assert executed == "fp32" if not fallback else executed.startswith(f"fp32 ({sum(fallback.values())} ops outside "
                                                                       "XNNPACK: ")
    beside = json.loads((built_edge / "executorch-fp32" / str(manifest.entry)).with_suffix(".json").read_text())
    assert beside == manifest.metadata and beside["format"] == "executorch" and beside["batch"]["max"] == 1



def test_a_float16_program_is_as_few_xnnpack_graphs_as_the_fp32_one_and_held_to_the_fp16_tolerance(
        built_edge: Path) -> None:
    """One partition more than FP32 (the head in float32), where SiLU decomposed through float32 made 100; "runs in"
    says fp16 only where XNNPACK computes it (AVX512-FP16, ARM's half-precision SIMD)."""
    fp32, fp16 = (Manifest.read(built_edge / f"executorch-{precision}") for precision in ("fp32", "fp16"))
    assert fp16.parity and fp16.parity["passed"] and fp16.parity["tolerance"]["precision"] == "fp16"
    assert fp16.info["xnnpack_partitions"] <= fp32.info["xnnpack_partitions"] + 1, fp16.info
    assert "aten.convolution.default" not in fp16.info["fallback"]
    executed = fp16.parity["executed_precision"]
    assert executed.startswith("fp16" if has_fp16_arithmetic() else f"fp32 ({FP16_STORAGE}; "), executed
    assert fp16.metadata["precision"] == "fp16"


def dequantize_per_channel(weights: torch.Tensor) -> torch.Tensor:
    """Stands for PT2E's operator of that name in a graph built by hand."""
    return weights


def test_int8_weights_left_outside_xnnpack_are_named_by_their_module() -> None:
    """ExecuTorch cannot run a dequantize left outside XNNPACK: the build names the modules it came from instead of
    failing on "Missing out variants" (as YOLOv7-tiny's convolutions before its float head were, until their weights
    were folded: bench/archive/edge_runtimes/edge_families.py)."""
    graph = torch.fx.Graph()
    images, weights = graph.placeholder("images"), graph.placeholder("weights")
    convolution = graph.call_function(torch.nn.functional.conv2d,
                                      (images, graph.call_function(dequantize_per_channel, (weights,))))
    convolution.meta["nn_module_stack"] = {"key": ("model.74.conv", torch.nn.Conv2d)}
    graph.output(convolution)
    assert quantized_fallback(torch.fx.GraphModule(torch.nn.Module(), graph)) == ["model.74.conv"]
    plain = torch.fx.Graph()
    plain.output(plain.call_function(torch.nn.functional.conv2d, (plain.placeholder("x"), plain.placeholder("w"))))
    assert quantized_fallback(torch.fx.GraphModule(torch.nn.Module(), plain)) == []
