"""The whole tree (package, tests, benchmarks) passes ruff with the rules pyproject.toml chooses; the package and the
benchmarks pass mypy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_tree_passes_ruff() -> None:
    ruff = Path(sys.executable).parent / "ruff"
    if not ruff.exists():
        pytest.skip(f"ruff is not installed beside {sys.executable} (pip install -e '.[dev]')")
    result = subprocess.run([str(ruff), "check", "--no-cache", "--output-format", "concise", str(ROOT)],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_package_passes_mypy(tmp_path: Path) -> None:
    """mypy at its defaults on the package and bench/ (pyproject.toml's [tool.mypy]), every ``type: ignore`` left still
    needed; its cache outside the tree."""
    mypy = Path(sys.executable).parent / "mypy"
    if not mypy.exists():
        pytest.skip(f"mypy is not installed beside {sys.executable} (pip install -e '.[dev]')")
    result = subprocess.run([str(mypy), "--cache-dir", str(tmp_path), "--no-error-summary"], capture_output=True,
                            text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
