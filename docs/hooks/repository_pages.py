"""MkDocs hook (mkdocs.yml `hooks:`): the site's pages from files outside docs/.

The README is the site's home page, scripts/README.md, CHANGELOG.md and
LICENSE are pages too, all read from where they live (one copy of each).
Links are written for GitHub, relative to the file that holds them
(`docs/dann.md` in the README, `../scripts/README.md` in a manual): each
relative link to a file that is a page of the site is rewritten to that page.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File

# Repository path -> the page it becomes (docs/X.md are pages X.md as they are).
PAGES = {
    "README.md": "index.md",
    "scripts/README.md": "scripts.md",
    "CHANGELOG.md": "changelog.md",
    "LICENSE": "license.md",
}
# [text](target): the target without spaces or parentheses.
LINK = re.compile(r"(\]\()([^)\s]+)(\))")


def _root(config) -> Path:
    return Path(config.config_file_path).parent


def on_files(files, config):
    root = _root(config)
    for source, page in PAGES.items():
        text = (root / source).read_text(encoding="utf-8")
        if source == "LICENSE":
            text = "# License\n\n```text\n" + text + "\n```\n"
        files.append(File.generated(config, page, content=text))
    return files


def _page_for(repository_path: str):
    if repository_path in PAGES:
        return PAGES[repository_path]
    if repository_path.startswith("docs/") and repository_path.endswith(".md"):
        return repository_path[len("docs/") :]
    return None


def on_page_markdown(markdown, page, config, files):
    here = page.file.src_uri
    source = {v: k for k, v in PAGES.items()}.get(here, "docs/" + here)

    def rewrite(match):
        target = match.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            return match.group(0)
        path, hash_, anchor = target.partition("#")
        linked = _page_for(posixpath.normpath(posixpath.join(posixpath.dirname(source), path)))
        if linked is None:
            return match.group(0)
        relative = posixpath.relpath(linked, posixpath.dirname(here) or ".")
        return f"{match.group(1)}{relative}{hash_}{anchor}{match.group(3)}"

    return LINK.sub(rewrite, markdown)
