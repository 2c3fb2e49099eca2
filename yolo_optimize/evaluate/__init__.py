"""Measuring artifacts: the protocol (evaluator, interleave, measure, end_to_end), the report and what to ship.

``yolo_optimize.evaluate`` is also the Python API's function (``yo.evaluate(folder, data=...)``): the subpackage
and the function share the name the design gives both, so this module is callable and calls
``yolo_optimize.api.evaluate``.
"""

from __future__ import annotations

import sys
import types
from typing import Any


class _CallableModule(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from yolo_optimize.api import evaluate

        return evaluate(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
