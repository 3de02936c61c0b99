"""Library loading: the library of the running TensorFlow's minor release is
chosen; a missing library, a TensorFlow the installation holds no library
for, a version mismatch, a damaged library and a missing TensorFlow are clear
ImportErrors, the first four raised before any native code is loaded."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow as tf

import grad_reverse
from grad_reverse._native import choice as library_choice
from grad_reverse._native import loader, settings, xla_fallback


def write_build_info(directory: Path, version: str) -> None:
    (directory / library_choice.BUILD_INFO_NAME).write_text(
        json.dumps({"tensorflow_version": version, "cuda": False, "xla": False})
    )


def copy_package(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the installed package under tmp_path, and its library folder."""
    package = Path(grad_reverse.__file__).parent
    copy = tmp_path / "grad_reverse"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy, copy / library_choice.chosen().directory.relative_to(package)


def import_in_subprocess(tmp_path: Path, code: str = "import grad_reverse") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        # GRAD_REVERSE_LIBRARY too, so the child chooses the library this process did.
        env={
            "PYTHONPATH": str(tmp_path),
            "TF_CPP_MIN_LOG_LEVEL": "2",
            "PATH": "/usr/bin:/bin",
            **{k: v for k, v in os.environ.items() if k == "GRAD_REVERSE_LIBRARY"},
        },
    )


def hold_libraries(root: Path, *releases: str) -> Path:
    """A fake _libs folder holding (empty) libraries for `releases`."""
    for release in releases:
        folder = root / f"tf{release}"
        folder.mkdir(parents=True)
        (folder / library_choice.LIBRARY_NAME).write_bytes(b"")
    return root


def test_missing_library_names_the_path_and_the_build_command(tmp_path):
    with pytest.raises(ImportError) as error:
        loader.load_library(tmp_path)
    message = str(error.value)
    assert str(tmp_path / library_choice.LIBRARY_NAME) in message
    assert "pip install ." in message


def test_version_mismatch_names_both_versions_before_loading(tmp_path):
    # Not a shared library at all: loading it would fail differently, so the
    # ImportError proves the version was checked first.
    (tmp_path / library_choice.LIBRARY_NAME).write_bytes(b"not an ELF file")
    write_build_info(tmp_path, "2.0.0")
    with pytest.raises(ImportError) as error:
        loader.load_library(tmp_path)
    message = str(error.value)
    assert "TensorFlow 2.0.0" in message and f"TensorFlow {tf.__version__}" in message


def test_missing_build_record_is_an_import_error(tmp_path):
    (tmp_path / library_choice.LIBRARY_NAME).write_bytes(b"")
    with pytest.raises(ImportError, match="build record"):
        loader.load_library(tmp_path)


def test_import_of_a_package_built_for_another_tensorflow_fails_cleanly(tmp_path):
    if library_choice.chosen().kind == settings.STABLE:
        pytest.skip("the stable-ABI library this process loads is not bound to one TensorFlow release")
    _, libraries = copy_package(tmp_path)
    write_build_info(libraries, "1.15.0")
    result = import_in_subprocess(tmp_path)
    assert result.returncode == 1, result.stderr
    assert "ImportError" in result.stderr and "TensorFlow 1.15.0" in result.stderr


def test_a_patch_release_loads_its_minor_releases_library(tmp_path):
    """A library built for X.Y.0 is loaded by X.Y.1: the check compares minor
    releases. (Not an ELF file, so the load itself fails after the check.)"""
    (tmp_path / library_choice.LIBRARY_NAME).write_bytes(b"not an ELF file")
    write_build_info(tmp_path, f"{library_choice.series(tf.__version__)}.99")
    with pytest.raises(ImportError, match="cannot be loaded"):
        loader.load_library(tmp_path)


