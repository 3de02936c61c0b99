"""Library loading: missing library and TensorFlow version mismatch are clear
ImportErrors, raised before any native code is loaded."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow as tf

import grad_reverse
from grad_reverse import _loader, _xla


def write_build_info(directory: Path, version: str) -> None:
    (directory / _loader.BUILD_INFO_NAME).write_text(json.dumps({"tensorflow_version": version, "cuda": False, "xla": False}))


def test_missing_library_names_the_path_and_the_build_command(tmp_path):
    with pytest.raises(ImportError) as error:
        _loader.load_library(tmp_path)
    message = str(error.value)
    assert str(tmp_path / _loader.LIBRARY_NAME) in message
    assert "pip install ." in message


def test_version_mismatch_names_both_versions_before_loading(tmp_path):
    # Not a shared library at all: loading it would fail differently, so the
    # ImportError proves the version was checked first.
    (tmp_path / _loader.LIBRARY_NAME).write_bytes(b"not an ELF file")
    write_build_info(tmp_path, "2.0.0")
    with pytest.raises(ImportError) as error:
        _loader.load_library(tmp_path)
    message = str(error.value)
    assert "TensorFlow 2.0.0" in message and f"TensorFlow {tf.__version__}" in message


def test_missing_build_record_is_an_import_error(tmp_path):
    (tmp_path / _loader.LIBRARY_NAME).write_bytes(b"")
    with pytest.raises(ImportError, match="build record"):
        _loader.load_library(tmp_path)


def test_import_of_a_package_built_for_another_tensorflow_fails_cleanly(tmp_path):
    package = Path(grad_reverse.__file__).parent
    copy = tmp_path / "grad_reverse"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    write_build_info(copy, "1.15.0")
    result = subprocess.run(
        [sys.executable, "-c", "import grad_reverse"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": str(tmp_path), "TF_CPP_MIN_LOG_LEVEL": "2", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 1, result.stderr
    assert "ImportError" in result.stderr and "TensorFlow 1.15.0" in result.stderr


def test_library_is_loaded_once_and_its_record_matches():
    assert grad_reverse.BUILD_INFO["tensorflow_version"] == tf.__version__
    # The ops are registered with TensorFlow, with the signature the package relies on.
    from tensorflow.python.framework import op_def_registry  # private: the op registry

    for op_type, output in [("GradReverse", "y"), ("GradReverseGrad", "dx")]:
        op_def = op_def_registry.get(op_type)
        assert op_def is not None, f"{op_type} is not registered"
        assert [a.name for a in op_def.input_arg][1] == "lambda"
        assert [a.name for a in op_def.output_arg] == [output]
        assert "CPU" in _xla.kernel_devices(op_type)
    # Re-importing does not reload (Python caches the module).
    import importlib

    assert importlib.import_module("grad_reverse.ops")._library is grad_reverse.ops._library


def test_cuda_kernel_is_compiled_in_when_a_cuda_compiler_was_available():
    """CMake's AUTO mode builds the CUDA kernel whenever nvcc is found; CI has
    a CUDA toolkit, so this proves there that the GPU build compiles, links
    and loads into TensorFlow."""
    import os
    import shutil

    if not (shutil.which("nvcc") or os.path.exists("/usr/local/cuda/bin/nvcc")):
        pytest.skip("no CUDA compiler on this machine: the CPU-only build is expected")
    if os.environ.get("GRAD_REVERSE_EXPECT_CUDA") == "0":
        pytest.skip("built CPU-only on purpose (GRAD_REVERSE_EXPECT_CUDA=0; see test_backward.py)")
    assert grad_reverse.BUILD_INFO["cuda"], "nvcc is available but the library was built without CUDA"
    from grad_reverse import _kernels

    assert _kernels.cuda_compiled_in()
    from grad_reverse._xla import kernel_devices

    assert "GPU" in kernel_devices("GradReverseGrad")


def test_xla_kernels_are_compiled_in_or_the_build_record_says_why_not():
    # Exactly when is checked in test_tensorflow_versions (TensorFlow 2.19's
    # tf2xla headers cannot be compiled against); here: never silently.
    build = grad_reverse.BUILD_INFO
    assert build["xla"] or build.get("xla_note"), build
