"""``optimize recommend``'s and ``optimize report``'s options: typed records, each field the option's one declaration
(declaring.py), from which the command line (cli/click_options.py) and, for ``recommend``, the API's keywords
(``yo.recommend``) take it, as ``EvalOptions`` is for the evaluation."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from yolo_optimize.declaring import FilePath, Flag, OneOf, Percentage, Real, Text, Whole, option

RANKINGS = ("inference", "e2e")  # --by: what a row's speed is ranked on (recommend.py: which figure each reads)


@dataclass(frozen=True)
class RecommendOptions:
    """Everything ``optimize recommend`` and ``yo.recommend`` take besides the report; ``recommend.recommendations``
    is the one function both call with it.

    The batch size defaults to every one the report measured, for both: the tool does not know the batch a
    deployment serves, and the answer differs by batch (a throughput configuration can win at batch 8 and lose at
    batch 1), so a default of one size would hide the others' answers. The command prints them all; the API, which
    returns one pick, asks for a size where the report measured several, as it asks for a model."""

    batch_size: int | None = option(None, Whole(1), shown_default="every batch size the report measured")
    max_map_drop: float = option(1.0, Real(), "Points of accuracy an artifact may lose against PyTorch FP32 "
                                              "(mAP50-95 for detectors, top-1 agreement for classifiers).")
    max_latency_ms: float | None = option(None, Real(0, above=True), "Limit on p50 latency.")
    max_memory_mb: float | None = option(None, Real(0, above=True),
                                         "Limit on peak memory: a GPU row's on the GPU, else the peak resident memory "
                                         "of the whole measuring process (the runtime, the model, its buffers, and "
                                         "Python with the libraries it imported: what a Python service deploying the "
                                         "file would hold), the matrix's 'peak MB'.")
    by: str = option("inference", OneOf(RANKINGS), "Rank on inference alone, or on the pipelined end-to-end "
                                                          "path (image files to kept predictions).")
    model: str | None = option(None, Text(), "The model of the report to recommend for.",
                               shown_default="every model the report measured")


@dataclass(frozen=True)
class ReportOptions:
    """Everything ``optimize report`` takes besides its REPORT folder."""

    compare: Path | None = option(None, FilePath(), "An earlier eval folder: per artifact and batch size, what changed "
                                                    "and whether it is noise.", metavar="OTHER")
    fail_on_regression: float | None = option(None, Percentage(), "With --compare: exit 1 on a significant slowdown "
                                                                  "beyond P percent (e.g. 5%) or an accuracy drop "
                                                                  "beyond 0.1 point.", metavar="P%")
    force: bool = option(False, Flag(), "Compare runs of different CPUs, ISAs, thread counts or devices.")
