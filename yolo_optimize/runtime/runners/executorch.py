"""ExecuTorch programs (export/executorch.py): ``executorch.runtime`` on the CPU, the XNNPACK delegate's thread
pool sized to the row's threads.

The pool is set explicitly: left alone it takes every CPU it sees, which on large hosts ran hundreds of times
slower (executorch#9196), and here it would not be the row's threads. The program takes one image (the export's
docstring), so a batch is its images one after the other."""

from __future__ import annotations

import json
import re
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from yolo_optimize.host.cpu import has_fp16_arithmetic
from yolo_optimize.runtime.layers import LayerProfile, LayerTime, timed_ms
from yolo_optimize.runtime.runners.base import Runner

FP16_STORAGE = "fp16 storage, each operator accumulating in fp32"
# An XNNPACK operator as ETDump names it: "Convolution (NHWC, QS8) IGEMM #3" (numbered within its partition)
XNNPACK_OPERATOR = re.compile(r"^(?P<kind>[^(#]+?)\s*\((?P<types>[^)]*)\)\s*(?P<kernel>[^#]*?)\s*#\d+$")
INTEGER_TYPES = ("QS8", "QU8", "QC8", "QD8", "QP8", "QC4")  # XNNPACK's quantized data types
PARTITION_END = "DELEGATE_CALL"  # the delegate's own event, after its operators'
CONTAINERS = ("Method::execute", "OPERATOR_CALL")  # spans around the layers, not layers
EXECUTION = "Execute"  # the ETDump block of the method's calls (the other: loading it)


class ExecuTorchRunner(Runner):
    takes_one_image = True
    method: Any = None

    def activate(self) -> None:
        from executorch.extension.pybindings import portable_lib
        from executorch.runtime import Runtime

        portable_lib._unsafe_reset_threadpool(self.threads)
        self.method = Runtime.get().load_program(str(self.entry)).load_method("forward")

    def infer(self, images: np.ndarray) -> np.ndarray:
        import torch

        return np.stack([self.method.execute([torch.from_numpy(np.ascontiguousarray(image[None]))])[0].numpy()[0]
                         for image in images])

    def profile_layers(self, images: np.ndarray, runs: int, trace: Path) -> LayerProfile:
        """ExecuTorch's own profiler: an ETDump of ``runs`` passes (after two), read by its Inspector. Each XNNPACK
        operator of each delegated partition has its own time (XNNPACK's counters) and its data types in its name,
        which give the precision it ran in; each operator left to the portable kernels has its time too. ETDump
        keeps no timeline of XNNPACK's operators, so the trace lays them end to end, each pass's in order."""
        import torch
        from executorch.devtools import Inspector
        from executorch.runtime import Runtime

        inputs = [torch.from_numpy(np.ascontiguousarray(image[None])) for image in images]
        with tempfile.TemporaryDirectory(prefix="yolo-optimize-etdump-") as work:
            program = Runtime.get().load_program(str(self.entry), enable_etdump=True)
            method = program.load_method("forward")

            def one_pass() -> None:
                for image in inputs:
                    method.execute([image])

            for _ in range(2):
                one_pass()
            passes = [timed_ms(one_pass) for _ in range(runs)]
            etdump = Path(work) / "etdump.etdp"
            program.write_etdump_result_to_file(str(etdump), str(Path(work) / "debug.bin"))
            events = [event for block in Inspector(etdump_path=str(etdump)).event_blocks
                      if block.name == EXECUTION for event in block.events if event.perf_data is not None]
        calls = runs * len(inputs)
        layers = etdump_layers(events, calls, runs, self.file_precision)
        trace.write_text(json.dumps({"traceEvents": _laid_out(events, calls), "otherData": {
            "source": "ExecuTorch ETDump, each call's operators laid end to end (not a timeline)"}}))
        return LayerProfile(layers, runs, "ExecuTorch's ETDump laid end to end per call", passes)

    def set_threads(self, threads: int) -> None:
        from executorch.extension.pybindings import portable_lib

        portable_lib._unsafe_reset_threadpool(threads)
        self.threads = threads

    @property
    def precision_note(self) -> str:
        """How a float16 program computes here, and what of the program XNNPACK does not run (the build's record of
        its operators left to portable kernels)."""
        notes = [FP16_STORAGE] if self.file_precision == "fp16" and self.compute_precision == "fp32" else []
        fallback = self.manifest.info.get("fallback") or {}
        if nodes := sum(fallback.values()):
            names = sorted({name.split(".")[1] if "." in name else name for name in fallback})
            notes.append(f"{nodes} ops outside XNNPACK: {', '.join(names)}")
        return "; ".join(notes)

    @property
    def compute_precision(self) -> str:
        """XNNPACK's float arithmetic: fp16 for a float16 program on a CPU with fp16 arithmetic (AVX512-FP16, ARM's
        half-precision SIMD), else fp32 (its x86 float16 kernels without it, ``f16_f32acc``, convert to fp32 and round
        each result)."""
        return "fp16" if self.file_precision == "fp16" and has_fp16_arithmetic() else "fp32"

    @property
    def executed_precision(self) -> str:
        """An INT8 program's label with the share of its convolutions quantized, as its build counted them in the
        converted graph (``info.int8_convolutions``): XNNPACK's compiled graph is not readable back from the
        runtime."""
        integer, total = self.manifest.info.get("int8_convolutions") or (0, 0)
        label = super().executed_precision
        return label if integer == total else f"{label} ({integer} of {total} convolutions in int8)"

    def deactivate(self) -> None:
        self.method = None


