"""The ONNX Runtime runner reads back whether an INT8 file's convolutions run in int8 or in float, and its CPU
sessions' idle threads wait as the variant chosen for them says (sleeping by default), as the printed snippet sets
them, and its throughput configuration's requests take as many images as it is opened with."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from yolo_optimize.artifact import Manifest
from yolo_optimize.evaluation.measuring.measure import execution_of
from yolo_optimize.evaluation.reporting.deployment_snippet import snippet
from yolo_optimize.runtime.runners import open_runner
from yolo_optimize.runtime.runners.onnxruntime import (
    IDLE_THREADS,
    SLEEPING,
    OnnxRuntimeRunner,
    gpu_providers,
)


def qdq_conv(path: Path, *, quantized_output: bool) -> None:
    """x -> Q -> DQ -> Conv(int8 weights through DQ) [-> Q -> DQ] -> y."""
    constants = [numpy_helper.from_array(np.array(0.02, np.float32), "scale"),
                 numpy_helper.from_array(np.array(128, np.uint8), "zero"),
                 numpy_helper.from_array(np.ones((4, 3, 3, 3), np.int8), "w_q"),
                 numpy_helper.from_array(np.array(0.01, np.float32), "w_scale"),
                 numpy_helper.from_array(np.array(0, np.int8), "w_zero")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "scale", "zero"], ["x_q"]),
             helper.make_node("DequantizeLinear", ["x_q", "scale", "zero"], ["x_dq"]),
             helper.make_node("DequantizeLinear", ["w_q", "w_scale", "w_zero"], ["w"]),
             helper.make_node("Conv", ["x_dq", "w"], ["conv" if quantized_output else "y"], pads=[1, 1, 1, 1])]
    if quantized_output:
        nodes += [helper.make_node("QuantizeLinear", ["conv", "scale", "zero"], ["conv_q"]),
                  helper.make_node("DequantizeLinear", ["conv_q", "scale", "zero"], ["y"])]
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], constants)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9), str(path))


@pytest.mark.parametrize(("quantized_output", "kernels", "label"), [
    (True, (1, 1), "int8+fp32"),
    (False, (0, 1), "fp32 (int8 file, convolutions dequantized to float)"),
])
def test_int8_convolutions_are_read_back_from_onnx_runtime(tmp_path: Path, quantized_output: bool,
                                                          kernels: tuple[int, int], label: str) -> None:
    qdq_conv(tmp_path / "model.onnx", quantized_output=quantized_output)
    manifest = Manifest("onnx-int8", "onnx-int8", "m", "onnx", "int8", "model.onnx", "k", {}, {}, {}, {})
    with OnnxRuntimeRunner(tmp_path, manifest, threads=1) as runner:
        output = runner.infer(np.random.default_rng(0).random((1, 3, 8, 8), np.float32))
        assert runner.convolutions == kernels and runner.executed_precision == label
    assert output.shape == (1, 4, 8, 8)


@pytest.mark.parametrize("variant", list(IDLE_THREADS))
def test_a_cpu_session_s_idle_threads_wait_as_its_variant_says_and_as_the_snippet_it_prints_sets_them(
        tmp_path: Path, variant: str) -> None:
    """How idle threads wait is chosen by measurement (the runner's docstring): the variant, set on the loaded
    runner as the choosing process sets it, remakes its session with its config entries; a runner opened as it (as
    every measuring process opens it), the configuration it records and the latency snippet run as printed set the
    same."""
    qdq_conv(tmp_path / "model.onnx", quantized_output=True)
    manifest = Manifest("onnx-int8", "onnx-int8", "m", "onnx", "int8", "model.onnx", "k", {}, {}, {}, {})
    with OnnxRuntimeRunner(tmp_path, manifest, threads=2) as runner:
        assert runner.variants(1) == tuple(IDLE_THREADS) and runner.idle_threads == SLEEPING
        runner.use_variant(variant)
        options = runner.session.get_session_options()
        assert all(options.get_session_config_entry(key) == value for key, value in IDLE_THREADS[variant].items())
        assert runner.infer(np.zeros((1, 3, 8, 8), np.float32)).shape == (1, 4, 8, 8)
        execution = execution_of(runner, 1)
    assert {key: execution["settings"][key] for key in IDLE_THREADS[variant]} == IDLE_THREADS[variant]
    with open_runner(tmp_path, manifest, threads=2, variant=variant) as opened:  # as a measuring process opens it
        options = opened.session.get_session_options()
        assert all(options.get_session_config_entry(key) == value for key, value in IDLE_THREADS[variant].items())
    printed = snippet("onnx", "int8", str(tmp_path / "model.onnx"), execution, "float32 NCHW")
    scope = {"images": np.zeros((1, 3, 8, 8), np.float32)}
    exec(printed, scope)
    options = scope["session"].get_session_options()
    assert all(options.get_session_config_entry(key) == value for key, value in IDLE_THREADS[variant].items())
    assert scope["outputs"].shape == (1, 4, 8, 8)


def test_idle_threads_are_a_choice_only_where_a_request_runs_on_several_threads(tmp_path: Path) -> None:
    """The throughput configuration's sessions have one thread each, and so does a one-thread row: nothing waits."""
    qdq_conv(tmp_path / "model.onnx", quantized_output=True)
    manifest = Manifest("onnx-int8", "onnx-int8", "m", "onnx", "int8", "model.onnx", "k", {}, {}, {}, {})
    auto = OnnxRuntimeRunner(tmp_path, manifest, threads=2, mode="auto")
    assert auto.variants(1) == tuple(IDLE_THREADS) and auto.variants(8) == ()
    assert OnnxRuntimeRunner(tmp_path, manifest, threads=1).variants(1) == ()
    with pytest.raises(ValueError, match="is not one of sleeping"):
        auto.use_variant("spinning")


@pytest.mark.parametrize(("opened", "request_batch"), [({}, 1), ({"request_batch": 4}, 4)])
def test_throughput_requests_take_the_images_per_request_the_runner_is_opened_with(
        tmp_path: Path, opened: dict[str, int], request_batch: int) -> None:
    """``request_batch`` (a study's lever, ``Timing.request_batch``) splits a batch into requests of that many images,
    recorded as the execution's; opened without it, a request is one image."""
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3, 4, 4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9),
              str(tmp_path / "model.onnx"))
    manifest = Manifest("onnx-fp32", "onnx-fp32", "m", "onnx", "fp32", "model.onnx", "k", {}, {}, {}, {})
    images = np.random.default_rng(0).standard_normal((8, 3, 4, 4)).astype(np.float32)
    with open_runner(tmp_path, manifest, threads=2, mode="throughput", **opened) as runner:
        assert runner.execution(8).request_batch == request_batch
        session, _ = runner._concurrent_session()
        requests: list[object] = []
        run = session.run_with_iobinding
        session.run_with_iobinding = lambda binding: requests.append(binding) or run(binding)
        assert np.array_equal(runner.infer(images), np.maximum(images, 0))
    assert len(requests) == 8 // request_batch


