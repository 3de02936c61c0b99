"""Fixtures and hooks for every test; the helpers themselves live in
tests/helpers/ (`from helpers.tensors import ...`), never imported from here.
The end-of-run reports: skips by reason (helpers/skips.py), not-slow tests
over 5 s (helpers/durations.py). Markers (registered in pyproject.toml): `slow` (trains the whole demo,
trains or builds in subprocesses, large tensors), `build` (packaging and
the build: every test in tests/packaging/, marked here)."""

import importlib.util
import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

import pytest

from grad_reverse._keras import TENSORFLOW, keras_backend
from helpers.skips import pytest_terminal_summary  # noqa: F401 (a hook)

# The not-slow tests over the one-test budget, listed at the end of a run.
pytest_plugins = ("helpers.durations",)

# tests/backends/ also runs where Keras runs on JAX or PyTorch, without
# TensorFlow: the fixtures below need TensorFlow as Keras' backend.
ON_TENSORFLOW = importlib.util.find_spec("tensorflow") is not None and keras_backend() == TENSORFLOW
if ON_TENSORFLOW:
    from helpers.serving import keras_dann, keras_export, runner  # noqa: F401 (runner: a fixture)
    from helpers.tensors import DTYPES


# Fixtures whose set-up trains the whole demo or compiles a program: every
# test that uses one is slow, whatever its own body does.
SLOW_FIXTURES = {"demo_run", "runner"}
PACKAGING = Path(__file__).resolve().parent / "packaging"


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(items):
    """`slow` on the users of SLOW_FIXTURES, `build` on tests/packaging/."""
    for item in items:
        if SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
        if PACKAGING in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.build)


if ON_TENSORFLOW:

    @pytest.fixture(params=DTYPES, ids=lambda d: d.name)
    def dtype(request):
        return request.param

    @pytest.fixture(scope="session")
    def small_export(tmp_path_factory):
        """A Keras DANN export holding the op: the SRC of the make-servable tests,
        which only read it (exported once per session)."""
        return keras_export(keras_dann(), tmp_path_factory.mktemp("small") / "export")
