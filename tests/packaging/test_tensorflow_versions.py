"""The supported TensorFlow range, the header probes and the CUDA messages:
everything that decides what a build against a given release contains."""

import importlib.util
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tensorflow as tf

import grad_reverse

ROOT = Path(__file__).resolve().parents[2]
PROVIDER = ROOT / "build_tools" / "tensorflow_requirement.py"


def load_provider():
    spec = importlib.util.spec_from_file_location("tensorflow_requirement", PROVIDER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def provider(monkeypatch):
    monkeypatch.delenv("GRAD_REVERSE_ALLOW_UNSUPPORTED_TENSORFLOW", raising=False)
    return load_provider()


# ------------------------------------------------------ supported range ----


@pytest.mark.parametrize("version", ["2.15.0", "2.15.1", "2.18.1", "2.21.0", "2.21.0rc1"])
def test_releases_inside_the_range_are_supported(provider, version):
    assert provider.unsupported_message(version) is None
    provider.check_supported(version)


@pytest.mark.parametrize("version", ["2.14.1", "1.15.5"])
def test_releases_older_than_the_range_name_the_range_and_the_override(provider, version):
    with pytest.raises(provider.UnsupportedTensorFlow) as error:
        provider.check_supported(version, "tensorflow-cpu")
    message = str(error.value)
    assert "supports TensorFlow 2.15 to 2.21" in message
    assert f"tensorflow-cpu {version}" in message and "older" in message
    assert "GRAD_REVERSE_ALLOW_UNSUPPORTED_TENSORFLOW=1" in message


@pytest.mark.parametrize("version", ["2.22.0", "2.23.0.dev20261026", "3.0.0"])
def test_releases_newer_than_the_range_build_with_a_warning(provider, version, capsys):
    provider.check_supported(version, "tf-nightly")  # no error: the stable library serves it
    warning = capsys.readouterr().err
    assert f"tf-nightly {version}, newer than the newest tested release" in warning
    assert "stable-ABI library" in warning


def test_the_override_builds_anyway(provider, monkeypatch):
    monkeypatch.setenv("GRAD_REVERSE_ALLOW_UNSUPPORTED_TENSORFLOW", "1")
    provider.check_supported("2.14.0")  # no error


def test_the_running_tensorflow_is_inside_the_range(provider):
    assert provider.unsupported_message(tf.__version__) is None


def test_keras_3_is_required_only_where_tensorflow_uses_it(provider):
    assert provider.other_dependencies("2.15.1") == ["numpy"]
    assert provider.other_dependencies("2.16.2") == ["numpy", "keras>=3"]


@pytest.mark.parametrize("version, code", [("2.15.1", 0), ("2.21.0", 0), ("2.14.1", 2), ("2.22.0", 3)])
def test_cmake_asks_the_same_question(version, code):
    """3: newer than the tested range, so CMake builds the C++ library as a best effort."""
    result = subprocess.run(
        [sys.executable, str(PROVIDER), "check-version", version],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == code, result.stderr
    assert ("supports TensorFlow 2.15 to 2.21" in result.stderr) == (code == 2)
    assert ("newer than the newest tested release" in result.stdout) == (code == 3)


def fake_environment(tmp_path: Path, distribution: str, version: str) -> Path:
    """A virtual environment (no pip) whose only TensorFlow is dist-info metadata."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import site; print(site.getsitepackages()[0])"], capture_output=True, text=True, check=True
    ).stdout.strip()
    dist_info = Path(site) / f"{distribution.replace('-', '_')}-{version}.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n")
    return python


def test_pip_install_against_an_unsupported_tensorflow_stops_at_the_start(tmp_path):
    """The real `pip install .` into an environment holding TensorFlow 2.14.1:
    the build stops while asking for its requirements, with the range in the
    message, before CMake or a compiler runs."""
    python = fake_environment(tmp_path, "tensorflow-cpu", "2.14.1")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-cache-dir", str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "grad-reverse supports TensorFlow 2.15 to 2.21" in output, output
    assert "tensorflow-cpu 2.14.1" in output
    assert "GRAD_REVERSE_ALLOW_UNSUPPORTED_TENSORFLOW=1" in output
    assert "Getting requirements to build wheel did not run successfully" in output
    assert not any(word in output for word in ("CMake", "Building CXX", "fatal error")), output


# ---------------------------------------------------------- header probes ----


def preprocess(include_dir: Path) -> str:
    compiler = shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        pytest.skip("no C++ compiler on this machine")
    source = '#include "cc/kernels/tf_compat.h"\nxla=GRAD_REVERSE_TF_HAS_XLA_HEADERS builder=GRAD_REVERSE_XLA_BUILDER_HEADER\n'
    result = subprocess.run(
        [compiler, "-std=c++17", "-E", "-P", "-x", "c++", "-I", str(ROOT), "-I", str(include_dir), "-"],
        input=source,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


def headers(root: Path, *paths: str) -> Path:
    for path in paths:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("")
    return root


@pytest.mark.parametrize(
    "builder", ["xla/hlo/builder/xla_builder.h", "xla/client/xla_builder.h"], ids=["2.19+", "2.15-2.18"]
)
def test_the_compat_header_finds_the_xla_builder_where_the_release_keeps_it(tmp_path, builder):
    include = headers(tmp_path, builder, "tensorflow/compiler/tf2xla/xla_op_kernel.h")
    assert preprocess(include) == f'xla=1 builder="{builder}"'


def test_without_tf2xla_headers_the_probe_says_no_xla(tmp_path):
    include = headers(tmp_path, "xla/client/xla_builder.h")
    assert preprocess(include).startswith("xla=0")


def tf2xla_headers_preprocess() -> subprocess.CompletedProcess:
    """The preprocessor over TensorFlow's tf2xla kernel API, with its flags: what
    the build's probe asks, asked again here independently of CMake."""
    compiler = shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        pytest.skip("no C++ compiler on this machine")
    include = Path(tf.sysconfig.get_include())
    flags = [f for f in tf.sysconfig.get_compile_flags() if f.startswith("-D")]
    return subprocess.run(
        [
            compiler,
            "-std=c++17",
            "-M",
            "-x",
            "c++",
            *flags,
            "-I",
            str(ROOT),
            "-isystem",
            str(include),
            "-isystem",
            str(include / "external/highwayhash"),
            "-isystem",
            str(include / "external/farmhash_archive/src"),
            "-",
        ],
        input='#include "tensorflow/compiler/tf2xla/xla_op_kernel.h"\n',
        capture_output=True,
        text=True,
    )


def test_the_build_has_xla_kernels_exactly_when_the_tf2xla_headers_are_usable():
    usable = tf2xla_headers_preprocess().returncode == 0
    assert grad_reverse.BUILD_INFO["xla"] == usable
    if usable:
        assert not grad_reverse.BUILD_INFO.get("xla_note")
    else:  # e.g. TensorFlow 2.19: its tf2xla headers include LLVM headers it does not ship
        assert "cannot be compiled against" in grad_reverse.BUILD_INFO["xla_note"]
        assert "does not ship" in grad_reverse.BUILD_INFO["xla_note"]


# ------------------------------------------------------ CUDA mismatches ----


def run_cmake_check(tmp_path: Path, nvcc: str, tf_cuda: str) -> subprocess.CompletedProcess:
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("cmake is not installed")
    script = tmp_path / "check.cmake"
    script.write_text(
        textwrap.dedent(f"""\
        include("{ROOT.as_posix()}/cmake/TensorFlowFeatures.cmake")
        grad_reverse_check_cuda_versions("{nvcc}" "{tf_cuda}" note)
        message(STATUS "note=[${{note}}]")
    """)
    )
    return subprocess.run([cmake, "-P", str(script)], capture_output=True, text=True)


def test_the_build_warns_when_nvcc_and_tensorflow_differ_in_cuda_major(tmp_path):
    result = run_cmake_check(tmp_path, "13.0.88", "12.5.1")
    assert result.returncode == 0
    warning = " ".join(result.stderr.split())  # CMake wraps long warnings
    assert "CMake Warning" in warning
    assert "nvcc is CUDA 13.0.88, but this TensorFlow was built with CUDA 12.5.1" in warning
    assert "static runtime" in warning and "driver that supports CUDA 13" in warning
    assert "GRAD_REVERSE_CUDA=OFF" in warning
    assert "note=[built with CUDA 13.0.88" in result.stdout


@pytest.mark.parametrize(
    "nvcc, tf_cuda", [("12.8.93", "12.5.1"), ("13.0.88", "")], ids=["same major", "CPU TensorFlow"]
)
def test_the_build_is_quiet_when_cuda_majors_match_or_tensorflow_has_no_cuda(tmp_path, nvcc, tf_cuda):
    result = run_cmake_check(tmp_path, nvcc, tf_cuda)
    assert result.returncode == 0 and "Warning" not in result.stderr
    assert "note=[]" in result.stdout
