"""Platforms, said plainly: on an OS the build has no branch for, `pip install .`
stops at its start with one message and an override variable, like the
TensorFlow-range check (build_tools/supported_platforms.py). Other OSes are
simulated: in the unit tests by passing (OS, CPU), and in the real
`pip install .` by a .pth file that makes pip's build-backend process (only
that one, not pip itself) believe it runs on macOS."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLATFORMS = ROOT / "build_tools" / "supported_platforms.py"
VARIABLE = "GRAD_REVERSE_ALLOW_UNTESTED_PLATFORM"


@pytest.fixture
def platforms(monkeypatch):
    monkeypatch.delenv(VARIABLE, raising=False)
    spec = importlib.util.spec_from_file_location("supported_platforms", PLATFORMS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "system, machine, level",
    [
        ("linux", "x86_64", "tested"),
        ("linux", "aarch64", "tested under emulation"),
        ("linux", "ppc64le", "untested"),
        ("darwin", "aarch64", "untested"),
        ("win32", "x86_64", "untested"),
    ],
)
def test_support_levels(platforms, system, machine, level):
    assert platforms.support_level(system, machine) == level


def test_this_machine_is_one_the_build_knows(platforms):
    # The suite runs where the package was built: Linux, so at least compiled.
    assert platforms.support_level(*platforms.current()) in ("tested", "tested under emulation")
    platforms.check_platform()


@pytest.mark.parametrize("system, machine", [("linux", "x86_64"), ("linux", "aarch64"), ("linux", "riscv64")])
def test_linux_goes_on_on_any_cpu(platforms, system, machine):
    # The portable CPU path compiles wherever GCC does; only the OS stops the build.
    assert platforms.untested_message(system, machine) is None
    platforms.check_platform(system, machine)


@pytest.mark.parametrize(
    "system, machine, name",
    [
        ("darwin", "aarch64", "macOS"),
        ("win32", "x86_64", "Windows"),
        ("freebsd", "x86_64", "freebsd"),
    ],
)
def test_another_os_stops_with_what_is_tested_and_the_override(platforms, system, machine, name):
    with pytest.raises(platforms.UntestedPlatform) as error:
        platforms.check_platform(system, machine)
    message = str(error.value)
    assert "built and tested on Linux x86-64 only" in message
    assert f"this is {name} ({system}, {machine})" in message
    assert f"{VARIABLE}=1 to try anyway" in message


@pytest.mark.parametrize("value, stops", [("1", False), ("yes", False), ("0", True), ("", True)])
def test_the_override_variable(platforms, monkeypatch, value, stops):
    monkeypatch.setenv(VARIABLE, value)
    if stops:
        with pytest.raises(platforms.UntestedPlatform):
            platforms.check_platform("darwin", "aarch64")
    else:
        platforms.check_platform("darwin", "aarch64")


@pytest.mark.parametrize("machine, folded", [("AMD64", "x86_64"), ("arm64", "aarch64"), ("x86_64", "x86_64")])
def test_cpu_names_are_folded(platforms, monkeypatch, machine, folded):
    monkeypatch.setattr(platforms.platform, "machine", lambda: machine)
    monkeypatch.setattr(platforms.sys, "platform", "linux")
    assert platforms.current() == ("linux", folded)


# ------------------------------------------------- the real `pip install .` ----

# Runs at the start-up of every process of the fake environment's Python, but
# changes only pip's build-backend process (pyproject_hooks' _in_process.py).
SIMULATE_MACOS = 'import sys; exec("if any(\\"_in_process\\" in a for a in sys.argv): sys.platform = \\"darwin\\"")\n'


def fake_macos_environment(tmp_path: Path, tensorflow: str = "") -> Path:
    """A virtual environment (no pip) whose build backend sees macOS, holding
    `tensorflow` (NAME==VERSION) as dist-info metadata when given."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import site; print(site.getsitepackages()[0])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    (site / "zz_simulate_macos.pth").write_text(SIMULATE_MACOS)
    if tensorflow:
        name, version = tensorflow.split("==")
        dist_info = site / f"{name.replace('-', '_')}-{version}.dist-info"
        dist_info.mkdir()
        (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return python


def pip_install(python: Path, **env: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-cache-dir", str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **env},
    )
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    return output


def test_pip_install_on_macos_stops_at_the_start_with_one_message(tmp_path):
    output = pip_install(fake_macos_environment(tmp_path))
    assert "Getting requirements to build wheel did not run successfully" in output, output
    assert "ERROR: grad-reverse is built and tested on Linux x86-64 only" in output
    assert "this is macOS (darwin, " in output
    assert f"{VARIABLE}=1 to try anyway" in output
    assert output.count("grad-reverse is built and tested") == 1  # one message, no traceback
    assert not any(
        word in output for word in ("Traceback", "CMake Error", "The CXX compiler", "Building CXX", "fatal error")
    ), output


def test_pip_install_on_macos_with_the_override_goes_on_to_the_next_check(tmp_path):
    # Past the platform check, the TensorFlow-range check (a fake 2.14.1)
    # stops it: proof that the override let the build go on, without a build.
    output = pip_install(fake_macos_environment(tmp_path, "tensorflow-cpu==2.14.1"), **{VARIABLE: "1"})
    assert "grad-reverse is built and tested" not in output, output
    assert "grad-reverse supports TensorFlow 2.15 to 2.21" in output, output
