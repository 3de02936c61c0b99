"""What a shared library asks of the system that loads it, read with binutils
(`objdump -T`, `nm -D`): the newest glibc / libstdc++ symbol versions it
needs, and the CUDA runtime symbols it leaves for another library to define;
and the CPU it is built for (its ELF header's e_machine).

Used by build_tools/check_wheel.py and by the tests (tests/packaging/test_symbols.py).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

# What TensorFlow 2.21's own libtensorflow_framework.so.2 and
# libtensorflow_cc.so.2 need (objdump -T): a library of ours that needs no
# more loads wherever that TensorFlow does (its wheels are manylinux_2_27).
LIMITS = {"GLIBC": (2, 27), "GLIBCXX": (3, 4, 22), "CXXABI": (1, 3, 11)}
_VERSION = re.compile(r"\b(GLIBC|GLIBCXX|CXXABI)_(\d+(?:\.\d+)*)\b")
# The CUDA runtime API and the registration hooks nvcc's code calls.
_CUDA_SYMBOL = re.compile(r"^(cuda|__cuda)\w*")
# ELF e_machine of each CPU a wheel is built for (the ELF specification's registry).
ELF_MACHINES = {"x86_64": 62, "aarch64": 183}


def _run(*command: str) -> str:
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


def newest_versions(library: Path) -> dict[str, tuple[int, ...]]:
    """{"GLIBC": (2, 17), "GLIBCXX": (3, 4, 21), ...}: the newest version of
    each that the library's dynamic symbols require (absent: none)."""
    newest: dict[str, tuple[int, ...]] = {}
    for line in _run("objdump", "-T", str(library)).splitlines():
        if "*UND*" not in line:
            continue  # versions the library defines itself do not count
        for name, version in _VERSION.findall(line):
            parsed = tuple(int(part) for part in version.split("."))
            newest[name] = max(newest.get(name, parsed), parsed)
    return newest


def too_new(versions: dict[str, tuple[int, ...]]) -> list[str]:
    """The versions above LIMITS, as "GLIBC_2.34 > 2.27" lines."""
    return [
        f"{name}_{format_version(version)} > {format_version(LIMITS[name])}"
        for name, version in sorted(versions.items())
        if name in LIMITS and version > LIMITS[name]
    ]


def format_version(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def undefined_cuda_symbols(library: Path) -> list[str]:
    """CUDA runtime symbols the library leaves undefined: resolved at load by
    whichever library exports them (TensorFlow's own runtime, another CUDA
    version), not by the runtime the kernels were compiled for."""
    names = (
        line.split()[-1] for line in _run("nm", "-D", "--undefined-only", str(library)).splitlines() if line.strip()
    )
    return sorted(name.split("@")[0] for name in names if _CUDA_SYMBOL.match(name))


def elf_machine(path: Path) -> int:
    """The file's ELF e_machine (ELF_MACHINES), or -1 for a file that is not
    ELF. Read little-endian: both CPUs' ELF files are."""
    header = path.read_bytes()[:20]
    return int.from_bytes(header[18:20], "little") if header[:4] == b"\x7fELF" else -1


# What the stable-ABI op library may import: TensorFlow's C API (TF_ names,
# plain C, so unversioned or TensorFlow's own version node), and from the
# C and C++ runtimes (symbol versions GLIBC_, GLIBCXX_, CXXABI_, GCC_).
_RUNTIME_VERSION = re.compile(r"^(GLIBC|GLIBCXX|CXXABI|GCC)_\d")
_TOOLCHAIN_WEAK = {"__gmon_start__", "_ITM_deregisterTMCloneTable", "_ITM_registerTMCloneTable"}


def undefined_dynamic_symbols(library: Path) -> list[tuple[str, str]]:
    """(name, version) of each dynamic symbol the library imports; version
    is "" for an unversioned reference."""
    found = []
    for line in _run("objdump", "-T", str(library)).splitlines():
        if "*UND*" not in line:
            continue
        fields = line.split()
        version = next((f.strip("()") for f in fields if f.startswith("(") and f.endswith(")")), "")
        found.append((fields[-1], version))
    return sorted(found)


def non_c_api_imports(library: Path) -> list[str]:
    """What the library imports beyond TensorFlow's C API and the C/C++
    runtimes: a mangled TensorFlow or Abseil name here binds the library to
    one TensorFlow release's C++ ABI."""
    return [
        f"{name} ({version or 'unversioned'})"
        for name, version in undefined_dynamic_symbols(library)
        if not (name.startswith("TF_") or _RUNTIME_VERSION.match(version) or name in _TOOLCHAIN_WEAK)
    ]


def c_api_imports(library: Path) -> list[str]:
    """The TensorFlow C API functions (TF_ names) the library imports."""
    return sorted(name for name, _ in undefined_dynamic_symbols(library) if name.startswith("TF_"))


def exported_functions(library: Path) -> set[str]:
    """Names of the functions the library exports, without their versions."""
    names = set()
    for line in _run("nm", "-D", "--defined-only", str(library)).splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[1] in "TtWi":
            names.add(fields[2].split("@")[0])
    return names


def _private_headers(library: Path) -> list[str]:
    return _run("objdump", "-p", str(library)).splitlines()


def defined_versions(library: Path) -> set[str]:
    """The symbol versions the library defines (its .gnu.version_d section:
    `objdump -p`'s "Version definitions"), without the base entry, which is
    only its soname. TensorFlow 2.15 to 2.21 define none; 2.22 defines
    `tensorflow`, which every symbol it exports then carries."""
    defined, inside = set(), False
    for line in _private_headers(library):
        if line.startswith("Version definitions:"):
            inside = True
        elif inside and not line.strip():
            break
        elif inside:
            fields = line.split()
            # index, flags (0x01: the base entry), hash, name
            if len(fields) == 4 and int(fields[1], 16) & 0x01 == 0:
                defined.add(fields[3])
    return defined


def needed_versions(library: Path) -> dict[str, set[str]]:
    """{file: {version, ...}}: the symbol versions the library's imports need
    from each library it links (its .gnu.version_r section: `objdump -p`'s
    "Version References"). An import bound to a version loads only where
    the providing library defines that version."""
    needed: dict[str, set[str]] = {}
    inside, current = False, None
    for line in _private_headers(library):
        if line.startswith("Version References:"):
            inside = True
        elif inside and not line.strip():
            break
        elif inside and line.strip().startswith("required from "):
            current = line.strip().removeprefix("required from ").rstrip(":")
            needed.setdefault(current, set())
        elif inside and current is not None:
            needed[current].add(line.split()[-1])
    return needed
