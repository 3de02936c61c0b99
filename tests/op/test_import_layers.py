"""The package's modules import one another in one direction: no cycle.

Read from the source (the AST, so imports inside functions count too, and
nothing is imported): an edge goes from a module to each module of the
package it names in an `import` or `from ... import`, including `from
package import submodule`. The implicit import of a module's parent
packages is not an edge: Python runs a package's `__init__` first whoever
asks, so it orders nothing. The layers this keeps (docs/development.md,
python/grad_reverse/_native/__init__.py): settings, the native library, the
backward and XLA choices, `ops`, and `options` on top, which nothing inside
imports.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "grad_reverse"
ROOT = Path(__file__).resolve().parents[2] / "python" / PACKAGE


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules(root: Path = ROOT) -> dict[str, Path]:
    return {module_name(path, root): path for path in sorted(root.rglob("*.py"))}


def imported_modules(tree: ast.AST, module: str, is_package: bool, modules: dict[str, Path]) -> set[str]:
    """The package's modules that the import statements anywhere in `tree`
    (a module's source) name: `import a.b` names a.b; `from a import b` names
    the module a.b if there is one, else a (b is a name defined in a)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, module, is_package)
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    # A parent package runs before any of its modules, whoever imports it: no edge.
    return {name for name in found if name in modules and name != module and not module.startswith(name + ".")}


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The module a `from` statement imports from, relative ones resolved."""
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    if not is_package:
        parts.pop()  # a module's `.` is its package
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Each module of the package with the package's modules it imports."""
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        graph[name] = imported_modules(tree, name, path.name == "__init__.py", modules)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return path[path.index(target) :] + [target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_reader_finds_imports_inside_functions_and_cycles(tmp_path):
    package = tmp_path / PACKAGE
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "low.py").write_text("import os\n")
    (package / "sub" / "mid.py").write_text("from grad_reverse import low\n")
    (package / "top.py").write_text("def f():\n    from grad_reverse.sub.mid import x\n    from . import low\n")
    modules = package_modules(package)
    graph = import_graph(modules)
    assert graph["grad_reverse.top"] == {"grad_reverse.sub.mid", "grad_reverse.low"}
    assert graph["grad_reverse.sub.mid"] == {"grad_reverse.low"}
    assert find_cycle(graph) is None
    (package / "low.py").write_text("def g():\n    from .sub import mid\n")
    cycle = find_cycle(import_graph(package_modules(package)))
    assert cycle == ["grad_reverse.low", "grad_reverse.sub.mid", "grad_reverse.low"]


def test_the_package_has_no_import_cycle():
    modules = package_modules()
    assert f"{PACKAGE}.ops" in modules and f"{PACKAGE}._native.settings" in modules, "the reader finds the package"
    cycle = find_cycle(import_graph(modules))
    assert cycle is None, f"an import cycle among the package's modules: {' -> '.join(cycle)}"


def test_the_settings_import_nothing_of_the_package():
    assert not import_graph(package_modules())[f"{PACKAGE}._native.settings"]


def test_nothing_inside_the_package_imports_options():
    modules = package_modules()
    importers = sorted(name for name, targets in import_graph(modules).items() if f"{PACKAGE}.options" in targets)
    assert not importers, f"options is the users' facade; these modules import it: {importers}"
