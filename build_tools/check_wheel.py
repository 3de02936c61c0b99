#!/usr/bin/env python3
"""Checks a portable grad-reverse wheel before anyone installs it.

  python build_tools/check_wheel.py WHEEL [--releases "2.15 ... 2.21"]

Prints one line per shared library in the wheel (size, the newest GLIBC_ /
GLIBCXX_ / CXXABI_ version it needs, its undefined CUDA runtime symbols, and
for an op library its build record) and exits 1 when:
  * the wheel's platform tag is not manylinux for x86_64 or aarch64, or newer
    than manylinux_2_27, or a library is not built for the tag's CPU;
  * a library needs a symbol version newer than TensorFlow's own libraries do
    (elf_symbols.LIMITS), or leaves a CUDA runtime symbol undefined;
  * a release of --releases has no op library and build record, or a record
    names another TensorFlow release than its folder;
  * the build records disagree on CUDA (all of them carry the kernel, or none);
  * the stable-ABI library (_libs/stable/) is missing, imports anything but
    TensorFlow's C API (TF_ functions) and the C/C++ runtimes (a mangled
    TensorFlow or Abseil name would bind it to one release), or imports a
    TF_ function that a release's libtensorflow_framework.so.2 given with
    --framework RELEASE=PATH does not export, or binds an import to a symbol
    version (.gnu.version_r) that such a release does not define (TensorFlow
    2.22 puts its exports under a `tensorflow` version, which no older
    release defines: a stable library linked against 2.22 asks for it and
    does not load into 2.15); one line per release.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from elf_symbols import (
    ELF_MACHINES,
    c_api_imports,
    defined_versions,
    elf_machine,
    exported_functions,  # noqa: E402
    format_version,
    needed_versions,
    newest_versions,
    non_c_api_imports,
    too_new,
    undefined_cuda_symbols,
)

NEWEST_TAG = (2, 27)
OP_LIBRARY = re.compile(r"grad_reverse/_libs/tf(\d+\.\d+)/_grad_reverse_ops\.so")
STABLE_LIBRARY = "grad_reverse/_libs/stable/_grad_reverse_ops.so"
FRAMEWORK = "libtensorflow_framework.so.2"


def wheel_cpu(wheel: Path) -> str | None:
    """The CPU of the wheel's platform tag (x86_64, aarch64), or None."""
    platform = wheel.name.removesuffix(".whl").split("-")[-1]
    cpus = {cpu for cpu in ELF_MACHINES if platform.endswith("_" + cpu)}
    return cpus.pop() if len(cpus) == 1 else None


def tag_problems(wheel: Path) -> list[str]:
    platform = wheel.name.removesuffix(".whl").split("-")[-1]
    cpu = wheel_cpu(wheel)
    if cpu is None:
        return [f"the wheel's platform tag {platform!r} names none of the CPUs {', '.join(ELF_MACHINES)}"]
    tags = re.findall(rf"manylinux_(\d+)_(\d+)_{cpu}", platform)
    if f"manylinux2014_{cpu}" in platform:
        tags.append(("2", "17"))
    if not tags:
        return [f"the wheel's platform tag {platform!r} is not manylinux (auditwheel repair gives it one)"]
    oldest = min((int(a), int(b)) for a, b in tags)
    if oldest > NEWEST_TAG:
        return [f"the wheel's tag manylinux_{oldest[0]}_{oldest[1]} is newer than manylinux_2_27"]
    return []


def stable_library_problems(library: Path, frameworks: dict[str, Path]) -> list[str]:
    """What is wrong with the stable-ABI library (see the module's doc); prints
    what it imports and, per release, whether that release exports it."""
    problems = [
        f"{STABLE_LIBRARY} imports {name}, which is neither TensorFlow's C API nor the C/C++ runtime"
        for name in non_c_api_imports(library)
    ]
    imported = c_api_imports(library)
    needed = needed_versions(library)
    from_tensorflow = sorted(needed.get(FRAMEWORK, set()))
    print(
        f"  {STABLE_LIBRARY} imports {len(imported)} TensorFlow C API functions, symbol versions of "
        f"{FRAMEWORK}: {', '.join(from_tensorflow) or 'none'}"
    )
    for release, framework in sorted(frameworks.items()):
        missing = sorted(set(imported) - exported_functions(framework))
        undefined = sorted(needed.get(framework.name, set()) - defined_versions(framework))
        print(
            f"    TensorFlow {release}: "
            + (f"MISSING {', '.join(missing)}" if missing else f"exports all {len(imported)}")
            + (f"; MISSING symbol versions {', '.join(undefined)}" if undefined else "")
        )
        problems += [
            f"TensorFlow {release}'s {framework.name} does not export {name}, which {STABLE_LIBRARY} imports"
            for name in missing
        ]
        problems += [
            f"{STABLE_LIBRARY} needs symbol version {version!r} of {framework.name}, which TensorFlow "
            f"{release}'s does not define (it was linked against a newer release: link it against the oldest)"
            for version in undefined
        ]
    return problems


