"""Helpers shared by the tests of every area (TensorFlow Addons'
utils/test_utils.py, split by what each needs to import):

* tensors: bitwise comparisons, random tensors, forward/backward runs.
* kernels: the framework-free kernel module and the CPU-path switch
  (imports no TensorFlow: the sanitizer runs load no conftest.py).
* models: small Keras models (DANN, CDAN, MDD, a model with the layer).
* serving: Keras exports, make-servable in process, the C++ runner.
* distribute: a test file run as a script in fresh processes, and weights compared.
* skips: the end-of-run summary of skips by reason (conftest.py's hook).

conftest.py holds the fixtures and re-exports the ones defined here; no
test file imports another test file or conftest.py.
"""
