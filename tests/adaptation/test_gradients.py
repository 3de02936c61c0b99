"""Each method's gradients, not only its loss: on a fixed batch of 3 source + 5
target points with fixed weights, the gradient of the objective `train_step`
differentiates (`model.objective`), with respect to the features, the label
head's weights and the domain head's (or adversary's), equals one derived by
hand in numpy (float64). Which gradient reaches which part, at what scale, as
the authors' code has it (docs/methods.md): DANN and CDAN give the label head
nothing from the domain term (CDAN with `map_gradient=False`, the authors' detached
map; the path through the map of its default is tests/adaptation/test_cdan.py's);
CDAN+E gives it the entropy weights' gradient,
reversed with lambda, the weights' normalizers without gradient; MDD gives the
label head nothing from the transfer term. A stop-gradient added or removed
anywhere moves one of these gradients.

On every backend: TensorFlow's run has the native op inside; .ci/run runs this
file on JAX and PyTorch too, where the same objective (keras.ops) meets the
backends' own reversal and autodiff."""

import numpy as np
import pytest

from grad_reverse._keras import keras
from grad_reverse.adaptation import CDAN, DANN, MDD
from helpers.backends import gradients_of, to_numpy_any

N_SOURCE, N_TARGET, FEATURES, CLASSES = 3, 5, 4, 3
LAMBDA = 0.7
EPSILON = 1e-5  # inside CDAN+E's entropy's log
SHIFT = 1e-6  # inside MDD's log(1 - p')


def batch() -> tuple:
    rng = np.random.default_rng(3)
    x_source = rng.standard_normal((N_SOURCE, 2)).astype("float32")
    x_target = (rng.standard_normal((N_TARGET, 2)) + [0.8, -0.4]).astype("float32")
    y_source = np.array([0, 2, 1], "int32")
    return x_source, x_target, y_source


def dense(inputs: int, units: int, activation: str, seed: int, stddev: float = 1.0) -> keras.Sequential:
    initializer = keras.initializers.RandomNormal(stddev=stddev, seed=seed)
    layer = keras.layers.Dense(
        units, activation=activation, kernel_initializer=initializer, bias_initializer=initializer
    )
    return keras.Sequential([keras.Input((inputs,)), layer])


def feature_extractor() -> keras.Sequential:
    return dense(2, FEATURES, "tanh", seed=1)


def objective_gradients(model, variables: list, y_source=None, term: int = 0) -> tuple:
    """`model.objective_on_features` at LAMBDA on the batch's features (the feature extractor's
    output, given as an input): `(value, gradients of variables, gradient of the features)`, on this
    backend; `term` 0 is the total, 1 the label loss."""
    x_source, x_target, labels = batch()
    y = labels if y_source is None else y_source
    features = features_of(model).astype("float32")

    def value(f):
        return model.objective_on_features(f, as_tensor(x_source), as_tensor(y), None, as_tensor(LAMBDA, "float32"))[
            term
        ]

    total, variable_grads, (feature_grads,) = gradients_of(value, variables, [features])
    return total, variable_grads, feature_grads


def as_tensor(value, dtype=None):
    """A tensor of the backend (Keras 2's compute_loss wants tensors, not arrays)."""
    if hasattr(keras, "ops"):
        return keras.ops.convert_to_tensor(value, dtype)
    import tensorflow as tf

    return tf.convert_to_tensor(value, dtype)


def gradients(model) -> dict:
    """{"features", "label_head", "adversary"}: the model's gradients of its objective, float64."""
    adversary = model.adversarial_head if isinstance(model, MDD) else model.domain_head
    heads = list(model.label_head.trainable_variables), list(adversary.trainable_variables)
    _, grads, features = objective_gradients(model, heads[0] + heads[1])
    return {"features": features, "label_head": grads[: len(heads[0])], "adversary": grads[len(heads[0]) :]}


def ours(model, reduction=None, **compile_kwargs) -> dict:
    if reduction is not None:
        compile_kwargs["domain_loss_reduction"] = reduction
    model.compile(keras.optimizers.SGD(0.0), keras.losses.SparseCategoricalCrossentropy(), **compile_kwargs)
    return gradients(model)


def weights(head) -> list:
    return [np.asarray(w, "float64") for w in head.get_weights()]


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def sigmoid(u: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-u))


def softmax_backward(p: np.ndarray, dp: np.ndarray) -> np.ndarray:
    """d/dz from d/dp through p = softmax(z), per row."""
    return p * (dp - np.sum(p * dp, axis=1, keepdims=True))


