"""The lines a recommendation gives to load its pick: valid Python that runs the artifact in the configuration it was
measured in (OpenVINO's throughput hints and request queue; a GPU row's CUDA graph and streams)."""

from __future__ import annotations

from tests.evaluation.handmade import report, row
from yolo_optimize.evaluation.reporting.recommend import Budget, recommend

THROUGHPUT_OPENVINO = {"mode": "throughput", "streams": 2, "threads_per_stream": 1, "request_batch": 1, "requests": 2,
                       "settings": {"INFERENCE_NUM_THREADS": 2, "PERFORMANCE_HINT": "THROUGHPUT",
                                    "INFERENCE_PRECISION_HINT": "bf16"}, "note": "", "label": "throughput 2x1"}


def test_the_snippet_reproduces_the_throughput_configuration_it_was_measured_in() -> None:
    found, = recommend(report(row("openvino-int8", [40, 41, 39], 0.340, execution=THROUGHPUT_OPENVINO)), Budget(1))
    snippet = found.choice.snippet
    assert "'PERFORMANCE_HINT': 'THROUGHPUT'" in snippet and "'INFERENCE_PRECISION_HINT': 'bf16'" in snippet
    assert "ov.AsyncInferQueue(model, 2)" in snippet and "wait_all()" in snippet
    assert found.choice.mode == "throughput 2x1"
    compile(snippet, "snippet", "exec")  # valid Python as printed


def test_a_gpu_row_s_snippet_captures_the_forward_in_a_cuda_graph_as_it_was_measured() -> None:
    from yolo_optimize.runtime.runners.base import LATENCY, THROUGHPUT

    on_gpu = {"mode": LATENCY, "streams": 1, "threads_per_stream": 1, "request_batch": 1, "requests": 1, "note": "",
              "settings": {"cuda_graph": True, "channels_last": True}, "label": "latency 1x1"}
    found, = recommend(report(row("torchscript-fp16", [10, 11, 9], 0.340, execution=on_gpu)), Budget(1))
    snippet = found.choice.snippet
    assert "torch.cuda.CUDAGraph()" in snippet and "graph.replay()" in snippet and "channels_last" in snippet
    assert "model = model.cuda().half()" in snippet and ".div(255).half()" in snippet
    assert "outputs = model(torch.from_numpy(images))" not in snippet  # the CPU call is replaced, not repeated
    compile(snippet, "snippet", "exec")
    on_streams = {**on_gpu, "mode": THROUGHPUT, "streams": 2, "request_batch": 4, "label": "throughput 2x1",
                  "settings": {**on_gpu["settings"], "cuda_streams": 2}}
    found, = recommend(report(row("torchscript-fp16", [10, 11, 9], 0.340, execution=on_streams)), Budget(1))
    assert "torch.empty((4, 640, 640, 3)" in found.choice.snippet and "on 2 CUDA streams" in found.choice.snippet
    compile(found.choice.snippet, "snippet", "exec")
