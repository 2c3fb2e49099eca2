"""TensorRT engines, run on CUDA through torch buffers (so no pycuda is needed); TensorRT 10+ tensor API.

An engine runs only on the GPU and TensorRT version that built it (the manifest records them; another is refused
in one line) and only when the evaluation runs on CUDA. Each batch runs on the optimization profile built for
it (export/tensorrt.py's plan), selected per call.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from yolo_optimize.runtime.runners.base import Runner
from yolo_optimize.runtime.runners.cuda_phases import CudaPhases
from yolo_optimize.runtime.tensorrt_api import (
    engine_refused_here,
    fresh_logger,
    logged_errors,
    profile_for,
    require_tensorrt,
    tensorrt_unavailable_reason,
)

Shape = tuple[int, ...]


class TensorRTRunner(Runner):
    _context: Any = None

    @classmethod
    def unavailable_reason(cls, device: str) -> str | None:
        """Engines run on CUDA only: on another device the row is skipped, never measured against a CPU baseline."""
        if device != "cuda":
            return f"TensorRT engines run on a CUDA GPU; this evaluation runs on {device} (--device cuda on a GPU host)"
        return tensorrt_unavailable_reason()

    def activate(self) -> None:
        """Deserialize on CUDA device 0 and bind the one input and one output by name."""
        reason = self.unavailable_reason(self.device)
        if reason:
            raise RuntimeError(reason)
        trt = require_tensorrt()
        mismatch = engine_refused_here(self.manifest.info)
        if mismatch:
            raise RuntimeError(mismatch)
        import torch

        self._torch = torch
        self._device = torch.device("cuda", 0)
        with torch.cuda.device(self._device):
            self._runtime = trt.Runtime(fresh_logger())
            self._engine = self._runtime.deserialize_cuda_engine(self.entry.read_bytes())
            if self._engine is None:
                raise RuntimeError(f"TensorRT could not deserialize {self.entry}: {logged_errors()}")
            self._context = self._engine.create_execution_context()
            self._stream = torch.cuda.Stream(self._device)  # a non-default stream avoids TensorRT's extra syncs
        self.phases = CudaPhases(self._stream)
        self._plan: list[dict[str, int]] = self.manifest.info.get("profiles", [])
        self._active_profile = 0  # a new context starts on profile 0
        self.input_name, self.output_name = _io_names(trt, self._engine)
        self._input_dtype = _torch_dtype(trt, torch, self._engine.get_tensor_dtype(self.input_name))
        self._output_dtype = _torch_dtype(trt, torch, self._engine.get_tensor_dtype(self.output_name))

    def infer(self, images: np.ndarray) -> np.ndarray:
        """Run one batch; raises ValueError when its shape lies outside the engine's optimization profile."""
        if self._context is None:
            raise RuntimeError("the TensorRT runner is not active")
        torch, phases = self._torch, self.phases
        assert phases is not None, "activate sets the phases"
        fresh_logger()
        with torch.cuda.device(self._device), torch.cuda.stream(self._stream):
            phases.start()
            batch = torch.from_numpy(np.ascontiguousarray(images, dtype=np.float32))
            batch = batch.to(self._device, self._input_dtype)
            phases.mark()
            self._select_profile(len(batch))
            if not self._context.set_input_shape(self.input_name, tuple(batch.shape)):
                raise ValueError(f"input shape {tuple(batch.shape)} is outside the engine profile {self._profile()}")
            out_shape = tuple(self._context.get_tensor_shape(self.output_name))
            output = torch.empty(out_shape, dtype=self._output_dtype, device=self._device)
            self._context.set_tensor_address(self.input_name, batch.data_ptr())
            self._context.set_tensor_address(self.output_name, output.data_ptr())
            if not self._context.execute_async_v3(stream_handle=self._stream.cuda_stream):
                raise RuntimeError(f"TensorRT execution failed: {logged_errors()}")
            phases.mark()
            found = output.float().cpu().numpy()  # waits for the stream
            phases.finish()
            return found

    def _select_profile(self, batch: int) -> None:
        """Switch to the profile built for ``batch`` (ValueError outside all of them); a no-op when it is active."""
        index = profile_for(self._plan, batch) if self._plan else 0
        if index != self._active_profile:
            if not self._context.set_optimization_profile_async(index, self._stream.cuda_stream):
                raise RuntimeError(f"TensorRT could not switch to profile {index}: {logged_errors()}")
            self._active_profile = index

    def deactivate(self) -> None:
        """Drop context, engine and runtime in that order; TensorRT 10+ frees them when unreferenced."""
        self._context = None
        self._engine = None
        self._runtime = None

    def _profile(self) -> list[Shape]:
        """The active profile's min/opt/max input shapes, to explain a rejected batch."""
        return [tuple(dims) for dims in self._engine.get_tensor_profile_shape(self.input_name, self._active_profile)]


def _io_names(trt: ModuleType, engine: Any) -> tuple[str, str]:
    """The engine's single input and single output, found by the name-based I/O API."""
    names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
    inputs = [name for name in names if engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT]
    outputs = [name for name in names if name not in inputs]
    if len(inputs) != 1 or len(outputs) != 1:
        raise RuntimeError(f"expected one input and one output tensor, got inputs {inputs} and outputs {outputs}")
    return inputs[0], outputs[0]


def _torch_dtype(trt: ModuleType, torch: ModuleType, dtype: Any) -> Any:
    """torch dtype for an engine I/O tensor; fp16 I/O appears when the ONNX graph itself was exported in fp16."""
    dtypes = {trt.float32: torch.float32, trt.float16: torch.float16}
    if dtype not in dtypes:
        raise RuntimeError(f"unsupported engine I/O dtype {dtype}")
    return dtypes[dtype]
