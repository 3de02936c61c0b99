"""Reading the site's API pages and the package's sources as the generator
does (static analysis, no import): shared by tests/docs/test_api_reference.py
and tests/docs/test_api_parameters.py."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python"
API = ROOT / "docs" / "api"
# `::: target` on a line of its own (MULTILINE, so `findall` reads a whole page).
DIRECTIVE = re.compile(r"^::: ([\w.]+)[ \t]*$", re.MULTILINE)
OPTION = re.compile(r"^[ \t]+(\w+):[ \t]*(.*?)[ \t]*$")


def module_file(dotted: str):
    """The source file of the package's module `dotted`, or None."""
    base = PACKAGE.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@functools.cache
def parse(dotted: str) -> ast.Module:
    return ast.parse(module_file(dotted).read_text(encoding="utf-8"))


def directives(page: Path) -> list:
    """`(target, {option: raw value})` of each `::: target` directive of `page`."""
    found, lines = [], page.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        match = DIRECTIVE.match(line)
        if not match:
            continue
        options = {}
        for following in lines[i + 1 :]:
            if following.strip().startswith("#"):
                continue
            option = OPTION.match(following)
            if not option:
                break
            options[option.group(1)] = option.group(2)
        found.append((match.group(1), options))
    return found


def listed(raw: str) -> list:
    """A YAML flow list of names or strings as a directive's option holds it."""
    raw = raw.strip()
    assert raw.startswith("[") and raw.endswith("]"), raw
    return [item.strip().strip("\"'") for item in raw[1:-1].split(",") if item.strip()]


def top_level_names(tree: ast.Module, unpacked: bool = True) -> set:
    """Names defined at the top level; `unpacked=False` leaves out `A, B = ...`
    (public, but mkdocstrings' static analysis does not see them)."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Tuple) and not unpacked:
                    continue
                for element in target.elts if isinstance(target, ast.Tuple) else [target]:
                    if isinstance(element, ast.Name):
                        names.add(element.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("grad_reverse"):
            # Re-exported from inside the package (options' names from its settings):
            # mkdocstrings follows such an alias to where it is defined.
            names.update(alias.asname or alias.name for alias in node.names)
    return names


def dunder_all(tree: ast.Module) -> list:
    """`__all__`'s strings; `*sorted(TABLE)` and `*TABLE` add a dict's keys or a list's items."""
    tables = {
        node.targets[0].id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
    }
    value = tables.get("__all__")
    assert isinstance(value, ast.List), "__all__ is not a list literal"
    names = []
    for element in value.elts:
        if isinstance(element, ast.Constant):
            names.append(element.value)
            continue
        assert isinstance(element, ast.Starred), ast.dump(element)
        inner = element.value
        if isinstance(inner, ast.Call):
            inner = inner.args[0]
        table = tables[inner.id]
        names += [key.value for key in (table.keys if isinstance(table, ast.Dict) else table.elts)]
    return names


def public_names(module: str) -> set:
    """`__all__`'s names, or where a module has none, its top-level names without a leading underscore."""
    tree = parse(module)
    has_all = any(
        isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
        for node in tree.body
    )
    if not has_all:
        return {name for name in top_level_names(tree) if not name.startswith("_")}
    return set(dunder_all(tree))
