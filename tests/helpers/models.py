"""Small models for the DANN, CDAN and MDD tests (tests/adaptation/, tests/cli/)."""

from __future__ import annotations

import numpy as np

from grad_reverse._keras import keras
from grad_reverse.adaptation import CDAN, DANN, MDD


def parts(
    seed: int = 0, features: int = 2, hidden: int = 8, domain_activation: str = "sigmoid", domain_units: int = 1
) -> tuple:
    """A feature extractor, a sigmoid label head and a domain head, seeded."""
    keras.utils.set_random_seed(seed)
    feature_extractor = keras.Sequential([keras.Input((features,)), keras.layers.Dense(hidden, activation="tanh")])
    label_head = keras.Sequential([keras.Input((hidden,)), keras.layers.Dense(1, activation="sigmoid")])
    domain_head = keras.Sequential(
        [
            keras.Input((hidden,)),
            keras.layers.Dense(4, activation="relu"),
            keras.layers.Dense(domain_units, activation=domain_activation),
        ]
    )
    return feature_extractor, label_head, domain_head


def dann(seed: int = 0, **kwargs) -> DANN:
    return DANN(*parts(seed), **kwargs)


def domains(seed: int = 0, n_source: int = 96, n_target: int = 80) -> tuple:
    """Labeled source points, and target points shifted away from them."""
    rng = np.random.default_rng(seed)
    x_source = rng.standard_normal((n_source, 2)).astype("float32")
    y_source = (x_source[:, :1] + x_source[:, 1:] > 0).astype("float32")
    x_target = (rng.standard_normal((n_target, 2)) + [1.5, -1.0]).astype("float32")
    return x_source, y_source, x_target


def points(seed: int = 0, n: int = 16) -> tuple:
    """CDAN's and MDD's hand-computation points: `n` labeled source points
    (class: the first coordinate's sign) and `n` shifted target points."""
    rng = np.random.default_rng(seed)
    x_source = rng.standard_normal((n, 2)).astype("float32")
    y_source = (x_source[:, :1] > 0).astype("float32")
    x_target = (rng.standard_normal((n, 2)) + [1.0, -0.5]).astype("float32")
    return x_source, y_source, x_target


def reversal_dann(lambda_schedule: str = "paper", lambda_max: float = 1.0, gamma: float = 10.0) -> DANN:
    """A DANN whose only weight that trains, `w` (features = w * x), moves by
    exactly +lambda per SGD(1) step on x = 1 (compiled by `compile_reversal`):
    the label head is a frozen zero, and the domain loss of a point is the
    domain head's (frozen, identity) output w, so the paper's domain term
    (source mean + target mean) is 2w; with domain_loss_weight 0.5,
    d loss / d w = -lambda behind the reversal."""
    return DANN(
        w_extractor(),
        frozen("zeros"),
        frozen("ones"),
        lambda_schedule=lambda_schedule,
        lambda_max=lambda_max,
        gamma=gamma,
    )


def w_extractor() -> keras.Sequential:
    """features = w * x, `w` (the layer named "w") starting at 1."""
    return keras.Sequential(
        [keras.Input((1,)), keras.layers.Dense(1, use_bias=False, kernel_initializer="ones", name="w")]
    )


def frozen(kernel: str, inputs: int = 1, activation=None) -> keras.Sequential:
    """One frozen unit without bias, its kernel all `kernel` ("zeros" or "ones")."""
    return keras.Sequential(
        [
            keras.Input((inputs,)),
            keras.layers.Dense(1, activation=activation, use_bias=False, kernel_initializer=kernel, trainable=False),
        ]
    )


def reversal_cdan(lambda_schedule: str = "paper", lambda_max: float = 1.0, gamma: float = 10.0) -> CDAN:
    """`reversal_dann`'s CDAN+E: `w` moves by exactly +lambda per SGD(1) step.
    The label head is one frozen sigmoid unit at zero, so g = (0.5, 0.5)
    (equal entropy weights) and the map is (0.5 w, 0.5 w); the frozen
    all-ones domain head gives w again."""
    return CDAN(
        w_extractor(),
        frozen("zeros", activation="sigmoid"),
        frozen("ones", inputs=2),
        entropy_conditioning=True,
        lambda_schedule=lambda_schedule,
        lambda_max=lambda_max,
        gamma=gamma,
    )


def reversal_mdd(lambda_schedule: str = "paper", lambda_max: float = 1.0, gamma: float = 10.0) -> MDD:
    """`reversal_dann`'s MDD (regression form, margin 2): the frozen label head
    outputs 0 and the frozen adversarial head w, so the transfer term is
    2 * |w| - |w| = w (w > 0), and `w` moves by exactly +lambda per SGD(1) step."""
    return MDD(
        w_extractor(),
        frozen("zeros"),
        frozen("ones"),
        form="regression",
        margin=2.0,
        lambda_schedule=lambda_schedule,
        lambda_max=lambda_max,
        gamma=gamma,
    )


