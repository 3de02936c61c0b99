"""Is the objective, and its gradient, the same number on Keras 3's TensorFlow, JAX and PyTorch
backends? The numbers behind docs/results/backends.md's second table.

    KERAS_BACKEND=tensorflow python experiments/accuracy/backend_objective_agreement.py
    KERAS_BACKEND=jax        python experiments/accuracy/backend_objective_agreement.py
    KERAS_BACKEND=torch      python experiments/accuracy/backend_objective_agreement.py
    python experiments/accuracy/backend_objective_agreement.py --compare

One fixed batch, 6 source and 6 target 2-d points with the source's labels, and fixed weights,
both drawn from seeded numpy generators and set with `set_weights`, identical on every backend
(float32). The models are backend_agreement.py's: Dense(15, sigmoid) feature extractor;

    dann:   label head Dense(1, sigmoid), binary cross-entropy, domain head Dense(1, sigmoid)
    cdan:   label head Dense(2, softmax), sparse categorical cross-entropy, domain head
            Dense(1, sigmoid) on the full multilinear map (30 inputs)
    cdan_e: the same with entropy conditioning
    mdd:    label head Dense(2, softmax), sparse categorical cross-entropy, the adversarial
            head a copy of it (its own weights), margin 4, trade_off 1

For each: `model.objective(x_source, x_target, y_source, None, lambda_)`'s total at lambda 0.7,
and its gradient with respect to every trainable variable, taken by the backend's own autodiff
(TensorFlow: tf.GradientTape, with the native op inside; PyTorch: backward(); JAX:
jax.value_and_grad over the trainable values, read through keras.StatelessScope). Writes
`backend_objective_<backend>.npz` into --out-dir (`--tag NAME`: `backend_objective_NAME.npz`,
compared as one more row: e.g. TensorFlow again with TF_ENABLE_ONEDNN_OPTS=0, how far float32
rounding alone moves the numbers within one backend).

`--compare` reads the files and, against TensorFlow's, prints per method and backend the
largest relative difference of the objective, and of the gradients two ways: elementwise
max |a - b| / max(|b|, 1e-30) over every element of every gradient (with that element's |b|
beside its tensor's largest: how small it is), and per tensor max |a - b| / max |b| (the
largest over the tensors). The goal: <= 1e-5.
"""

from __future__ import annotations

import argparse
import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

METHODS = ("dann", "cdan", "cdan_e", "mdd")
BACKENDS = ("tensorflow", "jax", "torch")
N_SOURCE = N_TARGET = 6
LAMBDA = 0.7
WEIGHT_SEED = 61
BATCH_SEED = 3
TINY = 1e-30
GOAL = 1e-5
OUT_DIR = pathlib.Path(__file__).resolve().parent / "backend_results"


def batch(method: str) -> tuple:
    """`(x_source, x_target, y_source)`: the same arrays on every backend."""
    rng = np.random.default_rng(BATCH_SEED)
    x_source = rng.standard_normal((N_SOURCE, 2)).astype("float32")
    x_target = (rng.standard_normal((N_TARGET, 2)) + [0.8, -0.4]).astype("float32")
    y = np.array([0, 1, 1, 0, 1, 0])
    y_source = y.astype("float32")[:, None] if method == "dann" else y.astype("int32")
    return x_source, x_target, y_source


def dense(inputs: int, units: int, activation: str):
    import keras

    return keras.Sequential([keras.Input((inputs,)), keras.layers.Dense(units, activation=activation)])


def build(method: str):
    """The compiled model of `method`, with the fixed weights."""
    import keras

    import grad_reverse

    if method == "dann":
        model = grad_reverse.DANN(dense(2, 15, "sigmoid"), dense(15, 1, "sigmoid"), dense(15, 1, "sigmoid"))
        loss = "binary_crossentropy"
    elif method in ("cdan", "cdan_e"):
        model = grad_reverse.CDAN(
            dense(2, 15, "sigmoid"),
            dense(15, 2, "softmax"),
            dense(15 * 2, 1, "sigmoid"),
            randomized=False,
            entropy_conditioning=method == "cdan_e",
        )
        loss = "sparse_categorical_crossentropy"
    elif method == "mdd":
        model = grad_reverse.MDD(dense(2, 15, "sigmoid"), dense(15, 2, "softmax"))
        loss = "sparse_categorical_crossentropy"
    else:
        raise ValueError(f"unknown method {method!r}; accepted: {METHODS}")
    model.compile(keras.optimizers.SGD(0.0), loss)
    model(batch(method)[0])  # builds every part
    rng = np.random.default_rng(WEIGHT_SEED)
    model.set_weights([(0.8 * rng.standard_normal(w.shape)).astype("float32") for w in model.get_weights()])
    return model


