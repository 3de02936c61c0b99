#!/usr/bin/env python3
"""Makes the sysroot the portable wheel is compiled against: Debian bullseye's
glibc 2.31 and libstdc++ 10, from pinned packages.

Why: a library linked against this machine's glibc and libstdc++ asks for
their newest symbol versions (GLIBC_2.34, GLIBCXX_3.4.30 on Debian 12), and
refuses to load on older systems where TensorFlow itself runs (its wheels are
manylinux_2_27: GLIBC_2.27, GLIBCXX_3.4.22). Compiling with the host compiler
against older C and C++ runtime libraries (`--sysroot`, and libstdc++ 10's
headers and library instead of the compiler's own) keeps every symbol version
at or below theirs, with the same C++ ABI (libstdc++, C++11 ABI) as TensorFlow.

Each package is pinned by version and SHA-256 and fetched from the Debian
pool (bullseye's final point release, which no longer changes), so two
builds compile against the same files. The packages are unpacked with Python
alone (ar + tar), so the build machine needs no dpkg; absolute symbolic
links inside them are made relative, so nothing in the sysroot points back
to the build machine's own libraries.

  python build_tools/sysroot.py DEST [--arch x86_64|aarch64]

prints the sysroot's path (DEST/<arch>); a sysroot already complete is
reused. GRAD_REVERSE_DEBIAN_MIRROR names another mirror of the Debian pool.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import sys
import tarfile
import urllib.request
from pathlib import Path
from typing import NamedTuple

MIRROR = os.environ.get("GRAD_REVERSE_DEBIAN_MIRROR", "http://deb.debian.org/debian")


class Package(NamedTuple):
    name: str
    version: str
    pool_path: str  # under the mirror
    sha256: str


# Debian 11 "bullseye", point release 11.11 (from `apt-cache show` of its
# main suite). libc6 provides the shared C runtime the linker resolves
# against, libc6-dev its headers and start files, linux-libc-dev the kernel
# headers glibc's headers include, libstdc++6 and libstdc++-10-dev the C++
# runtime and its headers, libgcc-s1 the unwinder that libstdc++ needs.
PACKAGES = {
    "x86_64": (
        Package(
            "libc6",
            "2.31-13+deb11u11",
            "pool/main/g/glibc/libc6_2.31-13+deb11u11_amd64.deb",
            "05f7264da867b37f4c5ce49266b558ea1e81e05a9464f623152fca70f3550282",
        ),
        Package(
            "libc6-dev",
            "2.31-13+deb11u11",
            "pool/main/g/glibc/libc6-dev_2.31-13+deb11u11_amd64.deb",
            "e7f7b45d9c5cfcf37609f0b6efd3c645272c812144703af89dfd32218fcb0fd3",
        ),
        Package(
            "linux-libc-dev",
            "5.10.223-1",
            "pool/main/l/linux/linux-libc-dev_5.10.223-1_amd64.deb",
            "e3be603bd12377bb90fcfb0f2048ca3a81c886e49d6f09945b82159d1c54f7b2",
        ),
        Package(
            "libstdc++6",
            "10.2.1-6",
            "pool/main/g/gcc-10/libstdc++6_10.2.1-6_amd64.deb",
            "5c155c58935870bf3b4bfe769116841c0d286a74f59eccfd5645693ac23f06b1",
        ),
        Package(
            "libstdc++-10-dev",
            "10.2.1-6",
            "pool/main/g/gcc-10/libstdc++-10-dev_10.2.1-6_amd64.deb",
            "20b1f56863dcc5f187d6cb53b2aa6149bd013be4ec67e10c2c31a22fda619a01",
        ),
        Package(
            "libgcc-s1",
            "10.2.1-6",
            "pool/main/g/gcc-10/libgcc-s1_10.2.1-6_amd64.deb",
            "e478f2709d8474165bb664de42e16950c391f30eaa55bc9b3573281d83a29daf",
        ),
    ),
    "aarch64": (
        Package(
            "libc6",
            "2.31-13+deb11u11",
            "pool/main/g/glibc/libc6_2.31-13+deb11u11_arm64.deb",
            "baaa9aa184e2f21738c5819055e6740cc5b22f198e3f416e33f82b40ff6933d8",
        ),
        Package(
            "libc6-dev",
            "2.31-13+deb11u11",
            "pool/main/g/glibc/libc6-dev_2.31-13+deb11u11_arm64.deb",
            "28d478134722dcd4b0bd2045a199301d18713bf95947b9fce66634e7aeacab2e",
        ),
        Package(
            "linux-libc-dev",
            "5.10.223-1",
            "pool/main/l/linux/linux-libc-dev_5.10.223-1_arm64.deb",
            "8b6374a64412d33eac61d74f77b8f932da4b8a707ea8a614791e2a35b8917618",
        ),
        Package(
            "libstdc++6",
            "10.2.1-6",
            "pool/main/g/gcc-10/libstdc++6_10.2.1-6_arm64.deb",
            "7869aa540cc46e9f3d4267d5bde2af0e5b429a820c1d6f1a4cfccfe788c31890",
        ),
        Package(
            "libstdc++-10-dev",
            "10.2.1-6",
            "pool/main/g/gcc-10/libstdc++-10-dev_10.2.1-6_arm64.deb",
            "cee7ca63613b50a8a51cc670db385c7e6d1181b72c94148fc8b7992e4570782d",
        ),
        Package(
            "libgcc-s1",
            "10.2.1-6",
            "pool/main/g/gcc-10/libgcc-s1_10.2.1-6_arm64.deb",
            "e2fcdb378d3c1ad1bcb64d4fb6b37aab44011152beca12a4944f435a2582df1f",
        ),
    ),
}
COMPLETE_MARKER = ".grad-reverse-sysroot.json"


class SysrootError(RuntimeError):
    """A package could not be fetched, verified or unpacked."""


def fetch(package: Package, cache: Path) -> bytes:
    """The package's bytes, from the cache or the mirror, checked against its pin."""
    path = cache / Path(package.pool_path).name
    if path.is_file():
        data = path.read_bytes()
    else:
        url = f"{MIRROR}/{package.pool_path}"
        try:
            with urllib.request.urlopen(url, timeout=120) as response:
                data = response.read()
        except OSError as error:
            raise SysrootError(f"cannot download {package.name} {package.version} from {url}: {error}") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != package.sha256:
        path.unlink(missing_ok=True)
        raise SysrootError(
            f"{package.name} {package.version}: SHA-256 {digest} is not the pinned "
            f"{package.sha256} (a corrupted download, or a mirror serving other files)"
        )
    cache.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return data


