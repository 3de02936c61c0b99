"""Which platforms the build is known to work on, said before it starts.

The build (CMakeLists.txt, cmake/) has Linux branches only: GCC/Clang flags,
`-l:libtensorflow_framework.so.2`, ELF run paths. On another OS it would
fail deep in CMake or at link time, so `pip install .` stops at its start
instead (tensorflow_requirement.py calls `check_platform` first), unless
GRAD_REVERSE_ALLOW_UNTESTED_PLATFORM=1 asks to try anyway.

  tested                  Linux x86-64: built, and the whole test suite run,
                          in CI
  tested under emulation  Linux aarch64: the portable wheel cross-compiled
                          against TensorFlow's aarch64 wheels, and the op's
                          tests run in aarch64 CPython under qemu's user-mode
                          emulation (scripts/aarch64_emulated_tests.sh); no
                          native aarch64 machine, no GPU, and no source build
                          (`pip install .`) on aarch64 has run
  untested                every other OS or CPU
"""

from __future__ import annotations

import os
import platform
import sys

ALLOW_UNTESTED_VARIABLE = "GRAD_REVERSE_ALLOW_UNTESTED_PLATFORM"
TESTED = {("linux", "x86_64")}
EMULATED = {("linux", "aarch64")}
# Display names for the message; `sys.platform` values.
OS_NAMES = {"linux": "Linux", "darwin": "macOS", "win32": "Windows", "cygwin": "Cygwin"}
# platform.machine() spellings of the same CPU.
MACHINE_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}


class UntestedPlatform(RuntimeError):
    """The build has never run on this OS."""


def current() -> tuple[str, str]:
    """(OS, CPU) of this process: `sys.platform` without a version suffix
    ("linux", "darwin", "win32", "freebsd"), and the CPU with aliases folded
    ("x86_64", "aarch64")."""
    system = sys.platform
    for prefix in ("linux", "freebsd", "openbsd", "netbsd", "aix"):
        if system.startswith(prefix):
            system = prefix
    machine = platform.machine().lower()
    return system, MACHINE_ALIASES.get(machine, machine)


def support_level(system: str, machine: str) -> str:
    """ "tested", "tested under emulation" or "untested"."""
    if (system, machine) in TESTED:
        return "tested"
    if (system, machine) in EMULATED:
        return "tested under emulation"
    return "untested"


def _named(platforms: set[tuple[str, str]]) -> str:
    """{("linux", "x86_64")} -> "Linux x86-64": the message's names for the tables above."""
    return ", ".join(
        f"{OS_NAMES.get(system, system)} {machine.replace('_', '-')}" for system, machine in sorted(platforms)
    )


def untested_message(system: str, machine: str) -> str | None:
    """Why the build stops on (system, machine), or None where it goes on
    (Linux on any CPU: the portable CPU path compiles everywhere GCC does)."""
    if system == "linux":
        return None
    name = OS_NAMES.get(system, system)
    return (
        f"grad-reverse is built and tested on {_named(TESTED)} only ({_named(EMULATED)}: tested under "
        f"emulation); this is {name} ({system}, {machine}), where its build has never run: "
        f"the build has no {name} branch, so it would most likely stop in CMake or at link "
        f"time. Use Linux (or WSL 2 on Windows, a Linux container on macOS), or set "
        f"{ALLOW_UNTESTED_VARIABLE}=1 to try anyway."
    )


def check_platform(system: str | None = None, machine: str | None = None) -> None:
    """Raises UntestedPlatform on an OS the build has no branch for, unless
    the environment variable allows it; defaults to this process's platform."""
    if system is None or machine is None:
        system, machine = current()
    message = untested_message(system, machine)
    if message is None or os.environ.get(ALLOW_UNTESTED_VARIABLE, "") not in ("", "0"):
        return
    raise UntestedPlatform(message)
