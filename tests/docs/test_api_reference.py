"""The site's API reference (docs/api/) names every public name.

For `grad_reverse`, `grad_reverse.adaptation` and `grad_reverse.serving` the
public names are their `__all__` (the adaptation page renders its `__all__` by
itself: names added there need no edit of the page); `grad_reverse.options` has none, so there they are its module-level
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

from helpers.api_pages import (
    API,
    DIRECTIVE,
    PACKAGE,
    ROOT,
    directives,
    dunder_all,
    listed,
    module_file,
    parse,
    public_names,
    top_level_names,
)

PAGES = {
    "grad_reverse": API / "grad_reverse.md",
    "grad_reverse.adaptation": API / "adaptation.md",
    "grad_reverse.serving": API / "serving.md",
    "grad_reverse.options": API / "options.md",
}
HEADING = re.compile(r"^## `([\w.]+)`[ \t]*$", re.MULTILINE)


def test_the_name_readers_find():
    assert {"grad_reverse", "GradReverse", "DANN", "CDAN", "MDD", "serving"} <= public_names("grad_reverse")
    assert {"make_servable", "export_serving", "check_serving", "SERVING_TAG"} <= public_names("grad_reverse.serving")
    assert {"set_backward", "BACKWARD_VARIABLE"} <= public_names("grad_reverse.options")
    assert HEADING.findall("## `grad_reverse.DANN`\n") == ["grad_reverse.DANN"]


@pytest.mark.parametrize("module", sorted(PAGES))
def test_the_api_page_has_a_section_for_every_public_name(module):
    """A "## `NAME`" section, or (for a page that follows `__all__` by itself) the name's own entry."""
    headed = set(HEADING.findall(PAGES[module].read_text(encoding="utf-8")))
    headed |= {f"{module}.{name}" for name in set.union(*auto_rendered(module, PAGES[module]))}
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


# --- automatic pages, the methods the manuals call, private modules -------------------------


def excluded_by(filters: list, name: str) -> bool:
    """Whether mkdocstrings' `filters` (regexes; `!` excludes) leave `name` out."""
    return any(f.startswith("!") and re.search(f[1:], name) for f in filters)


def auto_rendered(module: str, page: Path) -> tuple:
    """`(rendered, excluded)`: the `__all__` names a `::: module` directive with members renders
    by itself, and those its filters leave out. A name that is also a submodule's is left out of
    both: the generator takes the submodule (it needs a section of its own)."""
    for target, options in directives(page):
        if target == module and options.get("members", "true") != "false":
            filters = listed(options["filters"]) if "filters" in options else ["!^_"]
            names = [n for n in dunder_all(parse(module)) if not module_file(f"{module}.{n}")]
            return {n for n in names if not excluded_by(filters, n)}, {n for n in names if excluded_by(filters, n)}
    return set(), set()