def value_and_gradients(model, method: str) -> tuple:
    """`(total, [gradient of each trainable variable])`, float64 numpy, on this process's backend."""
    import keras

    backend = keras.backend.backend()
    x_source, x_target, y_source = batch(method)
    variables = list(model.trainable_variables)

    def total():
        tensors = [keras.ops.convert_to_tensor(a) for a in (x_source, x_target, y_source)]
        return model.objective(*tensors, None, keras.ops.convert_to_tensor(LAMBDA, "float32"))[0]

    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            value = total()
        grads = tape.gradient(value, variables)
    elif backend == "torch":
        for variable in variables:
            variable.value.grad = None
        value = total()
        value.backward()
        grads = [variable.value.grad for variable in variables]
    elif backend == "jax":
        import jax

        def pure(values):
            with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                return total()

        value, grads = jax.value_and_grad(pure)([v.value for v in variables])
    else:
        raise SystemExit(f"Keras runs on {backend}; this compares tensorflow, jax and torch")
    as64 = lambda t: np.asarray(keras.ops.convert_to_numpy(t), np.float64)  # noqa: E731
    if any(g is None for g in grads):
        missing = [v.path for v, g in zip(variables, grads) if g is None]
        raise SystemExit(f"{method}: no gradient reached {missing}")
    return float(as64(value)), [as64(g) for g in grads], [v.path for v in variables]


def run(out_dir: pathlib.Path, tag: str | None) -> None:
    import keras

    backend = keras.backend.backend()
    arrays = {}
    for method in METHODS:
        value, grads, names = value_and_gradients(build(method), method)
        arrays[f"{method}/total"] = np.float64(value)
        arrays[f"{method}/names"] = np.array(names)
        for i, g in enumerate(grads):
            arrays[f"{method}/grad_{i:03d}"] = g
        largest = max(float(np.max(np.abs(g))) for g in grads)
        print(f"{backend} {method}: objective {value:.9g}, {len(grads)} gradients, largest |g| {largest:.4g}")
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"backend_objective_{tag or backend}.npz"
    np.savez(path, keras=np.array(keras.__version__), **arrays)
    print(f"wrote {path.name}")


def gradients_of(arrays, method: str) -> list:
    return [arrays[k] for k in sorted(k for k in arrays.files if k.startswith(f"{method}/grad_"))]


def compare(out_dir: pathlib.Path) -> None:
    loaded = {}
    for backend in BACKENDS:
        path = out_dir / f"backend_objective_{backend}.npz"
        if path.exists():
            loaded[backend] = np.load(path)
        else:
            print(f"(no {path.name}: run it with KERAS_BACKEND={backend})")
    for path in sorted(out_dir.glob("backend_objective_*.npz")):  # runs saved with --tag
        loaded.setdefault(path.stem.removeprefix("backend_objective_"), np.load(path))
    if "tensorflow" not in loaded:
        raise SystemExit("--compare needs TensorFlow's file, the reference")
    reference = loaded["tensorflow"]
    print(f"relative difference from TensorFlow (Keras {reference['keras']}), lambda {LAMBDA}; goal <= {GOAL:g}")
    print(
        "| method | backend | objective | gradients, elementwise | worst element's size / its tensor's largest "
        "| gradients, per tensor | goal met |"
    )
    print("|---|---|---|---|---|---|---|")
    for method in METHODS:
        b_total = float(reference[f"{method}/total"])
        b_grads = gradients_of(reference, method)
        for backend, arrays in loaded.items():
            if backend == "tensorflow":
                continue
            if list(arrays[f"{method}/names"]) != list(reference[f"{method}/names"]):
                raise SystemExit(f"{method}: the variables differ between tensorflow and {backend}")
            a_total = float(arrays[f"{method}/total"])
            a_grads = gradients_of(arrays, method)
            objective = abs(a_total - b_total) / max(abs(b_total), TINY)
            # the worst element, and how small it is beside its tensor's largest
            worst = max(
                (float(np.max(np.abs(a - b) / np.maximum(np.abs(b), TINY))), i)
                for i, (a, b) in enumerate(zip(a_grads, b_grads))
            )
            elementwise, tensor = worst
            a, b = a_grads[tensor], b_grads[tensor]
            at = np.unravel_index(np.argmax(np.abs(a - b) / np.maximum(np.abs(b), TINY)), b.shape)
            smallness = abs(float(b[at])) / max(float(np.max(np.abs(b))), TINY)
            per_tensor = max(
                float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), TINY)) for a, b in zip(a_grads, b_grads)
            )
            met = (
                "yes"
                if max(objective, elementwise, per_tensor) <= GOAL
                else ("per tensor only" if max(objective, per_tensor) <= GOAL else "no")
            )
            print(
                f"| {method} | {backend} | {objective:.2e} | {elementwise:.2e} | {smallness:.1e} | {per_tensor:.2e} "
                f"| {met} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", type=pathlib.Path, default=OUT_DIR)
    parser.add_argument("--compare", action="store_true", help="the backends' files against TensorFlow's")
    parser.add_argument("--tag", help="the file's name instead of the backend's (e.g. tensorflow_onednn_off)")
    args = parser.parse_args()
    compare(args.out_dir) if args.compare else run(args.out_dir, args.tag)


if __name__ == "__main__":
    main()
