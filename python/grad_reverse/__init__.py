"""grad-reverse: a native TensorFlow op for the gradient reversal layer.

Importing the package loads the op library (once) and registers the
gradients of `GradReverse` and `GradReverseGrad` by op type. Import it before
loading a SavedModel that contains the op.

That is when Keras runs on TensorFlow. When it runs on JAX or PyTorch
(KERAS_BACKEND), importing it loads nothing of TensorFlow: the package is the
`GradReverse` layer, on a custom gradient native to that backend
(`backend_layer`), the models `DANN`, `CDAN` and `MDD` (their objective is
written in `keras.ops`, their step in each backend's own way:
`adaptation/training/steps.py`) and the schedules; the names that are the native
op's (`grad_reverse`, `BUILD_INFO`, `SUPPORTED_DTYPES`, `serving`, `reference`)
raise an ImportError that says they need the TensorFlow backend.

Public names: `grad_reverse`, `GradReverse`, `DANN`, `CDAN` and `MDD` (Keras
models that wire domain-adversarial training), `DANNLearningRateSchedule`,
`DANNLambdaSchedule`, `dann_lambda`, `BUILD_INFO`, `SUPPORTED_DTYPES`, and the modules `reference`
and `serving`; `grad_reverse.options` holds the runtime choices.
`grad_reverse.adaptation` holds what goes with the models: the validators
that score a trained model without target labels, `ValidatorCallback`,
`select_without_labels` (the choice among trained models, "don't adapt"
included), reverse validation, the paired batches and the learning-rate scale.

The package's own command line (`python -m grad_reverse`) loads the library
itself, once it has set TensorFlow's environment; a program that imports the
package gets none of those settings.
"""

from grad_reverse import _keras, _startup

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


# The names a JAX or PyTorch backend gets; the rest of __all__ needs TensorFlow.
_ANY_BACKEND = (
    "CDAN",
    "DANN",
    "DANNLambdaSchedule",
    "DANNLearningRateSchedule",
    "GradReverse",
    "MDD",
    "dann_lambda",
    "__version__",
)
# The backend the import found; None while the command line starts (its `_load()`
# checks the backend through `_native.loader`).
_backend_name = None


def _load() -> None:
    """Imports TensorFlow and the public API: loads the library, registers the gradients."""
    global BUILD_INFO, CDAN, DANN, DANNLambdaSchedule, DANNLearningRateSchedule, GradReverse, MDD
    global SUPPORTED_DTYPES
    global dann_lambda, grad_reverse, reference, serving
    with _startup.loading_package():
        # The order is the point (isort off). First: without TensorFlow, its
        # ImportError says which to install.
        # isort: off
        from grad_reverse._native import loader  # noqa: F401
        from grad_reverse import reference
        from grad_reverse.layer import GradReverse
        from grad_reverse.ops import BUILD_INFO, SUPPORTED_DTYPES, grad_reverse
        from grad_reverse.schedule import DANNLambdaSchedule, dann_lambda
        from grad_reverse.adaptation import CDAN, DANN, MDD, DANNLearningRateSchedule

        # Last: it builds on the others.
        from grad_reverse import serving
        # isort: on


def _load_other_backend() -> None:
    """The layer, the models and the schedules on Keras' JAX or PyTorch backend: no TensorFlow,
    no op library."""
    global CDAN, DANN, DANNLambdaSchedule, DANNLearningRateSchedule, GradReverse, MDD, dann_lambda, __all__
    from grad_reverse.adaptation import CDAN, DANN, MDD, DANNLearningRateSchedule
    from grad_reverse.backend_layer import GradReverse
    from grad_reverse.schedule import DANNLambdaSchedule, dann_lambda

    __all__ = list(_ANY_BACKEND)


# Public names asked for before `_load()` ran (while the command line starts) load the package.
_tensorflow_getattr = _startup.package_getattr(
    __name__, _load, frozenset(__all__) - {"__version__"}, submodules=frozenset({"reference", "serving"})
)


def __getattr__(name: str):
    if _backend_name not in (None, _keras.TENSORFLOW) and name in _TENSORFLOW_ONLY:
        raise _keras.tensorflow_only(f"grad_reverse.{name}", _backend_name)
    return _tensorflow_getattr(name)


_TENSORFLOW_ONLY = frozenset(__all__) - frozenset(_ANY_BACKEND)

if not _startup.starting_command_line():
    _backend_name = _keras.keras_backend()
    if _backend_name == _keras.TENSORFLOW:
        _load()
    else:
        _load_other_backend()