def label_loss_gradient(p_source: np.ndarray) -> np.ndarray:
    """d(mean cross-entropy over the source points)/d(label logits of the source points)."""
    onehot = np.eye(CLASSES)[batch()[2]]
    return (p_source - onehot) / N_SOURCE


def domain_coefficients(reduction: str, w: np.ndarray) -> np.ndarray:
    """c with domain term = sum_i c_i w_i l_i; the normalizers (sums of w) are constants."""
    s, t = slice(0, N_SOURCE), slice(N_SOURCE, None)
    c = np.empty(len(w))
    if reduction == "mean_over_batch":
        c[:] = 1 / w.sum()
    else:
        c[s], c[t] = 1 / w[s].sum(), 1 / w[t].sum()
        c *= 0.5 if reduction == "mean_over_domains" else 1.0
    return c


def hand_domain_method(
    model, f: np.ndarray, reduction: str, weight: float, conditional: bool, entropy: bool, entropy_path: bool = True
) -> dict:
    """DANN (conditional=False), CDAN, CDAN+E: the objective's gradients by hand. Domain head: one
    linear unit (logits); BCE per point l = softplus(u) - t u, t = 0 source, 1 target.
    `entropy_path=False` leaves out the entropy weights' gradient (to show it matters)."""
    wl, bl = weights(model.label_head)
    wd, bd = weights(model.domain_head)
    p = softmax(f @ wl + bl)
    h = np.einsum("nc,nj->ncj", p, f).reshape(len(f), -1) if conditional else f  # the map, class-major
    u = (h @ wd + bd).reshape(-1)
    t = np.array([0.0] * N_SOURCE + [1.0] * N_TARGET)
    per_point = np.logaddexp(0, u) - t * u
    entropy_values = -np.sum(p * np.log(p + EPSILON), axis=1)
    w = 1 + np.exp(-entropy_values) if entropy else np.ones(len(f))
    c = domain_coefficients(reduction, w)
    du = weight * c * w * (sigmoid(u) - t)  # d(weight * domain term)/du
    grads = {"adversary": [h.T @ du[:, None], np.array([du.sum()])]}
    dh = -LAMBDA * du[:, None] * wd[:, 0][None, :]  # reversed into the features
    df = np.einsum("ncj,nc->nj", dh.reshape(len(f), CLASSES, FEATURES), p) if conditional else dh
    dz = np.zeros_like(p)
    dz[:N_SOURCE] = label_loss_gradient(p[:N_SOURCE])
    if entropy and entropy_path:
        dw = weight * c * per_point  # d(weight * domain term)/dw
        d_entropy = -LAMBDA * dw * -np.exp(-entropy_values)  # through w = 1 + exp(-H), reversed
        dp = d_entropy[:, None] * -(np.log(p + EPSILON) + p / (p + EPSILON))
        dz += softmax_backward(p, dp)
    grads["label_head"] = [f.T @ dz, dz.sum(0)]
    grads["features"] = df + dz @ wl.T
    return grads


def hand_mdd(model, f: np.ndarray, margin: float, trade_off: float) -> dict:
    """MDD's classification form with logit heads: the objective's gradients by hand."""
    wl, bl = weights(model.label_head)
    wa, ba = weights(model.adversarial_head)
    p = softmax(f @ wl + bl)
    q_all = softmax(f @ wa + ba)
    h = np.argmax(p, axis=1)
    onehot = np.eye(CLASSES)[h]
    q = q_all[np.arange(len(f)), h]
    dz_adv = np.zeros_like(q_all)
    dz_adv[:N_SOURCE] = margin * (q_all - onehot)[:N_SOURCE] / N_SOURCE  # margin * mean(-log q)
    target = (q[:, None] * (onehot - q_all) / (1 - q + SHIFT)[:, None])[N_SOURCE:]
    dz_adv[N_SOURCE:] = target / N_TARGET  # - mean(log(1 - q + shift))
    dz_adv *= trade_off
    dz = np.zeros_like(p)
    dz[:N_SOURCE] = label_loss_gradient(p[:N_SOURCE])
    return {
        "adversary": [f.T @ dz_adv, dz_adv.sum(0)],
        "label_head": [f.T @ dz, dz.sum(0)],
        "features": -LAMBDA * dz_adv @ wa.T + dz @ wl.T,
    }


def features_of(model) -> np.ndarray:
    x_source, x_target, _ = batch()
    return np.asarray(to_numpy_any(model.feature_extractor(np.concatenate([x_source, x_target]))), "float64")


