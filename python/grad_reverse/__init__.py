"""grad-reverse: a native TensorFlow op for the gradient reversal layer.

Importing the package loads the op library (once) and registers the
gradients of `GradReverse` and `GradReverseGrad` by op type. Import it before
loading a SavedModel that contains the op.
"""

from grad_reverse import reference
from grad_reverse.layer import GradReverse
from grad_reverse.ops import BUILD_INFO, SUPPORTED_DTYPES, grad_reverse
from grad_reverse.schedule import DANNLambdaSchedule, dann_lambda

__version__ = "0.1.0"

__all__ = [
    "BUILD_INFO",
    "DANNLambdaSchedule",
    "GradReverse",
    "SUPPORTED_DTYPES",
    "dann_lambda",
    "grad_reverse",
    "reference",
    "__version__",
]
