"""Every module of the package belongs to a layer, and a layer imports only the layers below it:

    base < families < runtime < limits, cluster, arm < build side | evaluate < entry points (api, cli)

The build side and evaluation never import each other, nor the evaluation's measuring and reporting. Read from the
source (every ``import`` of every module, lazy ones inside functions and those under ``TYPE_CHECKING`` too), so a new
import across a boundary fails here, not in a review."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "yolo_optimize"
# a module or subpackage (its first name under the package) -> its layer
LAYER_OF = {
    **dict.fromkeys(("errors", "files", "host", "versions", "images", "formats", "artifact", "declaring"), "base"),
    **dict.fromkeys(("families", "checkpoint", "metadata"), "families"),
    "runtime": "runtime", "limits": "limits", "cluster": "cluster", "arm": "arm",
    **dict.fromkeys(("building", "export", "optimize"), "build"),
    "evaluation": "evaluate",
    **dict.fromkeys(("__init__", "__main__", "api", "cli"), "entry"),
}
BELOW = {  # a layer -> the layers it may import besides itself
    "base": set(),
    "families": {"base"},
    "runtime": {"base", "families"},
    "limits": {"base", "families", "runtime"},
    "cluster": {"base"},
    "arm": {"base", "families", "runtime"},
    "build": {"base", "families", "runtime", "limits", "cluster", "arm"},
    "evaluate": {"base", "families", "runtime", "limits", "cluster", "arm"},
    "entry": {"base", "families", "runtime", "limits", "cluster", "arm", "build", "evaluate"},
}


def imports_of(path: Path) -> set[str]:
    """The yolo_optimize parts (first name after the package) a module imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "yolo_optimize":
            found |= {alias.name for alias in node.names}  # from yolo_optimize import api
            continue
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        found |= {name.split(".")[1] for name in names if name.startswith("yolo_optimize.") and name.count(".")}
    return found


def part_of(path: Path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_of_the_package_has_a_layer() -> None:
    assert not sorted({part_of(p) for p in MODULES} - set(LAYER_OF)), "add the new module to LAYER_OF"


@pytest.mark.parametrize("layer", sorted(BELOW))
def test_a_layer_imports_only_the_layers_below_it(layer: str) -> None:
    modules = [p for p in MODULES if LAYER_OF.get(part_of(p)) == layer]
    assert modules, f"no module in layer {layer}"
    crossing = {}
    for path in modules:
        name = str(path.relative_to(PACKAGE))
        above = {part for part in imports_of(path)
                 if LAYER_OF.get(part, "unknown") not in BELOW[layer] | {layer}}
        if above:
            crossing[name] = sorted(f"{part} ({LAYER_OF.get(part, 'unknown')})" for part in above)
    assert not crossing


@pytest.mark.parametrize(("side", "other"), [("measuring", "reporting"), ("reporting", "measuring")])
def test_the_evaluations_measuring_and_reporting_never_import_each_other(side: str, other: str) -> None:
    """What both need (the typed results, model facts, options) sits beside them in ``evaluation/``."""
    modules = sorted((PACKAGE / "evaluation" / side).glob("*.py"))
    assert len(modules) > 5
    crossing = {path.name: sorted(name for name in dotted_imports(path)
                                  if name.startswith(f"yolo_optimize.evaluation.{other}")) for path in modules}
    assert not {name: found for name, found in crossing.items() if found}


def dotted_imports(path: Path) -> set[str]:
    """Every module a file imports, as its dotted name (``from a import b`` as ``a.b``), anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return found


def test_no_two_modules_of_the_package_import_each_other() -> None:
    """Import cycles between the package's top-level modules (artifact <-> checkpoint was one)."""
    graph = {part_of(p): set() for p in MODULES}
    for path in MODULES:
        graph[part_of(path)] |= imports_of(path) - {part_of(path)}
    pairs = sorted({tuple(sorted((a, b))) for a, imported in graph.items() for b in imported if a in graph.get(b, ())})
    assert not pairs


def module_name(path: Path, package: Path = PACKAGE) -> str:
    """A module's dotted name (a package's ``__init__`` as the package)."""
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_cycles(paths: list[Path], package: Path = PACKAGE) -> list[list[str]]:
    """The modules of ``paths`` that reach each other through their imports (any length of chain), grouped: the
    strongly connected components of the import graph with more than one module (Tarjan's algorithm)."""
    names = {module_name(path, package): path for path in paths}
    graph = {name: sorted(found for found in dotted_imports(path) if found in names and found != name)
             for name, path in names.items()}
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(name: str) -> None:
        order[name] = low[name] = len(order)
        stack.append(name)
        for other in graph[name]:
            if other not in order:
                visit(other)
                low[name] = min(low[name], low[other])
            elif other in stack:
                low[name] = min(low[name], order[other])
        if low[name] == order[name]:
            component = stack[stack.index(name):]
            del stack[stack.index(name):]
            if len(component) > 1:
                cycles.append(sorted(component))

    for name in graph:
        if name not in order:
            visit(name)
    return cycles


def test_no_modules_of_the_package_import_each_other_through_any_chain() -> None:
    """Cycles between modules, not only between top-level parts (families/detection.py, nms.py and modules.py
    imported each other until the NMS arithmetic moved to suppression.py): each module can be read after the ones it
    imports."""
    assert not import_cycles(MODULES)


def test_the_cycle_check_finds_a_chain_of_three(tmp_path: Path) -> None:
    package = tmp_path / "yolo_optimize"
    package.mkdir()
    for name, imported in (("a", "b"), ("b", "c"), ("c", "a"), ("d", "a")):
        (package / f"{name}.py").write_text(f"def f():\n    from yolo_optimize.{imported} import x\n")
    assert import_cycles(sorted(package.glob("*.py")), package) == [["yolo_optimize.a", "yolo_optimize.b",
                                                                      "yolo_optimize.c"]]


def test_the_check_sees_lazy_imports(tmp_path: Path) -> None:
    """A function-level import counts as much as a module-level one."""
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from yolo_optimize.evaluation.measuring.measure import x\n"
                      "    import yolo_optimize.runtime.runners\n    from yolo_optimize import api\n")
    assert imports_of(module) == {"evaluation", "runtime", "api"}


def test_the_package_root_holds_at_most_14_modules() -> None:
    """The root shows the architecture: a module that belongs to a side or a runtime lives in its subpackage."""
    assert len(list(PACKAGE.glob("*.py"))) <= 14, sorted(p.name for p in PACKAGE.glob("*.py"))
