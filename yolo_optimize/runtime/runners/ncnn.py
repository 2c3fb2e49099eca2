"""NCNN (export/ncnn.py): ``ncnn.Net`` on the CPU, one extractor per image.

An NCNN graph takes one image (its blobs have no batch axis), so a batch is its images one after the other, each on
every thread: what a phone does with a stream of camera frames. ``ncnn-fp32`` runs with FP16 storage, packing and
arithmetic off; ``ncnn-fp16`` with NCNN's defaults, whose FP16 arithmetic exists on ARM CPUs with half-precision
vector instructions only: on x86 NCNN stores in FP16 and computes in FP32, and "runs in" says so. ``ncnn-int8``
runs NCNN's INT8 inference (on by default) for the convolutions its .param gives int8 scales, and the rest in FP32
like ``ncnn-fp32``.

The .param reader (``NcnnLayer``, ``read_layers``) lives here, with the runtime whose format it is: the runner counts
the convolutions NCNN loaded with int8 scales, the export and ``ncnn-int8`` read and write the same lines."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from yolo_optimize.runtime.runners.base import Runner


@dataclass(frozen=True)
class NcnnLayer:
    """One line of a .param: ``type name #bottoms #tops bottoms... tops... key=value...``."""

    kind: str
    name: str
    bottoms: tuple[str, ...]
    tops: tuple[str, ...]
    params: tuple[str, ...]  # "key=value", as written (arrays are "-23300=n,a,b...")

    @classmethod
    def parse(cls, line: str) -> NcnnLayer:
        kind, name, bottoms, tops, *rest = line.split()
        inputs, outputs = int(bottoms), int(tops)
        return cls(kind, name, tuple(rest[:inputs]), tuple(rest[inputs:inputs + outputs]),
                   tuple(rest[inputs + outputs:]))

    def param(self, key: int, default: int = 0) -> int:
        """An integer parameter, or ``default`` where the line has none (as ncnn's ParamDict)."""
        for item in self.params:
            name, _, value = item.partition("=")
            if name == str(key):
                return int(value)
        return default

    def line(self) -> str:
        return " ".join([f"{self.kind:<24}", f"{self.name:<24}", str(len(self.bottoms)), str(len(self.tops)),
                         *self.bottoms, *self.tops, *self.params])


def read_layers(param: Path) -> list[NcnnLayer]:
    """The layers of a .param (a magic line, the layer and blob counts, then a layer a line)."""
    return [NcnnLayer.parse(line) for line in param.read_text().splitlines()[2:] if line.strip()]


def write_layers(param: Path, original: str, layers: list[NcnnLayer]) -> None:
    """``layers`` written as a .param with ``original``'s first two lines (same layers and blobs)."""
    param.write_text("\n".join([*original.splitlines()[:2], *(layer.line() for layer in layers)]) + "\n")


CONVOLUTIONS = ("Convolution", "ConvolutionDepthWise")  # pnnx writes a grouped nn.Conv2d as the second


class NcnnRunner(Runner):
    takes_one_image = True

    def activate(self) -> None:
        import ncnn

        self.net = ncnn.Net()
        for option, value in self.runtime_settings.items():
            setattr(self.net.opt, option, value)
        self.net.load_param(str(self.entry))
        self.net.load_model(str(self.weights))
        self.input_name, self.output_name = self.net.input_names()[0], self.net.output_names()[0]
        self.fp16_arithmetic = self.file_precision == "fp16" and bool(ncnn.cpu_support_arm_asimdhp())

    @property
    def weights(self) -> Path:
        """The .bin beside the .param (pnnx and Ultralytics name them alike)."""
        return self.entry.with_suffix(".bin")

    def infer(self, images: np.ndarray) -> np.ndarray:
        return np.stack([self._one(image) for image in images])

    def _one(self, image: np.ndarray) -> np.ndarray:
        import ncnn

        with self.net.create_extractor() as extractor:
            extractor.input(self.input_name, ncnn.Mat(np.ascontiguousarray(image)).clone())
            _, output = extractor.extract(self.output_name)
            return np.array(output)

    @property
    def runtime_settings(self) -> dict[str, Any]:
        half = self.file_precision == "fp16"
        return {"num_threads": self.threads, "use_fp16_storage": half, "use_fp16_packed": half,
                "use_fp16_arithmetic": half}

    def set_threads(self, threads: int) -> None:
        self.threads = self.net.opt.num_threads = threads

    @property
    def compute_precision(self) -> str:
        return "fp16" if self.fp16_arithmetic else "fp32"

    @property
    def executed_precision(self) -> str:
        """An INT8 model's label with its share of convolutions in int8: those whose .param line, as NCNN loaded it,
        carries int8 scales (``8=``); the others, the Detect head's, run in float."""
        label = super().executed_precision
        if self.file_precision != "int8":
            return label
        convolutions = [layer for layer in read_layers(self.entry) if layer.kind in CONVOLUTIONS]
        integer = sum(1 for layer in convolutions if layer.param(8))
        return label if integer == len(convolutions) else f"{label} ({integer} of {len(convolutions)} convolutions " \
            "in int8)"

    @property
    def precision_note(self) -> str:
        if self.file_precision == "fp16" and not self.fp16_arithmetic:
            return "fp16 storage: NCNN computes in fp32 on a CPU without fp16 arithmetic"
        return ""

    @property
    def weight_bytes(self) -> int:
        return self.weights.stat().st_size

    def deactivate(self) -> None:
        self.net.clear()
