"""The site's API reference (docs/api/) names every public name.

For `grad_reverse` and `grad_reverse.serving` the public names are their
`__all__`; `grad_reverse.options` has none, so there they are its module-level
names without a leading underscore. All are read from the source by static
analysis, as the site's generator reads it (nothing is imported). Each must
have a section headed by the name a user writes (`## \\`grad_reverse.DANN\\``),
and every `::: dotted.path` directive of the pages must name a module of the
package and a name defined at its top level, which is what mkdocstrings
renders (`mkdocs build --strict` in .ci/run fails on one it cannot find, too).
"""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python"
API = ROOT / "docs" / "api"
PAGES = {
    "grad_reverse": API / "grad_reverse.md",
    "grad_reverse.serving": API / "serving.md",
    "grad_reverse.options": API / "options.md",
}
HEADING = re.compile(r"^## `([\w.]+)`[ \t]*$", re.MULTILINE)
DIRECTIVE = re.compile(r"^::: ([\w.]+)[ \t]*$", re.MULTILINE)


def module_file(dotted: str):
    """The source file of the package's module `dotted`, or None."""
    base = PACKAGE.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def parse(dotted: str) -> ast.Module:
    return ast.parse(module_file(dotted).read_text(encoding="utf-8"))


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


def test_the_name_readers_find():
    assert {"grad_reverse", "GradReverse", "DANN", "CDAN", "MDD", "serving"} <= public_names("grad_reverse")
    assert {"make_servable", "export_serving", "check_serving", "SERVING_TAG"} <= public_names("grad_reverse.serving")
    assert {"set_backward", "BACKWARD_VARIABLE"} <= public_names("grad_reverse.options")
    assert HEADING.findall("## `grad_reverse.DANN`\n") == ["grad_reverse.DANN"]


@pytest.mark.parametrize("module", sorted(PAGES))
def test_the_api_page_has_a_section_for_every_public_name(module):
    headed = set(HEADING.findall(PAGES[module].read_text(encoding="utf-8")))
    missing = sorted(f"{module}.{name}" for name in public_names(module) if f"{module}.{name}" not in headed)
    assert not missing, f"{PAGES[module].relative_to(ROOT)} has no '## `NAME`' section for: {missing}"


def test_every_directive_names_an_object_the_generator_can_find():
    problems = []
    for page in sorted(API.glob("*.md")):
        for target in DIRECTIVE.findall(page.read_text(encoding="utf-8")):
            parts = target.split(".")
            # The longest prefix that is a module, then (at most) one top-level name in it.
            split = next((i for i in range(len(parts), 0, -1) if module_file(".".join(parts[:i]))), None)
            if split is None:
                problems.append(f"{page.name}: {target}: no such module")
            elif len(parts) - split > 1:
                problems.append(f"{page.name}: {target}: names a member of a member (document the owner)")
            elif split < len(parts) and parts[split] not in top_level_names(
                parse(".".join(parts[:split])), unpacked=False
            ):
                problems.append(f"{page.name}: {target}: {'.'.join(parts[:split])} defines no {parts[split]}")
    assert not problems, "API directives that mkdocstrings cannot resolve:\n" + "\n".join(problems)