@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_a_damaged_library_is_an_import_error_naming_the_file(tmp_path, damage):
    _, libraries = copy_package(tmp_path)
    library = libraries / library_choice.LIBRARY_NAME
    data = library.read_bytes()
    library.write_bytes(data[: len(data) // 3] if damage == "truncated" else bytes(range(256)) * 64)
    result = import_in_subprocess(tmp_path)
    assert result.returncode == 1, (result.returncode, result.stderr[-2000:])  # not a signal
    assert "ImportError" in result.stderr and f"{library} cannot be loaded" in result.stderr, result.stderr[-2000:]


def test_the_library_of_the_running_minor_release_is_chosen(tmp_path):
    libraries = hold_libraries(tmp_path, "2.15", "2.18", "2.21")
    assert library_choice.library_dir(libraries, running="2.18.1") == libraries / "tf2.18"
    assert library_choice.releases_held(libraries) == ["2.15", "2.18", "2.21"]


@pytest.mark.parametrize(
    "running, advice",
    [
        ("2.22.0", "TensorFlow 2.22 is newer than the releases with C++ libraries"),
        ("2.14.1", "TensorFlow 2.14 is older than the supported range"),
        ("2.17.0", "build grad-reverse from source against this TensorFlow"),
    ],
)
def test_a_tensorflow_without_a_library_names_it_and_the_releases_held(tmp_path, running, advice):
    libraries = hold_libraries(tmp_path, "2.15", "2.16", "2.21")
    with pytest.raises(ImportError) as error:
        library_choice.library_dir(libraries, running=running)
    message = str(error.value)
    assert f"runs TensorFlow {running}" in message
    assert "holds op libraries for TensorFlow 2.15, 2.16, 2.21 only" in message
    assert "has C++ libraries for TensorFlow 2.15 to 2.21" in message and advice in message


def test_no_library_at_all_says_how_to_build_one(tmp_path):
    with pytest.raises(ImportError, match="no native op library was found.*pip install ."):
        library_choice.library_dir(tmp_path / "_libs", running=tf.__version__)


def test_the_loaders_range_is_the_builds_range():
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "build_tools" / "tensorflow_requirement.py"
    spec = importlib.util.spec_from_file_location("tensorflow_requirement", path)
    requirement = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(requirement)
    assert library_choice.SUPPORTED == (requirement.OLDEST_SUPPORTED, requirement.NEWEST_SUPPORTED)


def test_without_tensorflow_the_import_says_which_to_install(tmp_path):
    # None in sys.modules makes `import tensorflow` fail as if it were not installed.
    result = import_in_subprocess(tmp_path.parent, "import sys; sys.modules['tensorflow'] = None; import grad_reverse")
    assert result.returncode == 1
    assert "needs TensorFlow 2.15 or newer (its own C++ libraries for 2.15 to 2.21" in result.stderr, result.stderr[
        -2000:
    ]
    assert "pip install tensorflow-cpu" in result.stderr


def test_library_is_loaded_once_and_its_record_matches():
    built = grad_reverse.BUILD_INFO["tensorflow_version"]
    if grad_reverse.BUILD_INFO.get("abi") == settings.STABLE:
        # Built against the C headers of a release no newer than this one.
        assert (
            library_choice.SUPPORTED[0] <= library_choice.release_of(built) <= library_choice.release_of(tf.__version__)
        )
    else:
        assert library_choice.series(built) == library_choice.series(tf.__version__)
    # The ops are registered with TensorFlow, with the signature the package relies on.
    from tensorflow.python.framework import op_def_registry  # private: the op registry

    for op_type, output in [("GradReverse", "y"), ("GradReverseGrad", "dx")]:
        op_def = op_def_registry.get(op_type)
        assert op_def is not None, f"{op_type} is not registered"
        assert [a.name for a in op_def.input_arg][1] == "lambda"
        assert [a.name for a in op_def.output_arg] == [output]
        assert "CPU" in xla_fallback.kernel_devices(op_type)
    # Re-importing does not reload (Python caches the module).
    import importlib

    assert importlib.import_module("grad_reverse.ops").LIBRARY is grad_reverse.ops.LIBRARY
    # One handle: the process's library is loaded once, and ops holds it.
    from grad_reverse._native import loader

    assert loader.loaded() is grad_reverse.ops.LIBRARY
    assert loader.loaded().path == Path(grad_reverse.BUILD_INFO["library"]["path"])


def test_cuda_kernel_is_compiled_in_when_a_cuda_compiler_was_available():
    """CMake's AUTO mode builds the CUDA kernel whenever nvcc is found; CI has
    a CUDA toolkit, so this proves there that the GPU build compiles, links
    and loads into TensorFlow."""
    import os
    import shutil

    expected = os.environ.get("GRAD_REVERSE_EXPECT_CUDA")
    if expected == "0":
        pytest.skip("built CPU-only on purpose (GRAD_REVERSE_EXPECT_CUDA=0; see test_backward.py)")
    # A wheel built elsewhere says so instead (GRAD_REVERSE_EXPECT_CUDA=1).
    if expected != "1" and not (shutil.which("nvcc") or os.path.exists("/usr/local/cuda/bin/nvcc")):
        pytest.skip("no CUDA compiler on this machine: the CPU-only build is expected")
    from grad_reverse import _kernels
    from grad_reverse._native.xla_fallback import kernel_devices

    assert _kernels.cuda_compiled_in()
    if grad_reverse.BUILD_INFO.get("abi") == settings.STABLE:
        # The stable-ABI library has no CUDA kernel by design (only a GPU
        # forward); the installation's C++ libraries must carry it.
        records = [
            loader.read_build_info(library_choice.LIBRARIES_DIR / f"tf{r}") for r in library_choice.releases_held()
        ]
        assert records and all(record["cuda"] for record in records), records
        assert "GPU" in kernel_devices("GradReverse") and "GPU" not in kernel_devices("GradReverseGrad")
        return
    assert grad_reverse.BUILD_INFO["cuda"], "nvcc is available but the library was built without CUDA"
    assert "GPU" in kernel_devices("GradReverseGrad")


def test_xla_kernels_are_compiled_in_or_the_build_record_says_why_not():
    # Exactly when is checked in test_tensorflow_versions (TensorFlow 2.19's
    # tf2xla headers cannot be compiled against); here: never silently.
    build = grad_reverse.BUILD_INFO
    assert build["xla"] or build.get("xla_note"), build


def test_a_stable_library_built_against_a_newer_release_is_refused_before_loading(tmp_path):
    # A source build's stable library (against the running release) moved to
    # an older TensorFlow; not an ELF file, so only the check can give this message.
    (tmp_path / library_choice.LIBRARY_NAME).write_bytes(b"not an ELF file")
    (tmp_path / library_choice.BUILD_INFO_NAME).write_text(
        json.dumps({"abi": "stable", "tensorflow_version": "2.99.0", "oldest_tensorflow": "2.99", "xla": False})
    )
    with pytest.raises(ImportError) as error:
        loader.load_library(tmp_path)
    message = str(error.value)
    assert "built against TensorFlow 2.99.0" in message and f"runs TensorFlow {tf.__version__}" in message
    assert "install TensorFlow 2.99 or newer" in message


@pytest.mark.parametrize(
    "record, expected",
    [
        (
            {"built_for": "source build", "tensorflow_version": "2.22.0", "oldest_tensorflow": "2.22"},
            "2.22.0 and newer (a source build: against the running release's TensorFlow C API)",
        ),
        (
            {"built_for": "portable wheel", "tensorflow_version": "2.15.1", "oldest_tensorflow": "2.15"},
            "any from 2.15 on (TensorFlow's C API; headers of 2.15.1)",
        ),
    ],
)
def test_info_says_which_releases_the_stable_library_loads_into(record, expected):
    from grad_reverse import info

    assert info._stable_built_against(record, "2.15") == expected


MOVED_SYMBOL = "_ZN10tensorflow27GradReverseProbeMovedSymbolEv"  # tensorflow::GradReverseProbeMovedSymbol()


@pytest.mark.parametrize("mode", ["auto", "release"])
def test_a_cpp_library_needing_a_missing_cpp_symbol_falls_back_to_the_stable_library_in_auto(tmp_path, mode):
    """The running release's C++ library replaced by one (built here) that
    imports a C++ symbol no TensorFlow defines, as a library linked against
    another build of this release would: `auto` loads the stable library and
    warns naming the symbol, and the op runs; `release` is an ImportError."""
    held = library_choice.LIBRARIES_DIR / f"tf{library_choice.series(tf.__version__)}"
    if not (held.is_dir() and library_choice.has_stable()):
        pytest.skip("needs this TensorFlow's C++ library and the stable-ABI library")
    compiler = shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        pytest.skip("no C++ compiler to build the library that imports a missing C++ symbol")
    copy = tmp_path / "grad_reverse"
    shutil.copytree(Path(grad_reverse.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    source = tmp_path / "moved.cc"
    source.write_text(
        "namespace tensorflow { void GradReverseProbeMovedSymbol(); }\n"
        "static int touched = (tensorflow::GradReverseProbeMovedSymbol(), 0);\n"
    )
    library = copy / "_libs" / held.name / library_choice.LIBRARY_NAME
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(source)], check=True, capture_output=True)
    code = (
        "import grad_reverse, tensorflow as tf\n"
        "print(grad_reverse.BUILD_INFO['library']['kind'])\n"
        "x = tf.constant([1.0, -2.0])\n"
        "with tf.GradientTape() as tape:\n"
        "    tape.watch(x)\n"
        "    y = grad_reverse.grad_reverse(x, 0.5)\n"
        "print(tape.gradient(y, x).numpy().tolist())\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(tmp_path), "TF_CPP_MIN_LOG_LEVEL": "2", "GRAD_REVERSE_LIBRARY": mode},
    )
    if mode == "release":
        assert result.returncode == 1, result.stdout
        assert f"{library} cannot be loaded" in result.stderr and MOVED_SYMBOL in result.stderr, result.stderr[-2000:]
        return
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["stable", "[-0.5,", "-0.5]"], result.stdout
    warning = next(line for line in result.stderr.splitlines() if "RuntimeWarning" in line)
    assert f"undefined symbol {MOVED_SYMBOL}" in warning and "Using the stable-ABI library instead" in warning


def test_the_package_imports_without_tensorboard(tmp_path):
    # TensorFlow 2.22 no longer installs TensorBoard; None in sys.modules makes
    # `import tensorboard` fail as if it were not installed.
    code = (
        "import sys; sys.modules['tensorboard'] = None\n"
        "import grad_reverse, grad_reverse.serving, grad_reverse.adaptation, grad_reverse.info\n"
        "from grad_reverse.__main__ import main\n"
    )
    package_root = Path(grad_reverse.__file__).resolve().parents[1]
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(package_root), "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert result.returncode == 0, result.stderr[-2000:]


def test_without_tensorflow_and_keras_backend_a_jax_environment_hears_of_keras_backend_first(tmp_path):
    # Keras' default backend is TensorFlow: a JAX user who did not set KERAS_BACKEND
    # gets the import's error; it must open with the setting, not with installing TensorFlow.
    (tmp_path / "jax").mkdir()
    (tmp_path / "jax" / "__init__.py").write_text("")  # found by find_spec, as an installed JAX is
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    env.update(
        HOME=str(tmp_path), PYTHONPATH=os.pathsep.join([str(tmp_path), str(Path(grad_reverse.__file__).parents[1])])
    )
    code = "import sys; sys.modules['tensorflow'] = None; import grad_reverse"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: Keras runs on TensorFlow, its default backend (KERAS_BACKEND is not set)"), (
        last
    )
    assert "set KERAS_BACKEND=jax" in last and "pip install tensorflow" in last, last
    # With KERAS_BACKEND=tensorflow said, the TensorFlow advice comes first, as before.
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=dict(env, KERAS_BACKEND="tensorflow"),
        timeout=300,
    )
    assert result.stderr.strip().splitlines()[-1].startswith("ImportError: grad_reverse needs TensorFlow 2.15 or newer")
