"""The measured module times the workers' order comes from: read from pytest's durations report, and naming only
modules that exist."""

from __future__ import annotations

import json
from pathlib import Path

from tests.durations import DURATIONS, module_seconds

REPORT = """============================= slowest durations ==============================
148.92s call     tests/families/test_nms.py::test_a
45.66s setup    tests/evaluation/measuring/test_evaluator.py::test_b[onnx]
3.10s call     tests/families/test_nms.py::test_c
0.50s teardown tests/evaluation/measuring/test_evaluator.py::test_b[onnx]
[gw0] [ 43%] PASSED tests/families/test_nms.py::test_a
"""


def test_each_modules_setup_call_and_teardown_are_summed_longest_first() -> None:
    assert list(module_seconds(REPORT).items()) == [("tests/families/test_nms.py", 152.0),
                                                    ("tests/evaluation/measuring/test_evaluator.py", 46.2)]


def test_the_saved_durations_name_only_modules_that_exist() -> None:
    saved = json.loads(DURATIONS.read_text())
    root = Path(__file__).parents[1]
    assert len(saved) > 50 and all((root / module).is_file() for module in saved)
