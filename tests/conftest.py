"""Fixtures and hooks for every test; the helpers themselves live in
tests/helpers/ (`from helpers.tensors import ...`), never imported from here."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

import pytest

from helpers.serving import keras_dann, keras_export, runner  # noqa: F401 (runner: a fixture)
from helpers.skips import pytest_terminal_summary  # noqa: F401 (a hook)
from helpers.tensors import DTYPES


@pytest.fixture(params=DTYPES, ids=lambda d: d.name)
def dtype(request):
    return request.param


@pytest.fixture(scope="session")
def small_export(tmp_path_factory):
    """A Keras DANN export holding the op: the SRC of the make-servable tests,
    which only read it (exported once per session)."""
    return keras_export(keras_dann(), tmp_path_factory.mktemp("small") / "export")
