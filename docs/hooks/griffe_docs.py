"""A Griffe extension for the site's API reference (mkdocs.yml loads it into
mkdocstrings): what a reader sees of attributes and overridden methods.

* An attribute documented by its class's `Attributes:` section (a dataclass's
  fields, `SoftNeighborhoodDensity.temperature`) gets that row's text as its
  own entry's, instead of an empty entry under the table.
* An attribute or method that a subclass sets again without a docstring (a
  validator's `name`, its `score`) shows the docstring of the base class's
  member it overrides.
* An instance attribute shows no value: what Griffe reads there is the
  source line that set it in `__init__` (`seed = seed`), not a value. One
  with no text from the above is left out of the page: an empty entry tells
  a reader nothing that the constructor's table does not.
"""

from __future__ import annotations

import griffe


def _rows(cls: griffe.Class) -> dict:
    """`{name: description}` of the class docstring's `Attributes:` section."""
    if cls.docstring is None:
        return {}
    rows = {}
    for section in griffe.parse_google(cls.docstring, warnings=False):
        if section.kind is griffe.DocstringSectionKind.attributes:
            rows.update({item.name: item.description for item in section.value})
    return rows


def _classes(module: griffe.Module):
    for member in module.members.values():
        if member.is_alias:
            continue
        if member.is_module:
            yield from _classes(member)
        elif member.is_class:
            yield member


def _inherited(cls: griffe.Class, name: str) -> str | None:
    for base in cls.mro():
        member = base.members.get(name)
        if member is not None and not member.is_alias and member.docstring is not None:
            return member.docstring.value
        row = _rows(base).get(name)
        if row:
            return row
    return None


class AttributeAndOverrideDocs(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, **kwargs) -> None:
        classes = list(_classes(pkg))
        for cls in classes:
            for name, text in _rows(cls).items():
                member = cls.members.get(name)
                if member is not None and not member.is_alias and member.is_attribute and member.docstring is None:
                    member.docstring = griffe.Docstring(text, parent=member)
        for cls in classes:
            for name, member in list(cls.members.items()):
                if member.is_alias or name.startswith("__") and name != "__call__":
                    continue
                if member.docstring is None:
                    try:
                        text = _inherited(cls, name)
                    except (ValueError, griffe.AliasResolutionError, griffe.CyclicAliasError):
                        text = None  # a base outside the package: nothing to inherit
                    if text is not None:
                        member.docstring = griffe.Docstring(text, parent=member)
                if member.is_attribute and "instance-attribute" in member.labels:
                    if "class-attribute" not in member.labels:
                        member.value = None
                    if member.docstring is None and member.value is None:
                        del cls.members[name]
