"""Measuring artifacts: the protocol (evaluator, interleave, measure, end_to_end), the report and what to ship.
The Python API's ``yolo_optimize.evaluate`` is the function of that name (``yolo_optimize/__init__.py``)."""
