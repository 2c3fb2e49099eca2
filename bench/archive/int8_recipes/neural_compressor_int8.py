"""Why there is no torch-int8 target: neural-compressor's PyTorch static INT8 against FP32 eager, measured.

    pip install -e ".[inc]"
    python -m bench.archive.int8_recipes.neural_compressor_int8 --weights ../shared/assets/weights/yolov5n.pt

neural-compressor 3.10's PyTorch backend (the package neural-compressor-pt) quantizes through
PT2E: the result is a GraphModule of quantize/dequantize ops, fast only after torch.compile
and only with VNNI/AMX int8 kernels. This prints eager and compiled latencies beside FP32 eager.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bench.harness import parser_for
from yolo_optimize.checkpoint import load_model, resolve_source
from yolo_optimize.host.environment import configure


def latency_ms(model: Callable[[torch.Tensor], Any], x: torch.Tensor, runs: int = 10) -> float:
    with torch.no_grad():
        for _ in range(3):
            model(x)
        samples = []
        for _ in range(runs):
            started = time.perf_counter()
            model(x)
            samples.append(time.perf_counter() - started)
    return sorted(samples)[len(samples) // 2] * 1e3


def main() -> None:
    configure()  # a benchmark is a program of ours, like the CLI: the tools stay offline and out of $HOME
    parser = parser_for(__doc__)
    parser.add_argument("--weights", type=Path, default=Path("../shared/assets/weights/yolov5n.pt"))
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    import neural_compressor.torch.quantization as inc
    from neural_compressor.torch.export import export

    model = load_model(resolve_source(str(args.weights)))
    x = torch.rand(1, 3, 640, 640)
    prepared = inc.prepare(export(model, example_inputs=(x,)), inc.StaticQuantConfig(), example_inputs=(x,))
    for _ in range(8):
        prepared(torch.rand(1, 3, 640, 640))
    quantized = inc.convert(prepared)
    started = time.perf_counter()
    compiled = torch.compile(quantized)
    compiled(x)
    compile_s = time.perf_counter() - started
    print(f"FP32 eager            {latency_ms(model, x):7.1f} ms")
    print(f"INC INT8 eager        {latency_ms(quantized, x):7.1f} ms")
    print(f"INC INT8 torch.compile {latency_ms(compiled, x):6.1f} ms (compile {compile_s:.0f} s)")


if __name__ == "__main__":
    main()
