"""The portable wheel's build tools (build_tools/), on inputs made here: the
sysroot's package unpacking and pinning, the wheel check's tag and symbol
rules, the PATH without compilers (scripts/no_compiler_path.py), the finding of Pythons with headers. (The wheel itself: CI's step 3 builds it
with build_pip_pkg.sh and runs the suite against it.)"""

import hashlib
import io
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

# build_tools/ and scripts/ are on the path (pyproject's pytest `pythonpath`).
import check_wheel
import elf_symbols
import find_python
import no_compiler_path
import pytest
import sysroot

ROOT = Path(__file__).resolve().parents[2]


def deb(files: dict, links: dict) -> bytes:
    """A minimal Debian package (ar archive with a data.tar.gz) holding
    `files` {path: bytes} and symbolic `links` {path: target}."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz") as archive:
        for name, content in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(content), 0o644
            archive.addfile(info, io.BytesIO(content))
        for name, target in links.items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            archive.addfile(info)
    members = [("debian-binary", b"2.0\n"), ("data.tar.gz", data.getvalue())]
    out = b"!<arch>\n"
    for name, content in members:
        out += f"{name + '/':<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(content):<10}`\n".encode() + content
        out += b"\n" if len(content) % 2 else b""
    return out


def test_unpacking_makes_absolute_links_point_inside_the_sysroot(tmp_path):
    package = deb(
        {"./lib/x86_64-linux-gnu/libm.so.6": b"ELF"},
        {"./usr/lib/x86_64-linux-gnu/libm.so": "/lib/x86_64-linux-gnu/libm.so.6"},
    )
    sysroot.unpack(package, "libm", tmp_path)
    link = tmp_path / "usr/lib/x86_64-linux-gnu/libm.so"
    assert link.is_symlink() and not Path(link.readlink()).is_absolute()
    assert link.resolve() == (tmp_path / "lib/x86_64-linux-gnu/libm.so.6").resolve()
    assert link.read_bytes() == b"ELF"


def test_unpacking_refuses_a_path_outside_the_sysroot(tmp_path):
    package = deb({"../escape": b"x"}, {})
    with pytest.raises(sysroot.SysrootError, match="outside the sysroot"):
        sysroot.unpack(package, "bad", tmp_path / "root")


def test_a_package_whose_hash_is_not_the_pinned_one_is_refused(tmp_path):
    content = b"not the pinned package"
    pinned = sysroot.Package("libc6", "1", "pool/main/g/glibc/libc6_1_amd64.deb", hashlib.sha256(b"other").hexdigest())
    (tmp_path / "libc6_1_amd64.deb").write_bytes(content)
    with pytest.raises(sysroot.SysrootError, match="is not the pinned"):
        sysroot.fetch(pinned, tmp_path)
    assert not (tmp_path / "libc6_1_amd64.deb").exists()  # the bad copy is not reused


@pytest.mark.parametrize("arch, debian_arch", [("x86_64", "amd64"), ("aarch64", "arm64")])
def test_every_pinned_package_names_a_version_and_a_sha256(arch, debian_arch):
    for package in sysroot.PACKAGES[arch]:
        assert package.version in package.pool_path and len(package.sha256) == 64
        assert package.pool_path.endswith(f"_{debian_arch}.deb"), package.pool_path


def test_both_sysroots_hold_the_same_packages_and_versions():
    # The aarch64 wheel is compiled against the same glibc and libstdc++ as
    # the x86-64 one: the same symbol limits hold for both.
    def pins(arch):
        return [(package.name, package.version) for package in sysroot.PACKAGES[arch]]

    assert pins("aarch64") == pins("x86_64")


@pytest.mark.parametrize(
    "platform_tag, ok",
    [
        ("manylinux_2_24_x86_64", True),
        ("manylinux_2_17_x86_64.manylinux2014_x86_64", True),
        ("manylinux_2_27_x86_64", True),
        ("manylinux_2_28_x86_64", False),
        ("linux_x86_64", False),
        ("manylinux_2_24_aarch64", True),
        ("manylinux_2_17_aarch64.manylinux2014_aarch64", True),
        ("manylinux_2_28_aarch64", False),
        ("linux_aarch64", False),
        ("manylinux_2_17_ppc64le", False),
    ],
)
def test_the_wheel_tag_must_be_manylinux_2_27_or_older(platform_tag, ok):
    problems = check_wheel.tag_problems(Path(f"grad_reverse-0.1.0-py3-none-{platform_tag}.whl"))
    assert (problems == []) == ok, problems


def _elf_header(machine: int) -> bytes:
    # e_ident (64-bit, little-endian), e_type ET_DYN, e_machine: what the check reads.
    return b"\x7fELF\x02\x01\x01" + bytes(9) + (3).to_bytes(2, "little") + machine.to_bytes(2, "little") + bytes(44)


@pytest.mark.parametrize(
    "cpu, machine, ok", [("aarch64", 183, True), ("aarch64", 62, False), ("x86_64", 62, True), ("x86_64", 183, False)]
)
def test_a_library_built_for_another_cpu_than_the_tags_is_reported(tmp_path, monkeypatch, cpu, machine, ok):
    wheel = tmp_path / f"grad_reverse-0.1.0-py3-none-manylinux_2_24_{cpu}.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(f"grad_reverse/_kernels.cpython-311-{cpu}-linux-gnu.so", _elf_header(machine))
    # Symbol reading is binutils' job, checked elsewhere; here only the CPU.
    monkeypatch.setattr(check_wheel, "newest_versions", lambda path: {})
    monkeypatch.setattr(check_wheel, "undefined_cuda_symbols", lambda path: [])
    problems = [p for p in check_wheel.check(wheel, []) if "ELF library" in p]
    assert (problems == []) == ok, problems
    if not ok:
        assert f"not an ELF library for {cpu}" in problems[0]


def test_symbol_versions_above_tensorflows_own_are_reported():
    assert elf_symbols.too_new({"GLIBC": (2, 27), "GLIBCXX": (3, 4, 22)}) == []
    assert elf_symbols.too_new({"GLIBC": (2, 34), "GLIBCXX": (3, 4, 30), "CXXABI": (1, 3, 9)}) == [
        "GLIBC_2.34 > 2.27",
        "GLIBCXX_3.4.30 > 3.4.22",
    ]


@pytest.mark.parametrize(
    "name",
    ["gcc", "g++", "cc", "c++", "g++-12", "x86_64-linux-gnu-g++-12", "clang++", "clang-14", "cmake", "nvcc", "cpp"],
)
def test_compilers_are_hidden(name):
    assert no_compiler_path.hidden(name)


@pytest.mark.parametrize("name", ["python3", "pip", "nm", "objdump", "ld", "git", "ccmake-notes", "gccgo-readme"])
def test_other_programs_are_kept(name):
    assert not no_compiler_path.hidden(name)


def test_the_path_without_compilers_keeps_the_first_folders(tmp_path):
    first = tmp_path / "venv-bin"
    first.mkdir()
    path = no_compiler_path.no_compiler_path(tmp_path / "links", first)
    assert path.split(":")[0] == str(first)
    assert not (tmp_path / "links" / "g++").exists() and not (tmp_path / "links" / "cc").exists()


def test_a_wheel_without_the_stable_library_is_reported(tmp_path, monkeypatch):
    wheel = tmp_path / "grad_reverse-0.1.0-py3-none-manylinux_2_24_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("grad_reverse/__init__.py", "")
    assert "the wheel holds no stable-ABI library" in " ".join(check_wheel.check(wheel, []))


def test_the_stable_librarys_imports_are_checked_against_each_release(monkeypatch, tmp_path, capsys):
    """A C++ name among its imports, or a C function a release does not export, is reported."""
    imports = [
        ("TF_GetInput", ""),
        ("TF_NewKernelBuilder", ""),
        ("memcpy", "GLIBC_2.14"),
        ("_ZNSt6thread20hardware_concurrencyEv", "GLIBCXX_3.4.17"),
        ("__gmon_start__", ""),
        ("_ZN4absl12lts_2025081418container_internal19GetRefForEmptyClassERNS1_12CommonFieldsE", ""),
    ]
    monkeypatch.setattr(elf_symbols, "undefined_dynamic_symbols", lambda path: imports)
    monkeypatch.setattr(
        check_wheel,
        "exported_functions",
        lambda path: {"TF_GetInput", "TF_NewKernelBuilder"} if path.name == "new" else {"TF_GetInput"},
    )
    # Symbol versions are read from real libraries in the test below.
    monkeypatch.setattr(check_wheel, "needed_versions", lambda path: {})
    monkeypatch.setattr(check_wheel, "defined_versions", lambda path: set())
    problems = check_wheel.stable_library_problems(
        tmp_path / "lib.so", {"2.15": tmp_path / "old", "2.21": tmp_path / "new"}
    )
    assert len(problems) == 2, problems
    assert "imports _ZN4absl12lts_2025081418container_internal19GetRefForEmptyClass" in problems[0]
    assert "TensorFlow 2.15's old does not export TF_NewKernelBuilder" in problems[1]
    printed = capsys.readouterr().out
    assert "TensorFlow 2.15: MISSING TF_NewKernelBuilder" in printed and "TensorFlow 2.21: exports all 2" in printed


def _link(compiler: str, output: Path, source: str, *flags: str) -> Path:
    code = output.with_suffix(".cc")
    code.write_text(source)
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-o", str(output), str(code), *flags], check=True, capture_output=True
    )
    return output


def test_a_stable_library_needing_a_symbol_version_an_older_release_lacks_is_reported(tmp_path, capsys):
    """Two stand-ins for libtensorflow_framework.so.2, the same C function in
    both: the old one unversioned (as 2.15 to 2.21 export theirs), the new one
    under a `tensorflow` version (as 2.22 does). A library linked against the
    new one binds its import to that version and would not load into the old
    one; linked against the old one, it needs no version and passes."""
    compiler = shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        pytest.skip("no C++ compiler to build the libraries this test checks")
    framework = 'extern "C" void TF_Probe() {}\n'
    soname = "-Wl,-soname,libtensorflow_framework.so.2"
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    (tmp_path / "tensorflow.map").write_text("tensorflow { global: *; };\n")
    old = _link(compiler, tmp_path / "old" / "libtensorflow_framework.so.2", framework, soname)
    new = _link(
        compiler,
        tmp_path / "new" / "libtensorflow_framework.so.2",
        framework,
        soname,
        f"-Wl,--version-script={tmp_path / 'tensorflow.map'}",
    )
    assert elf_symbols.defined_versions(new) == {"tensorflow"} and elf_symbols.defined_versions(old) == set()
    user = 'extern "C" void TF_Probe();\nextern "C" void GradReverseProbe() { TF_Probe(); }\n'
    frameworks = {"2.15": old, "2.22": new}
    against_new = _link(compiler, tmp_path / "against_new.so", user, str(new))
    assert elf_symbols.needed_versions(against_new)["libtensorflow_framework.so.2"] == {"tensorflow"}
    # (This toy library's own start-up code imports an unversioned
    # __cxa_finalize, a separate finding: only the version findings count here.)
    problems = [p for p in check_wheel.stable_library_problems(against_new, frameworks) if "symbol version" in p]
    assert problems == [
        f"{check_wheel.STABLE_LIBRARY} needs symbol version 'tensorflow' of libtensorflow_framework.so.2, which "
        "TensorFlow 2.15's does not define (it was linked against a newer release: link it against the oldest)"
    ], problems
    assert "TensorFlow 2.15: exports all 1; MISSING symbol versions tensorflow" in capsys.readouterr().out
    against_old = _link(compiler, tmp_path / "against_old.so", user, str(old))
    assert [p for p in check_wheel.stable_library_problems(against_old, frameworks) if "symbol version" in p] == []


def test_find_python_with_headers_refuses_an_interpreter_without_python_h(tmp_path):
    # A stand-in interpreter: the real one, except that its include folder lacks Python.h.
    headless = tmp_path / "python-headless"
    headless.write_text(f'#!/bin/sh\ncase "$2" in *Python.h*) exit 1;; esac\nexec "{sys.executable}" "$@"\n')
    headless.chmod(0o755)
    assert find_python.find_python(str(headless)) == str(headless)
    assert find_python.find_python(str(headless), with_headers=True) is None
    run = [sys.executable, str(ROOT / "build_tools" / "find_python.py"), "--with-headers", str(headless)]
    assert subprocess.run(run, capture_output=True).returncode == 1
    assert find_python.find_python(str(tmp_path / "missing")) is None
