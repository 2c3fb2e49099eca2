"""The package's layers import only downward: families -> export/optimize (the build side) -> runtime <- evaluate;
cluster (Ray plumbing) below both sides.

Read from the source (every ``import`` of every module, lazy ones inside functions too), so a new import across a
boundary fails here, not in a review."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "yolo_optimize"
BUILD_SIDE = ("export", "optimize", "pipeline", "dag", "builder", "parity", "config", "stage", "executor",
              "ray_executor")
# a layer (a subpackage or a module) -> the parts of the package it must never import
FORBIDDEN = {
    "families": ("export", "optimize", "runtime", "evaluate", "machine", *BUILD_SIDE, "api", "cli"),
    "runtime": ("evaluate", "machine", *BUILD_SIDE, "api", "cli"),
    "machine": ("evaluate", *BUILD_SIDE, "api", "cli"),
    "cluster": ("evaluate", "runtime", "machine", *BUILD_SIDE, "api", "cli"),
    "evaluate": ("export", "optimize", "pipeline", "dag", "builder", "parity", "stage", "api", "cli"),
    **{side: ("evaluate", "api", "cli") for side in BUILD_SIDE},
}
# The one crossing allowed: ``yolo_optimize.evaluate`` is also the API's function, so the subpackage calls it.
ALLOWED = {"evaluate/__init__.py": {"api"}}


def imports_of(path: Path) -> set[str]:
    """The yolo_optimize parts (first name after the package) a module imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        found |= {name.split(".")[1] for name in names if name.startswith("yolo_optimize.") and name.count(".")}
    return found


def layer_of(path: Path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_never_imports_the_layers_above_it(layer: str) -> None:
    modules = [p for p in PACKAGE.rglob("*.py") if layer_of(p) == layer]
    assert modules, f"no module in layer {layer}"
    crossing = {str(p.relative_to(PACKAGE)): sorted(imports_of(p) & set(FORBIDDEN[layer])
                                                    - ALLOWED.get(str(p.relative_to(PACKAGE)), set())) for p in modules}
    assert not {module: parts for module, parts in crossing.items() if parts}


def test_the_check_sees_lazy_imports(tmp_path: Path) -> None:
    """A function-level import counts as much as a module-level one."""
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from yolo_optimize.evaluate.measure import x\n"
                      "    import yolo_optimize.runtime.runners\n")
    assert imports_of(module) == {"evaluate", "runtime"}