def data_archive(deb: bytes, name: str) -> tarfile.TarFile:
    """The data.tar.* member of a .deb (an `ar` archive), opened."""
    if not deb.startswith(b"!<arch>\n"):
        raise SysrootError(f"{name} is not a Debian package (no ar header)")
    offset = 8
    while offset + 60 <= len(deb):
        header = deb[offset : offset + 60]
        member = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        start = offset + 60
        if member.startswith("data.tar"):
            return tarfile.open(fileobj=io.BytesIO(deb[start : start + size]), mode="r:*")
        offset = start + size + (size % 2)  # members are 2-byte aligned
    raise SysrootError(f"{name} has no data.tar member")


def unpack(deb: bytes, name: str, root: Path) -> None:
    """Extracts the package's files under root; absolute links become relative."""
    with data_archive(deb, name) as archive:
        for member in archive.getmembers():
            target = root / member.name
            if not target.resolve().is_relative_to(root.resolve()):
                raise SysrootError(f"{name}: {member.name} would land outside the sysroot")
            if member.issym() and member.linkname.startswith("/"):
                member.linkname = os.path.relpath(root / member.linkname.lstrip("/"), target.parent)
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
            elif member.issym():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.unlink(missing_ok=True)
                target.symlink_to(member.linkname)
            elif member.isfile():
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.extractfile(member) as source, open(target, "wb") as out:
                    shutil.copyfileobj(source, out)
                target.chmod(member.mode & 0o755 | 0o600)
            # hard links, devices: none in these packages' files that the build reads


def make_sysroot(dest: Path, arch: str) -> Path:
    """DEST/<arch>, made from the pinned packages unless already complete."""
    if arch not in PACKAGES:
        raise SysrootError(f"no sysroot packages are pinned for {arch!r}; pinned: {', '.join(PACKAGES)}")
    root = dest / arch
    marker = root / COMPLETE_MARKER
    pins = [package._asdict() for package in PACKAGES[arch]]
    if marker.is_file() and json.loads(marker.read_text()) == pins:
        return root
    if root.exists():  # incomplete, or made from other pins: start afresh
        shutil.rmtree(root)
    root.mkdir(parents=True)
    for package in PACKAGES[arch]:
        unpack(fetch(package, dest / "debs"), package.name, root)
    marker.write_text(json.dumps(pins, indent=1))
    return root


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dest", type=Path, help="folder to hold the sysroot and the downloaded packages")
    parser.add_argument(
        "--arch", default="x86_64", choices=sorted(PACKAGES), help="CPU of the sysroot (default: x86_64)"
    )
    args = parser.parse_args(argv)
    try:
        print(make_sysroot(args.dest.resolve(), args.arch))
    except SysrootError as error:
        print(f"sysroot.py: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