def etdump_layers(events: list[Any], calls: int, runs: int, file_precision: str) -> list[LayerTime]:
    """The layers of an ETDump's events (Inspector ``Event``s, in execution order, with a duration per call): each
    operator's time over the last ``calls`` calls, per pass of ``runs``. XNNPACK's operators are named within their
    partition (``p2 Convolution #3``); their kind and kernel come from the name, their precision from its types.
    XNNPACK runs a 1x1 convolution as ``Fully Connected``: yolov5n's 60 convolutions are 18 of one and 42 of the
    other."""
    layers, seen = [], Counter[str]()
    for partition, event in _operators(events):
        ms = round(sum(event.perf_data.raw[-calls:]) / runs, 4)
        found = XNNPACK_OPERATOR.match(event.name) if event.is_delegated_op else None
        if found:
            types = found["types"]
            executed = "int8" if any(t in types for t in INTEGER_TYPES) else "fp16" if "F16" in types else "fp32"
            layers.append(LayerTime(f"p{partition} {event.name}", found["kind"], ms, executed,
                                    f"XNNPACK ({types}) {found['kernel']}".strip()))
        else:  # a portable kernel ("native_call_select_copy.int_out"), numbered as XNNPACK's operators are
            kind = event.name.removeprefix("native_call_").split(".")[0]
            seen[kind] += 1
            layers.append(LayerTime(f"{kind} #{seen[kind]}", kind, ms,
                                    "fp32" if file_precision == "int8" else file_precision, "portable"))
    return layers


def _operators(events: list[Any]) -> list[tuple[int, Any]]:
    """The operators' events with the partition each belongs to (XNNPACK's come before their DELEGATE_CALL);
    the spans around them left out."""
    found, partition = [], 1
    for event in events:
        if event.name == PARTITION_END:
            partition += 1
        elif event.name and event.name not in CONTAINERS:
            found.append((partition, event))
    return found


def _laid_out(events: list[Any], calls: int) -> list[dict[str, Any]]:
    """Chrome-trace events: each of the last ``calls`` calls' operators end to end, in execution order."""
    laid, clock = [], 0.0
    for call in range(calls):
        for _, event in _operators(events):
            us = event.perf_data.raw[-calls:][call] * 1e3
            laid.append({"name": event.name, "ph": "X", "ts": clock, "dur": us, "pid": 0, "tid": 0,
                         "args": {"call": call}})
            clock += us
    return laid
