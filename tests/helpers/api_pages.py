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
