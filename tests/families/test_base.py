"""The family interface's checks that need no family package imported: a checkpoint's class names are read against
the installed packages' sources."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from tests.conftest import WEIGHTS
from yolo_optimize.families.base import source_names

MODULES_CHECKPOINTS_NAME = ("yolov5.models.common", "yolov5.models.yolo", "yolov7_package.models.common",
                            "yolov7_package.models.yolo", "ultralytics.nn.tasks", "ultralytics.nn.modules.head",
                            "ultralytics.nn.modules.block", "ultralytics.nn.modules.conv", "ultralytics.utils",
                            "torchvision.models.resnet")


@pytest.mark.parametrize("module", MODULES_CHECKPOINTS_NAME)
def test_the_class_names_read_from_a_module_source_are_those_importing_it_binds(module: str) -> None:
    """Star imports of the package's own modules (yolov5's models.yolo), aliases (``Model = DetectionModel``) and
    tuple assignments included."""
    imported = {name for name in dir(importlib.import_module(module)) if name[:1].isupper()}
    assert {name for name in source_names(module) if name[:1].isupper()} == imported


def test_a_module_without_source_binds_nothing() -> None:
    assert source_names("yolov5.models.no_such_module") == source_names("no_such_package.models") == frozenset()


def test_recognizing_a_checkpoint_imports_neither_torch_nor_a_family_package() -> None:
    """Planning a build of the official yolov5n.pt knows its family from the pickle alone: 0.5 s instead of 20 s of
    imports (torch, yolov5, yolov7_package) in the process that only plans and waits for its workers."""
    script = ("import sys; from yolo_optimize.checkpoint import resolve_source; "
              f"print(resolve_source({str(WEIGHTS)!r}).family); "
              "print(sorted(m for m in ('torch', 'yolov5', 'yolov7_package', 'ultralytics', 'torchvision') "
              "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split("\n")[:2] == ["yolov5", "[]"], done.stdout + done.stderr
