"""``optimize info``'s options: one typed record, each field the option's one declaration (declaring.py), from which
the command line takes it (cli/click_options.py), as ``BuildOptions`` is for the build."""

from __future__ import annotations

from dataclasses import dataclass

from yolo_optimize.declaring import Flag, Whole, option
from yolo_optimize.limits.peaks import ROUNDS


@dataclass(frozen=True)
class InfoOptions:
    """Everything ``optimize info`` takes (its ``--json``, how the limits print, is the command's own)."""

    threads: int | None = option(None, Whole(1), "Threads the kernels get (measure at the thread count eval uses).",
                                 shown_default="the usable CPUs")
    refresh: bool = option(False, Flag(), "Measure again even when this machine's limits are cached.")
    rounds: int = option(ROUNDS, Whole(1), "Rounds when measuring (fewer: quicker, but a host's slow stretch may then "
                                           "read as its peak).")
