"""How the adversarial models train, on each Keras backend: the machinery under
`fit`, which users reach through the models and never need to import.

* `steps`: where the backends differ, and only that; one file per backend's
  step: `tensorflow` (a GradientTape), `jax` (Keras' stateless step),
  `torch` (autograd);
* `batches` (tf.data, TensorFlow), `array_batches` (a seeded
  `keras.utils.PyDataset`, JAX and PyTorch), `batch_rules` (what both share):
  the paired source + target batches and the checks of `fit`'s data;
* `resume`: where a fit starts (the ramp and the batches follow the epoch
  Keras starts at, after a preemption too);
* `optimizers`: a part's own optimizer or learning-rate scale;
* `keras_compat`: where Keras 2 and Keras 3 differ outside the step.
"""