def check(wheel: Path, releases: list[str], frameworks: dict[str, Path] | None = None) -> list[str]:
    problems = tag_problems(wheel)
    cpu = wheel_cpu(wheel)
    records: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as scratch, zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        libraries = [name for name in names if name.endswith(".so") or ".so." in name]
        print(f"{wheel.name}: {wheel.stat().st_size / 2**20:.1f} MiB, {len(libraries)} shared libraries")
        for name in sorted(libraries):
            path = Path(archive.extract(name, scratch))
            machine = elf_machine(path)
            if cpu and machine != ELF_MACHINES[cpu]:
                problems.append(
                    f"{name} is not an ELF library for {cpu} (e_machine {machine}, {ELF_MACHINES[cpu]} expected)"
                )
            versions = newest_versions(path)
            cuda = undefined_cuda_symbols(path)
            needs = ", ".join(f"{k}_{format_version(v)}" for k, v in sorted(versions.items()))
            line = f"  {name}  {path.stat().st_size / 1024:.0f} KiB  needs {needs}  undefined CUDA: {len(cuda)}"
            problems += [f"{name} needs {problem}" for problem in too_new(versions)]
            if cuda:
                problems.append(f"{name} leaves CUDA runtime symbols undefined: {', '.join(cuda[:5])}")
            match = OP_LIBRARY.fullmatch(name)
            if match:
                record_name = name.replace("_grad_reverse_ops.so", "_build_info.json")
                if record_name not in names:
                    problems.append(f"{name} has no build record {record_name}")
                else:
                    record = json.loads(archive.read(record_name))
                    records[match.group(1)] = record
                    line += (
                        f"  TensorFlow {record.get('tensorflow_version')}, cuda={record.get('cuda')} "
                        f"({record.get('cuda_toolkit_version') or '-'}), xla={record.get('xla')}"
                    )
                    if not str(record.get("tensorflow_version", "")).startswith(match.group(1) + "."):
                        problems.append(f"{record_name} names TensorFlow {record.get('tensorflow_version')}")
            print(line)
            if name == STABLE_LIBRARY:
                problems += stable_library_problems(path, frameworks or {})
    if STABLE_LIBRARY not in names:
        problems.append(f"the wheel holds no stable-ABI library ({STABLE_LIBRARY})")
    elif json.loads(archive_record(wheel, STABLE_LIBRARY)).get("abi") != "stable":
        problems.append(f'the build record beside {STABLE_LIBRARY} does not say "abi": "stable"')
    missing = [release for release in releases if release not in records]
    if missing:
        problems.append(f"no op library for TensorFlow {', '.join(missing)}")
    if len({record.get("cuda") for record in records.values()}) > 1:
        problems.append(
            "some op libraries carry the CUDA kernel and some do not: "
            + ", ".join(f"{r}: {rec.get('cuda')}" for r, rec in sorted(records.items()))
        )
    return problems


def archive_record(wheel: Path, library: str) -> bytes:
    """The build record beside `library` in the wheel ("{}" when there is none)."""
    with zipfile.ZipFile(wheel) as archive:
        try:
            return archive.read(library.replace("_grad_reverse_ops.so", "_build_info.json"))
        except KeyError:
            return b"{}"


def parse_frameworks(pairs: list[str]) -> dict[str, Path]:
    """{"2.15": Path(...)} from ["2.15=PATH", ...]."""
    frameworks = {}
    for pair in pairs:
        release, separator, path = pair.partition("=")
        if not separator or not path:
            raise SystemExit(f"check_wheel.py: --framework takes RELEASE=PATH, got {pair!r}")
        frameworks[release] = Path(path)
    return frameworks


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheel", type=Path)
    parser.add_argument("--releases", default="", help="TensorFlow releases the wheel must hold, space-separated")
    parser.add_argument(
        "--framework",
        action="append",
        default=[],
        metavar="RELEASE=PATH",
        help="a release's libtensorflow_framework.so.2, whose exports the stable library's "
        "imports must be among (repeatable)",
    )
    args = parser.parse_args(argv)
    problems = check(args.wheel, args.releases.split(), parse_frameworks(args.framework))
    for problem in problems:
        print(f"check_wheel.py: {problem}", file=sys.stderr)
    print("check_wheel.py: " + ("FAILED" if problems else "passed"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
