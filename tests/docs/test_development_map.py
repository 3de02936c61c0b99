"""docs/development.md's map of the tree names every folder the tree has.

The map is the tables of its "## Layout" section: the first cell of each
row names one or more paths in code spans (`cc/ops/`). Every folder that
holds a tracked file (`git ls-files`) must be one of them, so a folder added
without a line in the map fails here. The converse is not checked: the map
may name a folder before it exists.
"""

import re
import shutil
import subprocess
from pathlib import Path

import pytest


def repository_root() -> Path:
    """The folder holding pyproject.toml above this file, wherever the test sits."""
    for folder in Path(__file__).resolve().parents:
        if (folder / "pyproject.toml").is_file() and (folder / "docs" / "development.md").is_file():
            return folder
    raise RuntimeError(f"no repository root (pyproject.toml beside docs/development.md) above {__file__}")


ROOT = repository_root()
MAP = ROOT / "docs" / "development.md"
CODE_SPAN = re.compile(r"`([^`\n]+)`")


def layout_section(text: str) -> str:
    match = re.search(r"^## Layout[ \t]*\n(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    assert match, f"{MAP.relative_to(ROOT)} has no '## Layout' section"
    return match.group(1)


def mapped_paths(text: str) -> set:
    """Every path named in the first cell of a table row of the Layout section,
    without its trailing slash."""
    paths = set()
    for line in layout_section(text).splitlines():
        cells = line.strip().split("|")
        if len(cells) < 3 or set(cells[1].strip()) <= {"-", ":"}:
            continue  # not a row, or the header's rule
        paths |= {span.rstrip("/") for span in CODE_SPAN.findall(cells[1])}
    return paths


def tracked_folders() -> set:
    """The folders that hold a tracked file, or a skip saying why they cannot be listed."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed: the tracked folders cannot be listed")
    result = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        pytest.skip(f"{ROOT} is not a git checkout (a copied source tree): {result.stderr.strip()}")
    files = [name for name in result.stdout.split("\0") if name]
    return {name.rsplit("/", 1)[0] for name in files if "/" in name}


def test_the_map_reader_finds_the_rows():
    paths = mapped_paths(MAP.read_text(encoding="utf-8"))
    assert {"cc/ops", "python/grad_reverse", "tests", "scripts"} <= paths, sorted(paths)
    assert mapped_paths("## Layout\n\n| Path | What |\n|---|---|\n| `a/`, `b/c/` | x |\n") == {"a", "b/c"}


def test_every_tracked_folder_is_in_the_map():
    folders = tracked_folders()
    assert "cc/ops" in folders, "the folder lister finds"
    missing = sorted(folders - mapped_paths(MAP.read_text(encoding="utf-8")))
    assert not missing, (
        f"folders of the tree that {MAP.relative_to(ROOT)}'s Layout tables do not name (add a row for each): {missing}"
    )
