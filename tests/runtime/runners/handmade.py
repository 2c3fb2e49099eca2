"""A hand-written NCNN graph small enough to write in a test: an input image and one 1x1 convolution, whose
weights a test can cut short or leave out."""

from __future__ import annotations

from pathlib import Path

import numpy as np

CHANNELS = 4  # the convolution's outputs


def ncnn_model(folder: Path, size: int = 32) -> Path:
    """``folder/model.ncnn.param`` and its ``model.ncnn.bin`` (a 1x1 convolution of ``size`` x ``size`` RGB images,
    weights 1, biases 0); the .param's path."""
    folder.mkdir(parents=True, exist_ok=True)
    param = folder / "model.ncnn.param"
    param.write_text(f"7767517\n2 2\nInput in0 0 1 in0 0={size} 1={size} 2=3\n"
                     f"Convolution conv_0 1 1 in0 out0 0={CHANNELS} 1=1 5=1 6={3 * CHANNELS}\n")
    flag = np.zeros(1, np.uint32)  # NCNN's tag before a weight blob: 0, raw float32
    weights, biases = np.ones(3 * CHANNELS, np.float32), np.zeros(CHANNELS, np.float32)
    param.with_suffix(".bin").write_bytes(flag.tobytes() + weights.tobytes() + biases.tobytes())
    return param
