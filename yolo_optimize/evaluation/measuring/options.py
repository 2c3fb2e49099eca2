"""``optimize profile``'s options: one typed record, each field the option's one declaration (declaring.py), from
which the command line takes it (cli/click_options.py), as ``EvalOptions`` is for the evaluation."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from yolo_optimize.declaring import FilePath, Real, Whole, option


@dataclass(frozen=True)
class ProfileOptions:
    """Everything ``optimize profile`` takes besides its ARTIFACT (``profiling.ProfileRequest`` is made of them)."""

    batch_size: int = option(1, Whole(1))
    largest_batch: int = option(8, Whole(1), "The end-to-end breakdown is taken at batch 1 and at this size.")
    data: Path | None = option(None, FilePath(), "Images to run.",
                               shown_default="the images bundled with the model's package")
    images: int = option(16, Whole(1), "How many of them.")
    threads: int | None = option(None, Whole(1), shown_default="the CPUs this process may use")
    min_time: float = option(1.0, Real(), "Timed seconds for the forward time and each thread count.")
    out: Path = option(Path("reports/profile"), FilePath())