def assert_same(got: dict, expected: dict, what: str) -> None:
    for part in ("features", "label_head", "adversary"):
        g, e = got[part], expected[part]
        for i, (a, b) in enumerate(zip(g if isinstance(g, list) else [g], e if isinstance(e, list) else [e])):
            np.testing.assert_allclose(
                a.reshape(-1), np.asarray(b).reshape(-1), rtol=2e-4, atol=2e-6, err_msg=f"{what}: {part}[{i}]"
            )


def domain_model(method: str, **kwargs):
    label_head = dense(FEATURES, CLASSES, "softmax", seed=2, stddev=2.0)
    inputs = FEATURES * CLASSES if method != "dann" else FEATURES
    domain_head = dense(inputs, 1, "linear", seed=4)
    if method == "dann":
        return DANN(feature_extractor(), label_head, domain_head, lambda_schedule="constant", **kwargs)
    return CDAN(
        feature_extractor(),
        label_head,
        domain_head,
        entropy_conditioning=method == "cdan_e",
        randomized=False,
        map_gradient=False,  # the authors' code: the hand computation's g is a constant in the map
        **kwargs,
    )


@pytest.mark.parametrize("reduction", [None, "mean_over_domains", "mean_over_batch"])
def test_dann_gradients_equal_a_hand_computation(reduction):
    model = domain_model("dann")
    got = ours(model, reduction)
    expected = hand_domain_method(model, features_of(model), reduction or "sum_over_domains", 1.0, False, False)
    assert_same(got, expected, f"DANN {reduction}")
    assert np.abs(expected["label_head"][0]).max() > 1e-3  # the label loss reaches it: a non-trivial check


@pytest.mark.parametrize("method", ["cdan", "cdan_e"])
@pytest.mark.parametrize("reduction", [None, "sum_over_domains", "mean_over_batch"])
def test_cdan_gradients_equal_a_hand_computation(method, reduction):
    """Default reduction: the authors' (mean_over_domains)."""
    model = domain_model(method)
    got = ours(model, reduction)
    f = features_of(model)
    entropy = method == "cdan_e"
    expected = hand_domain_method(model, f, reduction or "mean_over_domains", 1.0, True, entropy)
    assert_same(got, expected, f"{method} {reduction}")
    if entropy:  # the entropy path moves the label head's gradient by more than the tolerance
        without = hand_domain_method(model, f, reduction or "mean_over_domains", 1.0, True, True, entropy_path=False)
        assert np.abs(expected["label_head"][0] - without["label_head"][0]).max() > 1e-3


def test_cdan_e_gradients_scale_with_the_domain_loss_weight():
    model = domain_model("cdan_e")
    got = ours(model, domain_loss_weight=0.3)
    expected = hand_domain_method(model, features_of(model), "mean_over_domains", 0.3, True, True)
    assert_same(got, expected, "CDAN+E, domain_loss_weight 0.3")


@pytest.mark.parametrize("margin, trade_off", [(4.0, 1.0), (2.0, 0.5)])
def test_mdd_gradients_equal_a_hand_computation(margin, trade_off):
    label_head = dense(FEATURES, CLASSES, "linear", seed=2, stddev=2.0)
    adversary = dense(FEATURES, CLASSES, "linear", seed=5, stddev=2.0)
    model = MDD(
        feature_extractor(),
        label_head,
        adversary,
        margin=margin,
        trade_off=trade_off,
        lambda_schedule="constant",
        lambda_max=LAMBDA,
    )
    # Logits: the label loss's gradient is as label_loss_gradient has it.
    model.compile(keras.optimizers.SGD(0.0), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    got = gradients(model)
    assert_same(got, hand_mdd(model, features_of(model), margin, trade_off), f"MDD margin {margin}")


def test_mdd_regression_gives_the_label_head_no_gradient_from_the_transfer_term():
    label_head = dense(FEATURES, 2, "linear", seed=2)
    adversary = dense(FEATURES, 2, "linear", seed=5)
    model = MDD(feature_extractor(), label_head, adversary, form="regression", lambda_schedule="constant")
    model.compile(keras.optimizers.SGD(0.0), "mse")
    y_source = np.zeros((N_SOURCE, 2), "float32")
    variables = list(model.label_head.trainable_variables)
    _, label_only, _ = objective_gradients(model, variables, y_source, term=1)
    _, both, _ = objective_gradients(model, variables, y_source)
    for a, b in zip(both, label_only):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-8)
