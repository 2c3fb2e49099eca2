"""Where a GPU inference's time goes: host-to-device copy, GPU compute, device-to-host copy, by CUDA events.

The evaluator's latency is the host's clock around ``infer``, copies included: what a caller waits for.
A GPU runner also records a CUDA event on its stream between the phases of every call; the elapsed times
between them split that latency without synchronizing the host in between (which would add the host's
wake-up time to each phase). Read once per call, after the copy back has finished.
"""

from __future__ import annotations

from typing import Any

PHASES = ("copy_in", "compute", "copy_out")


class CudaPhases:
    """Usage per call: ``start()``, copy in, ``mark()``, compute, ``mark()``, copy out, ``finish()``."""

    def __init__(self, stream: Any = None) -> None:
        import torch

        self._torch, self._stream = torch, stream
        self.samples: list[tuple[float, float, float]] = []  # ms per call: (copy_in, compute, copy_out)
        self._events: list[Any] = []

    def start(self) -> None:
        self._events = []
        self.mark()

    def mark(self) -> None:
        event = self._torch.cuda.Event(enable_timing=True)
        event.record(self._stream)
        self._events.append(event)

    def finish(self) -> None:
        self.mark()
        self._events[-1].synchronize()
        first, copied, computed, last = self._events
        self.samples.append((first.elapsed_time(copied), copied.elapsed_time(computed), computed.elapsed_time(last)))

    def take(self) -> dict[str, list[float]]:
        """The samples since the last ``take``, per phase (ms), and start afresh (after warm-up runs, say)."""
        taken = {phase: [round(s[i], 4) for s in self.samples] for i, phase in enumerate(PHASES)}
        self.samples = []
        return taken
