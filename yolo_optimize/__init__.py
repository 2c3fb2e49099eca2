"""yolo-optimize: export, optimize and evaluate YOLO detectors and the classifiers deployed beside them.

The Python API (``yolo_optimize.api``): ``build``, ``evaluate``, ``recommend``; bad input raises ``UserError``, a
build with a failed node ``BuildFailed``. Importing the package changes
nothing in your process (no environment variable, no import of torch or of any runtime): the API's functions
import what they need when called.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from yolo_optimize.errors import BuildFailed, UserError
from yolo_optimize.versions import __version__

if TYPE_CHECKING:
    from yolo_optimize.api import Pick
    from yolo_optimize.building.build_result import BuildResult
    from yolo_optimize.evaluation.results import Report

__all__ = ["BuildFailed", "UserError", "__version__", "build", "evaluate", "recommend"]


def build(model: str | Path | None = None, **options: Any) -> BuildResult:
    """``api.build``: the build of ``model`` with the command's options as keywords."""
    from yolo_optimize import api

    return api.build(model, **options)


def evaluate(root: str | Path | None = None, **options: Any) -> Report:
    """``api.evaluate``: every artifact under ``root`` measured with the command's options as keywords."""
    from yolo_optimize import api

    return api.evaluate(root, **options)


def recommend(report: Report | str | Path, **options: Any) -> Pick:
    """``api.recommend``: the artifact to ship from an evaluation's report."""
    from yolo_optimize import api

    return api.recommend(report, **options)
