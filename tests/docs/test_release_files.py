"""The release files: LICENSE, CHANGELOG.md, the one version, and what the
built sdist and wheel carry of them.

The first tests read the repository (no build). The last one checks built
distributions: with GRAD_REVERSE_DIST naming a folder, every wheel and sdist
in it must carry LICENSE (the wheel in `.dist-info/licenses/`) and the
license expression; .ci/run sets it after it builds both (step 8). Without
it the test skips, saying so.
"""

import os
import re
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LICENSE = ROOT / "LICENSE"
# The Apache License 2.0's title, its nine sections' headings and its end:
# the whole text, not a pointer to it.
APACHE_2_0_MARKERS = (
    "Apache License",
    "Version 2.0, January 2004",
    "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION",
    "1. Definitions.",
    "2. Grant of Copyright License.",
    "3. Grant of Patent License.",
    "4. Redistribution.",
    "5. Submission of Contributions.",
    "6. Trademarks.",
    "7. Disclaimer of Warranty.",
    "8. Limitation of Liability.",
    "9. Accepting Warranty or Additional Liability.",
    "END OF TERMS AND CONDITIONS",
)


def pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11's tomllib")
    with open(ROOT / "pyproject.toml", "rb") as file:
        return tomllib.load(file)


def package_version() -> str:
    """`__version__` as the build's regex provider reads it: from the source, no import."""
    source = (ROOT / "python" / "grad_reverse" / "__init__.py").read_text(encoding="utf-8")
    found = re.findall(r'^__version__ = "([^"]+)"$', source, re.MULTILINE)
    assert len(found) == 1, f"python/grad_reverse/__init__.py sets __version__ {len(found)} times"
    return found[0]


def test_the_license_file_is_the_whole_apache_2_0_text():
    text = LICENSE.read_text(encoding="utf-8")
    missing = [marker for marker in APACHE_2_0_MARKERS if marker not in text]
    assert not missing, f"LICENSE lacks parts of the Apache License 2.0: {missing}"
    assert len(text.splitlines()) > 150, "LICENSE is shorter than the license's full text"


def test_pyproject_declares_the_license_and_ships_its_file():
    project = pyproject()["project"]
    assert project["license"] == "Apache-2.0"
    assert "LICENSE" in project["license-files"]


def test_the_version_has_one_home():
    config = pyproject()
    assert "version" not in config["project"], "pyproject.toml writes the version: it belongs in __init__.py"
    assert "version" in config["project"]["dynamic"]
    provider = config["tool"]["scikit-build"]["metadata"]["version"]
    assert provider["provider"] == "scikit_build_core.metadata.regex"
    assert provider["input"] == "python/grad_reverse/__init__.py"
    assert re.fullmatch(r"\d+\.\d+\.\d+(?:(?:a|b|rc)\d+)?", package_version())


def test_the_changelogs_newest_section_is_this_version():
    headings = re.findall(r"^## (\S+)", (ROOT / "CHANGELOG.md").read_text(encoding="utf-8"), re.MULTILINE)
    assert headings, "CHANGELOG.md has no '## VERSION' section"
    assert headings[0] == package_version(), (
        f"CHANGELOG.md's newest section is {headings[0]}, the package is {package_version()}"
    )


def built_distributions() -> list:
    folder = os.environ.get("GRAD_REVERSE_DIST")
    if not folder:
        pytest.skip("GRAD_REVERSE_DIST names no folder of built distributions (.ci/run's step 8 sets it)")
    found = sorted(Path(folder).glob("*.whl")) + sorted(Path(folder).glob("*.tar.gz"))
    assert any(p.suffix == ".whl" for p in found), f"no wheel in {folder}"
    assert any(p.name.endswith(".tar.gz") for p in found), f"no sdist in {folder}"
    return found


def test_the_built_wheel_and_sdist_carry_the_license():
    license_text = LICENSE.read_bytes()
    for distribution in built_distributions():
        if distribution.suffix == ".whl":
            with zipfile.ZipFile(distribution) as wheel:
                names = wheel.namelist()
                licenses = [n for n in names if re.fullmatch(r"[^/]+\.dist-info/licenses/LICENSE", n)]
                assert licenses, f"{distribution.name} has no .dist-info/licenses/LICENSE"
                assert wheel.read(licenses[0]) == license_text, (
                    f"{distribution.name}: LICENSE differs from the repository's"
                )
                metadata_name = next(n for n in names if re.fullmatch(r"[^/]+\.dist-info/METADATA", n))
                metadata = wheel.read(metadata_name).decode()
        else:
            with tarfile.open(distribution) as sdist:
                top = sdist.getnames()[0].split("/")[0]
                member = sdist.extractfile(f"{top}/LICENSE")
                assert member is not None and member.read() == license_text, f"{distribution.name}: no LICENSE"
                metadata = sdist.extractfile(f"{top}/PKG-INFO").read().decode()
        assert "License-Expression: Apache-2.0" in metadata.splitlines(), distribution.name
        assert f"Version: {package_version()}" in metadata.splitlines(), distribution.name
