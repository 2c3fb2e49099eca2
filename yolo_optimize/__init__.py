"""yolo-optimize: export, optimize and evaluate YOLO detectors and the classifiers deployed beside them.

The Python API (``yolo_optimize.api``): ``build``, ``evaluate``, ``recommend``. Importing the package changes
nothing in your process (no environment variable, no import of torch or of any runtime): the API's functions
import what they need when called.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["__version__", "build", "evaluate", "recommend"]


def __getattr__(name: str) -> Any:
    """``yolo_optimize.build`` and friends, imported on first use (PEP 562). ``evaluate`` is the subpackage, which is
    callable as the API's function (evaluate/__init__.py)."""
    if name in ("build", "recommend"):
        from yolo_optimize import api

        return getattr(api, name)
    if name == "evaluate":
        import yolo_optimize.evaluate

        return yolo_optimize.evaluate
    raise AttributeError(f"module 'yolo_optimize' has no attribute {name!r}")
