#!/usr/bin/env python3
"""Finds an interpreter for a Python version such as "3.12": on PATH, then
among pyenv's versions (whose shims on PATH answer for the selected versions
only). Used by build_pip_pkg.sh, scripts/debian_python.sh and
scripts/tensorflow_matrix.py.

  python3 build_tools/find_python.py 3.12    # prints its path, or exits 1
  python3 build_tools/find_python.py --with-headers 3.12    # only one with Python.h
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

# Run by the interpreter asked about: its own include folder, as it will tell a build.
_HAS_HEADERS = (
    "import os, sys, sysconfig; "
    "sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))"
)


def _answers(interpreter: str, code: str) -> bool:
    return subprocess.run([interpreter, "-c", code], capture_output=True).returncode == 0


def find_python(spec: str, with_headers: bool = False) -> str | None:
    """An interpreter for a version such as "3.12" (PATH, then pyenv), or a path;
    with `with_headers`, only one whose include folder has Python.h (what a C
    extension's build needs)."""
    if os.sep in spec:
        candidates = [spec] if os.access(spec, os.X_OK) else []
    else:
        pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
        candidates = [shutil.which(f"python{spec}")]
        candidates += sorted(map(str, pyenv_root.glob(f"versions/{spec}.*/bin/python{spec}")), reverse=True)
    for candidate in candidates:
        if not candidate or (os.sep not in spec and not _answers(candidate, "import venv")):
            continue
        if with_headers and not _answers(candidate, _HAS_HEADERS):
            continue
        return candidate
    return None


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--with-headers", action="store_true", help="only an interpreter with Python.h")
    parser.add_argument("version", help='a version such as "3.12", or a path to an interpreter')
    args = parser.parse_args()
    found = find_python(args.version, args.with_headers)
    if found is None:
        sys.exit(1)
    print(found)
