"""The stable-ABI library (cc/stable/, TensorFlow's C API only) and its choice
at import: it imports nothing but the C API and the C/C++ runtimes, the
running TensorFlow exports all of it, it registers exactly the C++ library's
op definitions, a SavedModel moves between the two, and the loader picks it
where no per-release library fits (GRAD_REVERSE_LIBRARY forces either).

Two libraries that register the same ops cannot share a process: whatever
needs the other kind than this process loaded runs in a subprocess. The op
tests themselves run against the stable library when the whole suite runs
with GRAD_REVERSE_LIBRARY=stable (CI's wheel rows do).
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import elf_symbols  # build_tools/ is on the path (pyproject's pytest `pythonpath`)
import pytest
import tensorflow as tf

import grad_reverse
from grad_reverse._native import choice as library_choice
from grad_reverse._native import loader, settings
from grad_reverse._tools import library_path

ROOT = Path(__file__).resolve().parents[2]

PACKAGE = Path(grad_reverse.__file__).resolve().parent
STABLE = PACKAGE / "_libs" / library_choice.STABLE_DIR_NAME / library_choice.LIBRARY_NAME
RELEASE = PACKAGE / "_libs" / f"tf{library_choice.series(tf.__version__)}" / library_choice.LIBRARY_NAME
FRAMEWORK = Path(tf.sysconfig.get_lib()) / "libtensorflow_framework.so.2"

needs_stable = pytest.mark.skipif(not STABLE.is_file(), reason="this installation has no stable-ABI library")
needs_both = pytest.mark.skipif(
    not (STABLE.is_file() and RELEASE.is_file()),
    reason="needs both a C++ library for this TensorFlow and the stable-ABI library",
)


def run_python(code: str, library: str, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "GRAD_REVERSE_LIBRARY": library, "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


# ------------------------------------------------------------ the ABI ----


@needs_stable
def test_the_stable_library_imports_only_the_c_api_and_the_c_and_cpp_runtimes():
    assert elf_symbols.non_c_api_imports(STABLE) == []
    imported = elf_symbols.c_api_imports(STABLE)
    assert "TF_RegisterKernelBuilder" in imported and "TF_ForwardInputOrAllocateOutput" in imported


@pytest.mark.skipif(not RELEASE.is_file(), reason="no C++ library for this TensorFlow here")
def test_the_import_check_finds_the_cpp_librarys_tensorflow_names():
    # The same check on the C++ library must object: it proves the check can.
    names = elf_symbols.non_c_api_imports(RELEASE)
    assert any(name.startswith("_ZN10tensorflow") for name in names), names[:5]


@needs_stable
def test_the_running_tensorflow_exports_every_c_function_the_library_imports():
    assert set(elf_symbols.c_api_imports(STABLE)) <= elf_symbols.exported_functions(FRAMEWORK)


# ----------------------------------------------------- same op, both ways ----

OP_DEFS = """
    import grad_reverse
    from tensorflow.python.framework import op_def_registry
    for name in ("GradReverse", "GradReverseGrad"):
        op_def = op_def_registry.get(name)
        op_def.ClearField("summary")
        op_def.ClearField("description")
        for arg in list(op_def.input_arg) + list(op_def.output_arg):
            arg.ClearField("description")
        print(op_def.SerializeToString().hex())
    import tensorflow as tf
    # The shape function: unknown rank passes through, a non-scalar lambda is refused.
    @tf.function(input_signature=[tf.TensorSpec(None, tf.float32)])
    def f(x):
        return grad_reverse.grad_reverse(x, 1.0)
    print(f.get_concrete_function().structured_outputs.shape)
    g = tf.Graph()
    with g.as_default():
        try:
            grad_reverse.ops.LIBRARY.module.grad_reverse(tf.zeros([2]), tf.zeros([3]))
            print("accepted")
        except ValueError as error:
            print("refused" if "rank 0" in str(error) or "must be rank 0" in str(error) else str(error))
    print(grad_reverse.BUILD_INFO["library"]["kind"])