def test_a_cuda_row_prefers_tensorrt_then_cuda_providers_on_the_runners_stream_with_fp32_kept_fp32(
        tmp_path: Path) -> None:
    both = gpu_providers(["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"], 1234,
                         tmp_path, int8=True)
    assert [p[0] if isinstance(p, tuple) else p for p in both] == ["TensorrtExecutionProvider",
                                                                   "CUDAExecutionProvider", "CPUExecutionProvider"]
    tensorrt, cuda = both[0][1], both[1][1]
    assert tensorrt["user_compute_stream"] == cuda["user_compute_stream"] == "1234"
    assert tensorrt["trt_int8_enable"] == "True" and tensorrt["trt_fp16_enable"] == "False"
    assert tensorrt["trt_engine_cache_path"] == tensorrt["trt_timing_cache_path"] == str(tmp_path)
    assert cuda["use_tf32"] == "0"
    assert gpu_providers(["CUDAExecutionProvider", "CPUExecutionProvider"], 1, tmp_path, int8=False)[0][0] \
        == "CUDAExecutionProvider"


def test_the_cpu_build_of_onnx_runtime_skips_a_cuda_row_instead_of_running_it_on_the_cpu() -> None:
    import onnxruntime as ort

    if set(ort.get_available_providers()) & {"CUDAExecutionProvider", "TensorrtExecutionProvider"}:
        pytest.skip(f"this onnxruntime has GPU providers ({ort.get_available_providers()}): nothing to skip")
    assert OnnxRuntimeRunner.unavailable_reason("cpu") is None
    assert OnnxRuntimeRunner.unavailable_reason("cuda") == (
        f"this onnxruntime {ort.__version__} has no CUDA or TensorRT execution provider (the CPU build): install "
        "onnxruntime-gpu instead of onnxruntime to measure ONNX files on the GPU")