# The models whose `w` moves by exactly +lambda per step, by method (compiled by `compile_reversal`).
REVERSAL_MODELS = {"dann": reversal_dann, "cdan": reversal_cdan, "mdd": reversal_mdd}


def compile_reversal(model, **kwargs) -> None:
    if isinstance(model, MDD):  # no domain loss: the transfer term is w already
        model.compile(keras.optimizers.SGD(1.0), loss="mse", **kwargs)
        return
    kwargs.setdefault("domain_loss_weight", 0.5)  # 0.5 * (source mean + target mean) of w: w
    kwargs.setdefault("domain_loss_reduction", "sum_over_domains")  # DANN's default; CDAN's is half of it
    model.compile(keras.optimizers.SGD(1.0), loss="mse", domain_loss=identity_loss, **kwargs)


def identity_loss(y_true, y_pred):
    """A domain loss equal to the head's output, per point."""
    return keras.ops.sum(y_pred, axis=-1) if hasattr(keras, "ops") else keras.backend.sum(y_pred, axis=-1)


def ones(n: int) -> tuple:
    return np.ones((n, 1), "float32"), np.zeros((n, 1), "float32"), np.ones((n, 1), "float32")


class RecordW(keras.callbacks.Callback):
    """`w` before training and after every (executed) batch; `layer(model)`
    finds the layer named "w" (by default in a DANN's feature extractor)."""

    def __init__(self, layer=lambda model: model.feature_extractor.get_layer("w")) -> None:
        super().__init__()
        self.layer = layer
        self.w: list = []

    def on_train_begin(self, logs=None):
        self.w = [self._w()]

    def on_train_batch_end(self, batch, logs=None):
        self.w.append(self._w())

    def _w(self) -> float:
        return float(self.layer(self.model).kernel.numpy()[0, 0])


# ------------------------------------------- the GradReverse layer in a model


def dann_model(grl: keras.layers.Layer, seed: int = 0) -> keras.Model:
    """Feature extractor -> label head; feature extractor -> GRL -> domain head."""
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((4,))
    features = keras.layers.Dense(8, activation="relu", name="features")(inputs)
    label = keras.layers.Dense(1, activation="sigmoid", name="label")(features)
    domain_hidden = keras.layers.Dense(6, activation="relu", name="domain_hidden")(grl(features))
    domain = keras.layers.Dense(1, activation="sigmoid", name="domain")(domain_hidden)
    return keras.Model(inputs, {"label": label, "domain": domain})


def batch(n=32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 4)).astype("float32")
    return x, {"label": (x[:, :1] > 0).astype("float32"), "domain": (x[:, 1:2] > 0).astype("float32")}


def graph_op_types(concrete_function) -> set:
    graph_def = concrete_function.graph.as_graph_def()
    ops = {node.op for node in graph_def.node}
    for function in graph_def.library.function:
        ops.update(node.op for node in function.node_def)
    return ops


# --------------------------------------------- CDAN+E and MDD under tf.distribute


CDAN_MDD_STEPS = 4  # the CDAN+E and MDD distribute tests' fit steps


def cdan_mdd_batches():
    """The same global batch of 8 source + 8 target points every step."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    x_source = rng.standard_normal((8, 2)).astype("float32")
    y_source = (x_source[:, 0] > 0).astype("int32")
    x_target = (rng.standard_normal((8, 2)) + [1.0, -0.5]).astype("float32")
    return tf.data.Dataset.from_tensors(((x_source, x_target), y_source)).repeat()


def cdan_mdd(method: str, trade_off: float = 1.0) -> keras.Model:
    """CDAN+E (`method` "cdan") or MDD, compiled with SGD, built."""
    keras.utils.set_random_seed(0)
    feature_extractor = keras.Sequential([keras.Input((2,)), keras.layers.Dense(4, activation="tanh")])
    label_head = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, activation="softmax")])
    if method == "cdan":
        domain_head = keras.Sequential([keras.Input((8,)), keras.layers.Dense(1)])
        model = CDAN(feature_extractor, label_head, domain_head, entropy_conditioning=True, lambda_schedule="constant")
        model.compile(keras.optimizers.SGD(0.3), "sparse_categorical_crossentropy", domain_loss_weight=trade_off)
    else:
        model = MDD(feature_extractor, label_head, lambda_schedule="constant", lambda_max=0.5, trade_off=trade_off)
        model.compile(keras.optimizers.SGD(0.3), "sparse_categorical_crossentropy")
    model(np.zeros((1, 2), "float32"))
    return model


def cdan_mdd_one_device(method: str, initial: list, trade_off: float = 1.0) -> list:
    model = cdan_mdd(method, trade_off)
    model.set_weights(initial)
    model.fit(cdan_mdd_batches(), epochs=1, steps_per_epoch=CDAN_MDD_STEPS, verbose=0)
    return model.get_weights()
