"""How the ONNX graph is exported, measured: the same yolov5n in ONNX Runtime, four ways.

- yolov5-default: what yolov5's export.py gives for a pretrained checkpoint (TorchScript-based
  exporter, opset 12, no onnxsim, and the Detect head left out of export mode because the
  pickled classes resolve to ``models.yolo``: 4 outputs, the raw feature maps among them);
- legacy-export-mode: the same exporter with the head in export mode (1 output);
- ours-raw: the dynamo exporter in export mode (the build's onnx-export node);
- ours: that graph after onnxsim (the build's onnx-fp32, what ``optimize`` ships).

Each measurement runs in its own process, interleaved round by round, because timings on this
kind of host are bimodal per process. Prints and saves p50 latency at batch 1.

    python bench/onnx_export.py --artifacts artifacts/yolov5n --weights ../shared/assets/weights/yolov5n.pt
"""

from __future__ import annotations

import multiprocessing
import statistics
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from common import save, timing_parser

from yolo_optimize.artifact import Manifest
from yolo_optimize.checkpoint import load_model, resolve_source


def legacy_export(weights: Path, out: Path, *, export_mode: bool, opset: int = 12) -> Path:
    """torch.onnx.export's TorchScript-based path, as yolov5's export.py calls it."""
    import torch
    from yolov5.models.yolo import Detect

    model = load_model(resolve_source(str(weights)))
    for module in model.modules():
        if isinstance(module, Detect):
            module.export = export_mode
    example = torch.zeros(1, 3, 640, 640)
    torch.onnx.export(model, example, str(out), opset_version=opset, do_constant_folding=True, dynamo=False,
                      input_names=["images"], output_names=["output0"])
    return out


def p50_ms(path: str, threads: int, seconds: float) -> float:
    """Batch-1 p50 latency in ONNX Runtime (CPU provider, all graph optimizations)."""
    import numpy as np
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    feed = {"images": np.random.default_rng(0).random((1, 3, 640, 640), dtype=np.float32)}
    for _ in range(3):
        session.run(None, feed)
    samples, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end or len(samples) < 5:
        start = time.perf_counter()
        session.run(None, feed)
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def in_own_process(path: Path, threads: int, seconds: float) -> float:
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(p50_ms, str(path), threads, seconds).result()


def main() -> None:
    parser = timing_parser(__doc__, seconds=8.0)
    parser.add_argument("--artifacts", type=Path, default=Path("artifacts/yolov5n"))
    parser.add_argument("--weights", type=Path, default=Path("../shared/assets/weights/yolov5n.pt"))
    args = parser.parse_args()
    ours = args.artifacts / "onnx-fp32"
    raw = args.artifacts / ".cache" / "onnx-export"
    with tempfile.TemporaryDirectory() as work:
        variants = {
            "yolov5-default": legacy_export(args.weights, Path(work) / "default.onnx", export_mode=False),
            "legacy-export-mode": legacy_export(args.weights, Path(work) / "export-mode.onnx", export_mode=True),
            "ours-raw": raw / str(Manifest.read(raw).entry),
            "ours": ours / str(Manifest.read(ours).entry),
        }
        rounds = [{name: in_own_process(path, args.threads, args.seconds) for name, path in variants.items()}
                  for _ in range(args.repeats)]
    medians = {name: statistics.median(r[name] for r in rounds) for name in variants}
    for r in rounds:
        print("   ".join(f"{name} {ms:6.1f} ms" for name, ms in r.items()))
    print("median p50: " + "   ".join(f"{name} {ms:6.1f} ms" for name, ms in medians.items()))
    save(args.save, "onnx_export", {"batch": 1, "threads": args.threads, "rounds_p50_ms": rounds,
                                    "median_p50_ms": medians}, args.threads)


if __name__ == "__main__":
    main()
