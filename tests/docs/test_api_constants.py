"""Every public constant the site's API pages render has a description.

mkdocstrings shows a module-level constant as its name and its value; what it
is for comes only from a string literal right after the assignment (an
attribute docstring, which Griffe reads). A constant without one shows
`VALIDATORS = {...}` and nothing a user can act on. Read from the source by
static analysis, as the generator reads it.
"""

import ast

from helpers.api_pages import API, directives, module_file, parse, public_names

# The pages' modules whose public names are rendered (test_api_reference.py checks each has an entry).
MODULES = ("grad_reverse", "grad_reverse.adaptation", "grad_reverse.serving", "grad_reverse.options")


def constants(tree: ast.Module) -> dict:
    """`{NAME: whether a string literal follows its assignment}` of a module's upper-case top-level names."""
    found = {}
    for node, following in zip(tree.body, [*tree.body[1:], None]):
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if not isinstance(node, (ast.Assign, ast.AnnAssign)):
            continue
        for target in targets:
            if isinstance(target, ast.Name) and target.id.isupper():
                described = (
                    isinstance(following, ast.Expr)
                    and isinstance(following.value, ast.Constant)
                    and isinstance(following.value.value, str)
                    and bool(following.value.value.strip())
                )
                found[target.id] = described
    return found


def defining_module(module: str, name: str) -> str:
    """Where `name`, public in `module`, is assigned: followed through `from grad_reverse... import`."""
    tree = parse(module)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("grad_reverse"):
            for alias in node.names:
                if (alias.asname or alias.name) == name and module_file(node.module):
                    return defining_module(node.module, alias.name)
    return module


def rendered_constants() -> dict:
    """`{dotted name: described}` for the public constants of MODULES and of every module a page renders whole."""
    found = {}
    for module in MODULES:
        for name in public_names(module):
            if name.isupper():
                source = defining_module(module, name)
                if name in constants(parse(source)):
                    found[f"{source}.{name}"] = constants(parse(source))[name]
    for page in sorted(API.glob("*.md")):
        for target, options in directives(page):
            if module_file(target) and options.get("members") != "false":
                found.update({f"{target}.{n}": d for n, d in constants(parse(target)).items() if not n.startswith("_")})
    return found


def test_the_reader_tells_a_described_constant_from_a_bare_one():
    tree = ast.parse('A = 1\n"""What A is."""\nB = 2\nC: int = 3\n"""C."""\nD = 4\n""\n')
    assert constants(tree) == {"A": True, "B": False, "C": True, "D": False}


def test_every_public_constant_on_the_api_pages_has_a_description():
    found = rendered_constants()
    assert {
        "grad_reverse.adaptation.validation.validators.VALIDATORS",
        "grad_reverse.adaptation.validation.selection.DEFAULT_CHOICE",
        "grad_reverse.adaptation.validation.rule.NAME",
    } <= set(found)
    bare = sorted(name for name, described in found.items() if not described)
    assert not bare, (
        "public constants the API pages show without a description (add a string literal right after "
        f"the assignment): {bare}"
    )
