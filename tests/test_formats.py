"""The format table's references resolve: every "module:Class" a built-in row names is imported here, as the build
and evaluation import it when first used, so a renamed stage, runner or kernels module fails here, not in a build."""

from __future__ import annotations

from dataclasses import fields
from importlib import import_module

import pytest

from yolo_optimize.building.stage import Stage
from yolo_optimize.formats import SNIPPETS, Format, Runtime, Step, formats, imported
from yolo_optimize.runtime.runners.base import Runner


@pytest.mark.parametrize("row", formats().values(), ids=lambda row: row.target)
def test_every_stage_and_runner_a_row_names_resolves(row: Format) -> None:
    assert issubclass(imported(row.runner), Runner)
    for step in row.steps:
        stage = imported(step.stage)
        assert issubclass(stage, Stage) and callable(stage.planned)


@pytest.mark.parametrize("runtime", dict.fromkeys(row.runtime for row in formats().values() if row.runtime.kernels),
                         ids=lambda runtime: runtime.package)
def test_every_kernels_module_a_runtime_names_has_what_optimize_info_calls(runtime: Runtime) -> None:
    kernels = import_module(runtime.kernels)
    assert callable(kernels.unavailable_reason) and callable(kernels.kernel)


def test_every_snippet_file_is_in_a_row() -> None:
    """A snippet file no row reads is dead: each one's text is in some row's snippet."""
    snippets = [text for row in formats().values() for text in (row.snippet, row.throughput_snippet)]
    for path in SNIPPETS.glob("*.txt"):
        assert any(path.read_text().removesuffix("\n") in text for text in snippets), path.name


@pytest.mark.parametrize("record", [Format, Step, Runtime])
def test_rows_are_written_by_keyword(record: type) -> None:
    assert all(field.kw_only for field in fields(record))
