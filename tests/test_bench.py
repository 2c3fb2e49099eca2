"""Every benchmark still runs: each script of bench/ (the suite and the archive) imports and answers ``--help``, in
this process (a broken import, a renamed package function or a bad option fails here, not months later on a lent
machine); no script replaces a package function at run time (a study's variant is a hook the package offers); and
the harness's with/without rounds take turns."""

from __future__ import annotations

import ast
import contextlib
import importlib
import io
import re
import sys
from pathlib import Path

import pytest

from bench.harness import by_name, by_round, paired_rounds

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


def package_names(tree: ast.AST) -> set[str]:
    """The names a file binds to yolo_optimize's modules and their members, wherever it imports them."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.asname or alias.name.split(".")[0] for alias in node.names
                      if alias.name.split(".")[0] == "yolo_optimize"}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "yolo_optimize":
            found |= {alias.asname or alias.name for alias in node.names}
    return found


def root_name(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def package_patches(source: str) -> list[int]:
    """The lines of ``source`` that assign to an attribute of something imported from yolo_optimize (``module.X =
    ...``, ``Class.method = ...``, ``setattr(module, ...)``)."""
    tree = ast.parse(source)
    names = package_names(tree)
    lines = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Delete) else [node.target]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr"):
            targets = [ast.Attribute(node.args[0], "_", ast.Store())] if node.args else []
        attributes = [t for target in targets for t in ast.walk(target) if isinstance(t, ast.Attribute)]
        if any(root_name(attribute) in names for attribute in attributes):
            lines.append(node.lineno)
    return lines


def test_no_script_replaces_a_package_function_at_run_time() -> None:
    """A study that needs a variant of the package's behaviour asks the package for a hook (e.g. the images per
    throughput request, ``Timing.request_batch``) instead of assigning to its modules in a child process."""
    patched = {str(path.relative_to(ROOT)): lines for path in sorted((ROOT / "bench").rglob("*.py"))
               if (lines := package_patches(path.read_text()))}
    assert patched == {}
    assert package_patches("from yolo_optimize.runtime.runners import onnxruntime\n"
                           "onnxruntime.THROUGHPUT_REQUEST_BATCH = 4\n") == [2]
    assert package_patches("import yolo_optimize.host.cpu\nsetattr(yolo_optimize.host.cpu, 'cpu_model', str)\n") == [2]
    assert package_patches("from yolo_optimize.metadata import ArtifactMetadata\nmetadata = ArtifactMetadata\n") == []


def test_paired_rounds_take_turns_first() -> None:
    """Each round runs every variant once, and which goes first rotates, so neither side always has the host first;
    ``by_round`` reads the results back round by round."""
    order: list[str] = []
    found = paired_rounds(["without", "with"], 3, lambda side: order.append(side) or len(order))
    assert order == ["without", "with", "with", "without", "without", "with"]
    assert found == [[1, 4, 5], [2, 3, 6]]
    assert by_round(["without", "with"], found) == [{"without": 1, "with": 2}, {"without": 4, "with": 3},
                                                    {"without": 5, "with": 6}]


def test_a_function_of_an_imported_module_is_handed_on_as_it_is() -> None:
    assert by_name(paired_rounds) is paired_rounds
