"""Models, exports and runners shared by the serving tests (tests/serving/)
and by conftest's `small_export` and `runner` fixtures."""

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest

import grad_reverse
from grad_reverse._keras import KERAS_3

REPO_ROOT = Path(__file__).resolve().parents[2]
KERAS_LAMBDA = 0.25  # of the Keras model's layer; exact in binary
X = np.array([[1.0, -2.0, 0.5], [0.25, 3.0, -1.5]], np.float32)


def keras_dann(lambda_: float = KERAS_LAMBDA) -> keras.Model:
    keras.utils.set_random_seed(0)
    inputs = keras.Input((3,), name="x")
    features = keras.layers.Dense(4, activation="tanh", name="features")(inputs)
    label = keras.layers.Dense(2, name="label")(features)
    domain = keras.layers.Dense(1, name="domain")(grad_reverse.GradReverse(lambda_)(features))
    return keras.Model(inputs, {"label": label, "domain": domain})


# Keras 2 (TensorFlow 2.15) exports silently and takes no `verbose`.
QUIET_EXPORT = {"verbose": False} if KERAS_3 else {}


def keras_export(model: keras.Model, path: Path) -> Path:
    """`model.export(path)`, without Keras 3's printed summary."""
    model.export(str(path), **QUIET_EXPORT)
    return path


def run_make_servable(capsys, *args) -> tuple[int, str, str]:
    """`python -m grad_reverse make-servable ARGS` in this process: (exit status, stdout, stderr)."""
    from grad_reverse.serving import cli

    code = cli.main(["make-servable", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def hidden(parent: Path) -> list:
    """The names of `parent`'s hidden entries (make-servable's staging and old folders)."""
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


def tree_hash(path: Path) -> dict:
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="session")
def runner(tmp_path_factory) -> Path:
    """cc/tools/saved_model_runner, built against this TensorFlow with CMake."""
    if not (shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")):
        # Where the portable wheel is installed without a compiler (CI's wheel
        # step, the emulated aarch64 run).
        pytest.skip("no C++ compiler on PATH: the C++ loader tests compile cc/tools/saved_model_runner")
    # The environment's bin directory first: pip installs cmake there.
    cmake = shutil.which("cmake", path=str(Path(sys.executable).parent)) or shutil.which("cmake")
    if cmake is None:
        pytest.fail("the C++ loader tests build cc/tools with CMake: `pip install cmake`")
    source = REPO_ROOT / "cc" / "tools"
    assert (source / "CMakeLists.txt").is_file(), f"no source tree at {REPO_ROOT}"
    build = tmp_path_factory.mktemp("saved_model_runner")
    configure = [cmake, "-S", str(source), "-B", str(build), f"-DPython_EXECUTABLE={sys.executable}"]
    if shutil.which("ninja"):
        configure += ["-G", "Ninja"]
    for command in (configure, [cmake, "--build", str(build), "-j2"]):
        result = subprocess.run(command, capture_output=True, text=True)
        assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
    return build / "saved_model_runner"


def runner_outputs(result: subprocess.CompletedProcess) -> dict:
    assert result.returncode == 0, result.stderr[-4000:]
    lines = [json.loads(line) for line in result.stdout.strip().splitlines()]
    return {line["output"]: np.array(line["values"], np.float32).reshape(line["shape"]) for line in lines}
