"""grad-reverse: a native TensorFlow op for the gradient reversal layer.

Importing the package loads the op library (once) and registers the
gradients of `GradReverse` and `GradReverseGrad` by op type. Import it before
loading a SavedModel that contains the op.

Public names: `grad_reverse`, `GradReverse`, `DANN`, `CDAN` and `MDD` (Keras
models that wire domain-adversarial training), `DANNLearningRateSchedule`,
`DANNLambdaSchedule`, `dann_lambda`, `BUILD_INFO`, `SUPPORTED_DTYPES`, and the modules `reference`
and `serving`.

One exception: the package's own command line. Python imports this package
before it runs `python -m grad_reverse`, and the command line must set
TensorFlow's environment before TensorFlow loads (and `--help` should not
load it at all). So while Python is starting the command line (see
`_startup.starting_command_line`), the import below waits; the command line
calls `_load()` once it is ready, and any public name asked for earlier
loads it too.
"""

# Private aliases: a bare `import importlib` would make `grad_reverse.importlib`
# (and `grad_reverse.Any`) look like part of the package's API.
import importlib as _importlib
import typing as _typing

from grad_reverse import _startup

__version__ = "0.1.0"

__all__ = [
    "BUILD_INFO",
    "CDAN",
    "DANN",
    "DANNLambdaSchedule",
    "DANNLearningRateSchedule",
    "GradReverse",
    "MDD",
    "SUPPORTED_DTYPES",
    "dann_lambda",
    "grad_reverse",
    "reference",
    "serving",
    "__version__",
]

_SUBMODULES = frozenset({"reference", "serving"})
_LOADED_NAMES = frozenset(__all__) - {"__version__"}
_loading = False


def _load() -> None:
    """Imports TensorFlow and the public API: loads the library, registers the gradients."""
    global _loading, BUILD_INFO, CDAN, DANN, DANNLambdaSchedule, DANNLearningRateSchedule, GradReverse, MDD
    global SUPPORTED_DTYPES
    global dann_lambda, grad_reverse, reference, serving
    _loading = True
    try:
        # First: without TensorFlow, its ImportError says which to install.
        from grad_reverse import _loader  # noqa: F401
        from grad_reverse import reference
        from grad_reverse.layer import GradReverse
        from grad_reverse.ops import BUILD_INFO, SUPPORTED_DTYPES, grad_reverse
        from grad_reverse.schedule import DANNLambdaSchedule, dann_lambda
        from grad_reverse.adaptation import CDAN, DANN, MDD, DANNLearningRateSchedule

        # Last: it builds on the others.
        from grad_reverse import serving
    finally:
        _loading = False


def __getattr__(name: str) -> _typing.Any:
    # Reached only for names not bound yet: while the command line starts,
    # or while _load() runs.
    if name in _SUBMODULES:
        # What `from grad_reverse import reference` in a submodule would do
        # anyway; loading everything here instead could re-enter a module
        # that is still being imported.
        return _importlib.import_module(f"{__name__}.{name}")
    if name in _LOADED_NAMES and not _loading:
        _load()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if not _startup.starting_command_line():
    _load()