def test_an_automatic_page_covers_its_modules_all_and_sends_what_it_leaves_out_elsewhere():
    rendered, excluded = auto_rendered("grad_reverse.adaptation", PAGES["grad_reverse.adaptation"])
    assert {"paired_dataset", "select_by_reverse_validation", "ScaledLearningRate"} <= rendered
    headed = set(HEADING.findall(PAGES["grad_reverse"].read_text(encoding="utf-8")))
    missing = sorted(f"grad_reverse.{name}" for name in excluded if f"grad_reverse.{name}" not in headed)
    assert not missing, f"left out of the adaptation page, but no section on grad_reverse's: {missing}"
    # Each name the page renders by itself must be one the generator can find: defined in the
    # module, or imported into it from a module of the package that defines it.
    # (an import under a top-level `if`, such as a TensorFlow-only name's, counts: the generator reads it)
    tree = parse("grad_reverse.adaptation")
    top = [*tree.body, *(inner for node in tree.body if isinstance(node, ast.If) for inner in node.body)]
    sources = {
        alias.asname or alias.name: node.module
        for node in top
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    for name in rendered:
        assert name in sources, f"grad_reverse.adaptation.{name}: not imported into the module"
        assert name in top_level_names(parse(sources[name]), unpacked=False), f"{sources[name]} defines no {name}"


def called_methods() -> set:
    """Method names called in the README's and docs/*.md's code blocks (`model.fit(...)`)."""
    names = set()
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in re.findall(r"^```(?:python)?\n(.*?)^```", page.read_text(encoding="utf-8"), re.M | re.S):
            names.update(re.findall(r"\.([a-z_]\w*)\(", block))
    return names


def package_classes() -> dict:
    """`{class name: (module, ast.ClassDef)}` of every class defined at a module's top level."""
    classes = {}
    for path in sorted((PACKAGE / "grad_reverse").rglob("*.py")):
        dotted = ".".join(path.relative_to(PACKAGE).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                classes.setdefault(node.name, (dotted, node))
    return classes


def own_methods(node: ast.ClassDef) -> set:
    return {n.name for n in node.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")}


def every_method(name: str, classes: dict) -> set:
    """The public methods of class `name`, its bases' in the package included."""
    _, node = classes[name]
    methods = own_methods(node)
    for base in node.bases:
        if isinstance(base, ast.Name) and base.id in classes:
            methods |= every_method(base.id, classes)
    return methods


def test_every_method_the_manuals_call_has_an_entry_in_each_public_class_that_has_it():
    classes = package_classes()
    public = set().union(*(public_names(module) for module in PAGES))
    rendered: dict = {}
    for page in sorted(API.glob("*.md")):
        for target, options in directives(page):
            name = target.rsplit(".", 1)[-1]
            if name in classes and name in public and classes[name][0] == target.rsplit(".", 1)[0]:
                inherited = listed(options["inherited_members"]) if "inherited_members" in options else []
                rendered[name] = own_methods(classes[name][1]) | set(inherited)
    methods = {m for c in rendered for m in every_method(c, classes)}
    called = called_methods() & methods
    assert {"fit", "compile", "build_optimizers", "set_schedule_steps", "train_step"} <= called
    missing = sorted(
        f"{c}.{m}" for c in rendered for m in called if m in every_method(c, classes) and m not in rendered[c]
    )
    assert not missing, f"methods the manuals call, without an entry (inherited_members?): {missing}"


def test_a_class_signature_is_its_constructors():
    # DANN, CDAN and MDD take their constructor from a base class: without this, no signature.
    assert re.search(r"^\s+merge_init_into_class: true\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)


def private_modules() -> set:
    """The package's private modules (`_keras`, `_native`, ...), and its compiled `_kernels`."""
    names = {p.stem if p.is_file() else p.name for p in (PACKAGE / "grad_reverse").iterdir()}
    return {n for n in names if n.startswith("_") and not n.startswith("__")} | {"_kernels"}


def user_facing_texts() -> dict:
    """The README, the manuals under "Using it" and the docstrings the API pages render."""
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    using = nav[nav.index("  - Using it:") : nav.index("  - Building:")]
    texts = {"README.md": (ROOT / "README.md").read_text(encoding="utf-8")}
    for page in re.findall(r"- ([\w-]+\.md)", using):
        texts[f"docs/{page}"] = (ROOT / "docs" / page).read_text(encoding="utf-8")
    for page in sorted(API.glob("*.md")):
        for target, options in directives(page):
            parts = target.split(".")
            split = next(i for i in range(len(parts), 0, -1) if module_file(".".join(parts[:i])))
            tree = parse(".".join(parts[:split]))
            nodes = [tree] if options.get("members") == "false" else list(ast.walk(tree))
            if split < len(parts):
                nodes = [
                    n
                    for top in tree.body
                    if getattr(top, "name", None) == parts[split]
                    for n in (ast.walk(top) if isinstance(top, ast.ClassDef) else [top])
                ]
            for node in nodes:
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and ast.get_docstring(node):
                    texts[f"{target} ({getattr(node, 'name', 'module')})"] = ast.get_docstring(node)
    return texts


def test_no_user_facing_page_or_rendered_docstring_names_a_private_module():
    pattern = re.compile(
        r"grad_reverse\.(" + "|".join(private_modules()) + r")\b|`(" + "|".join(private_modules()) + r")`"
    )
    found = [f"{where}: {m.group(0)}" for where, text in user_facing_texts().items() for m in pattern.finditer(text)]
    assert not found, "private modules named where users read:\n" + "\n".join(found)
