#!/usr/bin/env python3
"""Finds an interpreter for a Python version such as "3.12": on PATH, then
among pyenv's versions (whose shims on PATH answer for the selected versions
only). Used by build_pip_pkg.sh and scripts/tensorflow_matrix.py.

  python3 build_tools/find_python.py 3.12    # prints its path, or exits 1
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional


def find_python(spec: str) -> Optional[str]:
    """An interpreter for a version such as "3.12" (PATH, then pyenv), or a path."""
    if os.sep in spec:
        return spec if os.access(spec, os.X_OK) else None
    candidates = [shutil.which(f"python{spec}")]
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates += sorted(map(str, pyenv_root.glob(f"versions/{spec}.*/bin/python{spec}")), reverse=True)
    for candidate in candidates:
        if candidate and subprocess.run([candidate, "-c", "import venv"], capture_output=True).returncode == 0:
            return candidate
    return None


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: find_python.py VERSION")
    found = find_python(sys.argv[1])
    if found is None:
        sys.exit(1)
    print(found)
