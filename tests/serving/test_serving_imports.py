"""How the serving modules import each other: no circle, and a command line that needs only argparse."""

import ast
import subprocess
import sys
from pathlib import Path

from grad_reverse import serving
from grad_reverse.serving import cli

SERVING_DIR = Path(serving.__file__).parent
PACKAGE = "grad_reverse.serving"


def imported_modules(path: Path) -> set:
    """The serving modules `path` imports anywhere in it, functions included (a lazy import still closes a circle)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            # `from grad_reverse.serving import rewrite` imports the module rewrite.
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    modules = {path.stem for path in SERVING_DIR.glob("*.py")} - {"__init__", "__main__"}
    return {name[len(PACKAGE) + 1 :] for name in names if name.startswith(PACKAGE + ".")} & modules


def import_graph() -> dict:
    # The package's __init__ is left out: importing any submodule runs it
    # first, so its imports close no circle (it loads submodules lazily).
    return {
        path.stem: imported_modules(path)
        for path in sorted(SERVING_DIR.glob("*.py"))
        if path.stem not in ("__init__", "__main__")
    }


def find_circle(graph: dict) -> list:
    """One import circle [a, b, ..., a] of `graph`, or [] if there is none."""
    state = {}  # module -> "open" while on the current path, "done" after

    def visit(module: str, path: list) -> list:
        state[module] = "open"
        for target in sorted(graph.get(module, ())):
            if state.get(target) == "open":
                return path[path.index(target) :] + [module, target] if target in path else [module, target]
            if target not in state:
                found = visit(target, path + [module])
                if found:
                    return found
        state[module] = "done"
        return []

    for module in sorted(graph):
        if module not in state:
            found = visit(module, [])
            if found:
                return found
    return []


def test_find_circle_finds_one():
    assert find_circle({"check": {"cli"}, "cli": {"check"}}) == ["check", "cli", "check"]
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_serving_modules_import_no_circle():
    graph = import_graph()
    assert {"cli", "check", "constants", "servable"} <= set(graph)
    assert "constants" in graph["cli"] and "constants" in graph["check"]  # what made the circle, below both
    assert graph["constants"] == set()
    assert find_circle(graph) == []


def test_serving_cli_module_needs_only_argparse(tmp_path):
    """The package CLI registers the serving commands without importing TensorFlow.

    cli.py and what it imports are loaded from their files under empty
    package stand-ins, so the package's own __init__ (which loads
    TensorFlow) does not run; anything cli.py imports beyond them shows.
    """
    code = """
import argparse, importlib, sys, types
serving_dir = sys.argv[1]
for name, path in (("grad_reverse", []), ("grad_reverse.serving", [serving_dir])):
    sys.modules[name] = types.ModuleType(name)
    sys.modules[name].__path__ = path
module = importlib.import_module("grad_reverse.serving.cli")
parser = argparse.ArgumentParser()
module.add_cli(parser.add_subparsers(dest="command"))
args = parser.parse_args(["make-servable", "a", "b", "--overwrite", "--no-verify", "--allow-unverified"])
assert (args.src, args.dst, args.overwrite, args.verify, args.allow_unverified) == ("a", "b", True, False, True), args
assert parser.parse_args(["check-serving", "p"]).tags == "serve"
print(sorted(m for m in sys.modules if m.split(".")[0] in ("tensorflow", "numpy", "grad_reverse")))
"""
    result = subprocess.run(
        [sys.executable, "-c", code, str(Path(cli.__file__).parent)], capture_output=True, text=True, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    loaded = result.stdout.strip()
    assert (
        loaded
        == "['grad_reverse', 'grad_reverse.serving', 'grad_reverse.serving.cli', 'grad_reverse.serving.constants']"
    )
