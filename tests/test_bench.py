"""Every benchmark still runs: each script of bench/ (the suite and the archive) imports and answers ``--help``, in
this process (a broken import, a renamed package function or a bad option fails here, not months later on a lent
machine); and the harness's with/without rounds take turns."""

from __future__ import annotations

import contextlib
import importlib
import io
import re
import sys
from pathlib import Path

import pytest

from bench.harness import by_name, paired_rounds

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(".".join(path.relative_to(ROOT).with_suffix("").parts) for path in (ROOT / "bench").rglob("*.py")
                 if path.name not in ("__init__.py", "harness.py"))


@pytest.mark.parametrize("module", SCRIPTS)
def test_each_script_answers_help(module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", [module, "--help"])
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), pytest.raises(SystemExit) as exited:
        importlib.import_module(module).main()
    assert exited.value.code == 0
    assert printed.getvalue().startswith("usage:")


def test_the_suite_is_the_readme_s_benchmarks() -> None:
    """bench/README.md's table names every suite script, each runnable as a module."""
    readme = (ROOT / "bench" / "README.md").read_text()
    suite = sorted(path.stem for path in (ROOT / "bench").glob("*.py") if path.stem not in ("__init__", "harness"))
    assert suite and all(re.search(rf"`python -m bench\.{name}[` ]", readme) for name in suite)


def test_paired_rounds_take_turns_first() -> None:
    """Each round runs every variant once, and which goes first rotates, so neither side always has the host first."""
    order: list[str] = []
    found = paired_rounds(["without", "with"], 3, lambda side: order.append(side) or len(order))
    assert order == ["without", "with", "with", "without", "without", "with"]
    assert found == [[1, 4, 5], [2, 3, 6]]


def test_a_function_of_an_imported_module_is_handed_on_as_it_is() -> None:
    assert by_name(paired_rounds) is paired_rounds
