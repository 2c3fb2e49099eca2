"""Issue 46: an INT8 SiLU in ONNX Runtime as a lookup over the 256 input codes (``Cast`` to int32, then ``Gather`` on
a 256-entry uint8 table) against the quantized graph's own SiLU (the QDQ pattern ONNX Runtime fuses into
``QLinearSigmoid`` + ``QLinearMul``), on yolov5n's largest SiLU input (16 x 320 x 320 at 640).

    python -m bench.archive.int8_peers.ort_silu_lookup [--repeats 5] [--save bench/results/<cpu kind>/ort_silu_lookup]

Why: in ``bench/ceiling.py``'s profiles the SiLU takes a quarter of onnx-int8's layer time, as two quantized
operators, where one lookup would compute the same function of the input code; ONNX has no lookup operator, and
ONNX Runtime's ``com.microsoft`` domain has none for SiLU, so a ``Gather`` is the one way to write it. Each variant is
a one-node-chain model on a uint8 input, in a session as the runner makes it (2 threads, idle threads sleeping, all
graph optimizations), in its own fresh process per round, rounds interleaved: 5 warm-up runs, then 60 timed; the
median in ms. Prints and saves the medians over rounds and each round's.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.harness import by_name, paired_rounds, save, timing_parser
from yolo_optimize.host.processes import in_own_process

SHAPE = (1, 16, 320, 320)
VARIANTS = ("QDQ SiLU (QLinearSigmoid + QLinearMul)", "lookup (Cast to int32 + Gather)")


def model(variant: str) -> bytes:
    """``variant`` as a serialized ONNX model from uint8 ``x`` to uint8 ``y``: the QDQ SiLU with yolov5-like scales,
    or the lookup over a 256-entry table (its values do not change the time)."""
    from onnx import TensorProto, helper
    from onnx import numpy_helper as arrays

    constants = [arrays.from_array(np.array(0.05, np.float32), "x_scale"),
                 arrays.from_array(np.array(128, np.uint8), "x_zero"),
                 arrays.from_array(np.array(1 / 255, np.float32), "sigmoid_scale"),
                 arrays.from_array(np.array(0, np.uint8), "sigmoid_zero"),
                 arrays.from_array(np.array(0.04, np.float32), "y_scale"),
                 arrays.from_array(np.array(10, np.uint8), "y_zero"),
                 arrays.from_array(np.arange(256, dtype=np.uint8), "table")]
    if variant == VARIANTS[0]:
        nodes = [helper.make_node("DequantizeLinear", ["x", "x_scale", "x_zero"], ["x_float"]),
                 helper.make_node("Sigmoid", ["x_float"], ["sigmoid"]),
                 helper.make_node("QuantizeLinear", ["sigmoid", "sigmoid_scale", "sigmoid_zero"], ["sigmoid_q"]),
                 helper.make_node("DequantizeLinear", ["sigmoid_q", "sigmoid_scale", "sigmoid_zero"], ["gate"]),
                 helper.make_node("Mul", ["x_float", "gate"], ["silu"]),
                 helper.make_node("QuantizeLinear", ["silu", "y_scale", "y_zero"], ["y"])]
        constants = constants[:-1]
    else:
        nodes = [helper.make_node("Cast", ["x"], ["codes"], to=TensorProto.INT32),
                 helper.make_node("Gather", ["table", "codes"], ["y"], axis=0)]
        constants = constants[-1:]
    graph = helper.make_graph(nodes, "silu", [helper.make_tensor_value_info("x", TensorProto.UINT8, SHAPE)],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, SHAPE)], constants)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9).SerializeToString()


def median_run_ms(variant: str, threads: int) -> tuple[float, list[str]]:
    """This process's median run of ``variant`` (ms), and the operators ONNX Runtime ran (its optimized graph)."""
    import onnx
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    with tempfile.TemporaryDirectory() as work:
        options.optimized_model_filepath = str(Path(work) / "optimized.onnx")
        session = ort.InferenceSession(model(variant), options, providers=["CPUExecutionProvider"])
        ran = [node.op_type for node in onnx.load(options.optimized_model_filepath).graph.node]
    image = {"x": np.random.default_rng(0).integers(0, 256, SHAPE, dtype=np.uint8)}
    for _ in range(5):
        session.run(None, image)
    times = []
    for _ in range(60):
        started = time.perf_counter()
        session.run(None, image)
        times.append((time.perf_counter() - started) * 1e3)
    return statistics.median(times), ran


def main() -> None:
    parser = timing_parser(__doc__, "ort_silu_lookup", 0.0)
    parser.set_defaults(repeats=5)
    args = parser.parse_args()

    def run(variant: str) -> tuple[float, list[str]]:
        ms, ran = in_own_process(by_name(median_run_ms), variant, args.threads)
        print(f"{variant} {ms:.3f} ms", flush=True)
        return round(ms, 3), ran

    runs = paired_rounds(VARIANTS, args.repeats, run)
    rounds = {variant: [ms for ms, _ in found] for variant, found in zip(VARIANTS, runs)}
    operators = {variant: found[-1][1] for variant, found in zip(VARIANTS, runs)}
    medians = {variant: round(statistics.median(times), 3) for variant, times in rounds.items()}
    for variant, ms in medians.items():
        print(f"{variant}: {ms:.3f} ms (median of {args.repeats} processes), ran as {' + '.join(operators[variant])}")
    save(args.save, "ort_silu_lookup", {"settings": {k: str(v) for k, v in vars(args).items()}, "shape": SHAPE,
                                        "median_run_ms": medians, "rounds_ms": rounds, "operators_run": operators},
         args.threads)


if __name__ == "__main__":
    main()
