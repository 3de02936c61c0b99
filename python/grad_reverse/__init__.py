"""grad-reverse: a native TensorFlow op for the gradient reversal layer.

Importing the package loads the op library (once) and registers the
gradients of `GradReverse` and `GradReverseGrad` by op type. Import it before
loading a SavedModel that contains the op.

Public names: `grad_reverse`, `GradReverse`, `DANN`, `CDAN` and `MDD` (Keras
models that wire domain-adversarial training), `DANNLearningRateSchedule`,
`DANNLambdaSchedule`, `dann_lambda`, `BUILD_INFO`, `SUPPORTED_DTYPES`, and the modules `reference`
and `serving`; `grad_reverse.options` holds the runtime choices.

The package's own command line (`python -m grad_reverse`) loads the library
itself, once it has set TensorFlow's environment: see `_startup`.
"""

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


def _load() -> None:
    """Imports TensorFlow and the public API: loads the library, registers the gradients."""
    global BUILD_INFO, CDAN, DANN, DANNLambdaSchedule, DANNLearningRateSchedule, GradReverse, MDD
    global SUPPORTED_DTYPES
    global dann_lambda, grad_reverse, reference, serving
    with _startup.loading_package():
        # First: without TensorFlow, its ImportError says which to install.
        from grad_reverse import _loader  # noqa: F401
        from grad_reverse import reference
        from grad_reverse.layer import GradReverse
        from grad_reverse.ops import BUILD_INFO, SUPPORTED_DTYPES, grad_reverse
        from grad_reverse.schedule import DANNLambdaSchedule, dann_lambda
        from grad_reverse.adaptation import CDAN, DANN, MDD, DANNLearningRateSchedule

        # Last: it builds on the others.
        from grad_reverse import serving


# Public names asked for before `_load()` ran (while the command line starts) load the package.
__getattr__ = _startup.package_getattr(
    __name__, _load, frozenset(__all__) - {"__version__"}, submodules=frozenset({"reference", "serving"})
)

if not _startup.starting_command_line():
    _load()