"""


@needs_both
def test_both_libraries_register_the_same_op_definitions_and_shape_function(tmp_path):
    outputs = {}
    for library in (settings.RELEASE, settings.STABLE):
        result = run_python(OP_DEFS, library, tmp_path)
        assert result.returncode == 0, result.stderr[-3000:]
        lines = result.stdout.split()
        assert lines[-1] == library
        outputs[library] = lines[:-1]
    assert outputs[settings.RELEASE] == outputs[settings.STABLE]
    assert outputs[settings.STABLE][-2:] == ["<unknown>", "refused"]


EXPORT = """
    import sys, numpy as np, tensorflow as tf, grad_reverse
    class M(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
        def __call__(self, x):
            return 2.0 * grad_reverse.grad_reverse(x, 0.5)
    tf.saved_model.save(M(), sys.argv[1] if len(sys.argv) > 1 else "model")
"""
LOAD = """
    import numpy as np, tensorflow as tf, grad_reverse
    loaded = tf.saved_model.load("model")
    x = tf.constant(np.linspace(-3, 3, 12, dtype=np.float32).reshape(4, 3))
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = loaded(x)
    dx = tape.gradient(y, x)
    from tensorflow.core.protobuf import saved_model_pb2
    saved = saved_model_pb2.SavedModel.FromString(open("model/saved_model.pb", "rb").read())
    ops = {node.op for graph in saved.meta_graphs for function in graph.graph_def.library.function
           for node in function.node_def}
    print("GradReverse" in ops, y.numpy().view(np.uint32).tolist() == (2.0 * x).numpy().view(np.uint32).tolist(),
          dx.numpy().view(np.uint32).tolist() == tf.fill([4, 3], -1.0).numpy().view(np.uint32).tolist(),
          grad_reverse.BUILD_INFO["library"]["kind"])
"""


@needs_both
@pytest.mark.parametrize(
    "made_with, loaded_with",
    [(settings.RELEASE, settings.STABLE), (settings.STABLE, settings.RELEASE)],
)
def test_a_savedmodel_made_with_one_library_runs_with_the_other(tmp_path, made_with, loaded_with):
    exported = run_python(EXPORT, made_with, tmp_path)
    assert exported.returncode == 0, exported.stderr[-3000:]
    loaded = run_python(LOAD, loaded_with, tmp_path)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    assert loaded.stdout.split() == ["True", "True", "True", loaded_with]


@needs_stable
def test_the_stable_library_shards_a_large_backward_bitwise_as_the_reference(tmp_path):
    """A pass large enough for several threads, capped by TensorFlow's
    intra-op setting (set before the import), bitwise as the pure-Python version."""
    code = """
        import ctypes, numpy as np, tensorflow as tf
        tf.config.threading.set_intra_op_parallelism_threads(3)
        import grad_reverse
        from grad_reverse import reference
        library = ctypes.CDLL(grad_reverse.BUILD_INFO["library"]["path"])
        print(library.GradReverseMaxThreads())
        rng = np.random.default_rng(0)
        unsigned = {2: np.uint16, 4: np.uint32, 8: np.uint64}
        for dtype in (tf.float16, tf.bfloat16, tf.float32, tf.float64):
            dy = tf.cast(tf.constant(rng.standard_normal(6_000_017).astype(np.float32)), dtype)
            dx = grad_reverse.ops.LIBRARY.module.grad_reverse_grad(dy, 0.7)
            x = tf.zeros_like(dy)
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = reference.grad_reverse(x, 0.7)
            expected = tape.gradient(y, x, output_gradients=dy)
            bits = lambda t: t.numpy().view(unsigned[dtype.size])
            print(dtype.name, np.array_equal(bits(dx), bits(expected)))
    """
    result = run_python(code, settings.STABLE, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.split("\n")
    assert lines[0] == "3"
    assert lines[1:5] == ["float16 True", "bfloat16 True", "float32 True", "float64 True"]


@needs_stable
def test_the_stable_librarys_backward_writes_in_place_in_a_graph(tmp_path):
    """Where dy is a temporary only the backward reads, the backward's node
    allocates nothing (TF_ForwardInputOrAllocateOutput forwarded dy); the
    pure-Python version's does in half and bfloat16 (through float32
    temporaries), which shows the count can tell. (In float and double
    TensorFlow's own Mul forwards too.)"""
    code = """
        import tensorflow as tf
        from grad_reverse.bench import backward_allocations
        for dtype in (tf.float16, tf.bfloat16, tf.float32, tf.float64):
            print(dtype.name, backward_allocations("native", 4096, dtype),
                  backward_allocations("reference", 4096, dtype) > 0)
    """
    result = run_python(code, settings.STABLE, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [line.split() for line in result.stdout.split("\n")[:4]]
    assert [(name, native) for name, native, _ in rows] == [
        ("float16", "0"),
        ("bfloat16", "0"),
        ("float32", "0"),
        ("float64", "0"),
    ]
    assert rows[0][2] == rows[1][2] == "True"


# ------------------------------------------------------- the loader's choice ----


def fake_libraries(root: Path, *folders: str) -> Path:
    for folder in folders:
        (root / folder).mkdir(parents=True)
        (root / folder / library_choice.LIBRARY_NAME).write_bytes(b"")
    return root


def test_auto_takes_the_running_releases_own_library_where_there_is_one(tmp_path):
    libraries = fake_libraries(tmp_path, "tf2.15", "tf2.21", "stable")
    choice = library_choice.choose_library(libraries, running="2.21.3", mode="auto")
    assert (choice.directory, choice.kind, choice.warning) == (libraries / "tf2.21", settings.RELEASE, None)


def test_auto_takes_the_stable_library_for_a_newer_tensorflow_and_says_what_it_costs(tmp_path):
    libraries = fake_libraries(tmp_path, "tf2.15", "tf2.21", "stable")
    choice = library_choice.choose_library(libraries, running="2.23.0.dev20261026", mode="auto")
    assert (choice.directory, choice.kind) == (libraries / "stable", settings.STABLE)
    assert "TensorFlow 2.23.0.dev20261026 is newer than the releases" in choice.warning
    assert "no XLA kernels" in choice.warning and "no CUDA backward kernel" in choice.warning
    assert "GRAD_REVERSE_LIBRARY=stable" in choice.warning


def test_auto_takes_the_stable_library_for_a_supported_release_without_its_own(tmp_path):
    libraries = fake_libraries(tmp_path, "tf2.21", "stable")
    choice = library_choice.choose_library(libraries, running="2.18.1", mode="auto")
    assert choice.kind == settings.STABLE
    assert "no C++ library for TensorFlow 2.18 (it holds C++ libraries for TensorFlow 2.21)" in choice.warning


def test_forcing_either_kind_takes_it_without_a_warning(tmp_path):
    libraries = fake_libraries(tmp_path, "tf2.21", "stable")
    assert library_choice.choose_library(libraries, running="2.21.0", mode="stable").kind == settings.STABLE
    assert library_choice.choose_library(libraries, running="2.21.0", mode="stable").warning is None
    with pytest.raises(ImportError, match="holds op libraries for TensorFlow 2.21 only"):
        library_choice.choose_library(libraries, running="2.23.0", mode="release")


def test_without_a_stable_library_a_newer_tensorflow_gets_todays_message(tmp_path):
    libraries = fake_libraries(tmp_path, "tf2.21")
    with pytest.raises(ImportError, match=r"TensorFlow 2.23 is newer than the releases with C\+\+ libraries"):
        library_choice.choose_library(libraries, running="2.23.0", mode="auto")
    with pytest.raises(ImportError, match="GRAD_REVERSE_LIBRARY=stable, but this installation has no stable"):
        library_choice.choose_library(libraries, running="2.21.0", mode="stable")


@pytest.mark.parametrize("mode", ["auto", "stable", "release"])
def test_a_tensorflow_older_than_the_range_is_refused_whatever_the_mode(tmp_path, mode):
    libraries = fake_libraries(tmp_path, "tf2.15", "stable")
    with pytest.raises(ImportError, match="runs TensorFlow 2.14.1; grad-reverse supports TensorFlow 2.15 and newer"):
        library_choice.choose_library(libraries, running="2.14.1", mode=mode)


def test_an_unknown_mode_names_the_accepted_ones(tmp_path):
    with pytest.raises(ImportError, match="GRAD_REVERSE_LIBRARY='newest' is not a valid value.*release, stable"):
        library_choice.choose_library(tmp_path, running="2.21.0", mode="newest")


def test_this_process_loaded_the_library_the_loader_chose():
    info = grad_reverse.BUILD_INFO["library"]
    assert info["kind"] == library_choice.chosen().kind
    assert Path(info["path"]) == library_path()
    assert (grad_reverse.BUILD_INFO.get("abi") == "stable") == (info["kind"] == settings.STABLE)


@needs_stable
def test_a_tensorflow_lacking_a_c_function_is_an_import_error_naming_it(tmp_path):
    """A stable library that imports a function this TensorFlow does not
    export (built here on purpose) fails at load with an ImportError naming
    the function and the release, not with a crash."""
    compiler = shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        pytest.skip("no C++ compiler to build the library that imports a missing function")
    folder = tmp_path / "stable"
    folder.mkdir()
    source = tmp_path / "missing.cc"
    source.write_text(
        'extern "C" void TF_ThisFunctionDoesNotExist();\nstatic int touched = (TF_ThisFunctionDoesNotExist(), 0);\n'
    )
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-o", str(folder / library_choice.LIBRARY_NAME), str(source)],
        check=True,
        capture_output=True,
    )
    (folder / library_choice.BUILD_INFO_NAME).write_text(json.dumps({"abi": "stable", "xla": False, "cuda": False}))
    with pytest.raises(ImportError) as error:
        loader.load_library(folder)
    message = str(error.value)
    assert "does not export the C API function TF_ThisFunctionDoesNotExist" in message
    assert f"TensorFlow {tf.__version__}" in message


@needs_stable
def test_info_names_the_library_and_why_it_was_chosen(tmp_path):
    env = {**os.environ, "GRAD_REVERSE_LIBRARY": "stable", "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run(
        [sys.executable, "-m", "grad_reverse", "info"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = {line.split(None, 1)[0]: line.split(None, 1)[1] for line in result.stdout.splitlines() if " " in line}
    assert lines["library"].endswith(str(Path("_libs") / "stable" / library_choice.LIBRARY_NAME))
    assert lines["library_kind"].startswith("stable-ABI")
    assert lines["library_chosen_because"] == "chosen by GRAD_REVERSE_LIBRARY=stable"
    assert lines["xla_kernels_compiled"].startswith("no")


OTHER_PYTHON = os.environ.get("GRAD_REVERSE_OTHER_TENSORFLOW_PYTHON")


@pytest.mark.skipif(
    not OTHER_PYTHON,
    reason="GRAD_REVERSE_OTHER_TENSORFLOW_PYTHON names no Python of another "
    "TensorFlow with grad_reverse (CI's release-candidate row sets it)",
)
@pytest.mark.parametrize("direction", ["exported there, loaded here", "exported here, loaded there"])
def test_a_savedmodel_moves_between_two_tensorflow_releases(tmp_path, direction):
    """E.g. one made under 2.21 with its C++ library runs under the nightly with
    the stable library, and the other way round, with the same bits."""
    here = [sys.executable, "-c"]
    there = [OTHER_PYTHON, "-c"]
    exporter, loader = (there, here) if direction.startswith("exported there") else (here, there)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    env.pop("GRAD_REVERSE_LIBRARY", None)  # each side loads what its installation chooses
    exported = subprocess.run(
        [*exporter, textwrap.dedent(EXPORT)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert exported.returncode == 0, exported.stderr[-3000:]
    loaded = subprocess.run(
        [*loader, textwrap.dedent(LOAD)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    assert loaded.stdout.split()[:3] == ["True", "True", "True"], loaded.stdout


# A release newer than the tested range, and no C++ library of its own here
# (the wheel; a source build against it compiles one).
STABLE_BY_DEFAULT = library_choice.release_of(tf.__version__) > library_choice.SUPPORTED[1] and not RELEASE.is_file()


@pytest.mark.skipif(
    not STABLE_BY_DEFAULT,
    reason="this TensorFlow has a C++ library here, or is inside the tested range (CI's release-candidate row runs this test)",
)
def test_a_newer_tensorflow_warns_once_at_import_and_info_names_the_stable_library(tmp_path):
    code = """
        import warnings
        warnings.simplefilter("always")
        with warnings.catch_warnings(record=True) as caught:
            import grad_reverse
            import grad_reverse.ops
            grad_reverse.grad_reverse([1.0])
        newer = [w for w in caught if "is newer than the releases" in str(w.message)]
        print(len(newer), newer[0].category.__name__ if newer else "-")
        from grad_reverse import info
        report = info.collect()
        print(report["library_kind"].split()[0], report["library_chosen_because"].split(" is newer")[0])
    """
    result = run_python(code, settings.AUTO, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    first, second = result.stdout.strip().split("\n")[-2:]
    assert first == "1 RuntimeWarning"
    assert second == f"stable-ABI TensorFlow {tf.__version__}"
