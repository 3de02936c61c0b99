#!/usr/bin/env python3
"""A PATH without compilers, for proving that the portable wheel installs and
runs where users have none (slim images, cluster login nodes).

`no_compiler_path(folder, *first)` fills `folder` with links to every program
on the current PATH except C/C++ compilers, CMake and nvcc, and returns a PATH
of the `first` folders (a virtual environment's bin/, say) followed by
`folder`. A program that `first` holds stays reachable: the check is about
what the machine offers, not about what the wheel's own environment installs.

  PATH=$(python3 scripts/no_compiler_path.py FOLDER [FIRST ...]) command
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

# Compiler drivers and build tools, with Debian's versioned and
# target-prefixed names (g++-12, x86_64-linux-gnu-gcc-12, clang++-14).
HIDDEN = re.compile(
    r"(cc|c\+\+|c89|c99|cpp|gcc|g\+\+|clang|clang\+\+|nvcc|cmake|ctest|cpack|ccache|icx|icpx)"
    r"(-\d+(\.\d+)*)?"
    r"|[\w.]+-linux-gnu-(gcc|g\+\+|cpp|c\+\+)(-\d+)?"
)


def hidden(name: str) -> bool:
    return HIDDEN.fullmatch(name) is not None


def no_compiler_path(folder: Path, *first: Path) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if not directory or not os.path.isdir(directory):
            continue
        for entry in os.scandir(directory):
            link = folder / entry.name
            if hidden(entry.name) or link.exists() or link.is_symlink():
                continue  # the first on PATH wins, as for the shell
            if entry.is_file() and os.access(entry.path, os.X_OK):
                link.symlink_to(os.path.realpath(entry.path))
    return os.pathsep.join([*map(str, first), str(folder)])


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: no_compiler_path.py FOLDER [FIRST ...]")
    print(no_compiler_path(Path(sys.argv[1]).resolve(), *(Path(p).resolve() for p in sys.argv[2:])))
