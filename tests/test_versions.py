"""The versions results record: this package's own is pyproject's, and every tool's comes from its metadata."""

from __future__ import annotations

from pathlib import Path

import yolo_optimize
from yolo_optimize.declaring import read_config
from yolo_optimize.versions import __version__, tool_versions


def test_the_package_version_is_pyprojects_and_the_one_every_result_records() -> None:
    project = read_config(Path(__file__).resolve().parents[1] / "pyproject.toml")["project"]
    assert __version__ == project["version"] == yolo_optimize.__version__
    found = tool_versions(("onnx", "no-such-tool"))
    assert found["yolo-optimize"] == __version__ and found["no-such-tool"] == "absent" and found["onnx"][0].isdigit()
