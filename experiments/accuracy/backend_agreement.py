"""Do DANN, CDAN and MDD reach the same target accuracy on Keras 3's TensorFlow, JAX and
PyTorch backends? The numbers behind docs/results/backends.md's first table.

    KERAS_BACKEND=tensorflow python experiments/accuracy/backend_agreement.py [--seeds 0-9] [--steps 1500]
    KERAS_BACKEND=jax        python experiments/accuracy/backend_agreement.py ...
    KERAS_BACKEND=torch      python experiments/accuracy/backend_agreement.py ...
    python experiments/accuracy/backend_agreement.py --compare [--steps 1500]

Each run trains, on the backend KERAS_BACKEND names, for every seed and method, on the moons
of `grad_reverse.demo.data.make_domains(seed)` (the target: the moons turned 35 degrees, its
labels used only to measure), the README's "DANN in ten lines" recipe with `import keras`:
Dense(15, sigmoid) feature extractor on the 2-d points, Adam(0.01, use_ema=True), batches of
300, `steps_per_epoch` steps (1500 in the README), `keras.utils.set_random_seed(seed)` and
`fit(seed=seed)`.

    dann: label head Dense(1, sigmoid), binary cross-entropy, domain head Dense(1, sigmoid)
          on the 15 features, lambda_max 6 (the README's).
    cdan: label head Dense(2, softmax), sparse categorical cross-entropy, domain head
          Dense(1, sigmoid) on the full multilinear map of 15 features x 2 classes (30
          inputs), lambda_max 6 (DANN's ramp, as the README's).
    mdd:  label head Dense(2, softmax), sparse categorical cross-entropy, the adversarial
          head a fresh copy of it, MDD's defaults otherwise (margin 4, trade_off 1, its
          ramp to lambda_max 0.1).

Target accuracy: the label head's class (argmax, or > 0.5 for one sigmoid unit) against the
target's labels, from `predict`. Writes `backend_agreement_<backend>_<steps>.json` (each
seed's target accuracy per method, the mean and the standard error `std(ddof=1)/sqrt(n)`)
into --out-dir and prints one line per seed.

`--compare` reads the three backends' files and prints, per method, mean +- s.e. per backend,
and for JAX and PyTorch the difference from TensorFlow's mean against two yardsticks:
the standard error of the difference, sqrt(se_b^2 + se_tf^2) (the criterion: "agrees" when
|mean_b - mean_tf| <= it), and TensorFlow's own standard error (reported beside it).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

METHODS = ("dann", "cdan", "mdd")
BACKENDS = ("tensorflow", "jax", "torch")
README_STEPS = 1500
OUT_DIR = pathlib.Path(__file__).resolve().parent / "backend_results"


def seed_range(text: str) -> list[int]:
    """`"0-9"` or `"0,3,5"` as a list of seeds."""
    if "-" in text:
        first, last = (int(part) for part in text.split("-"))
        return list(range(first, last + 1))
    return [int(part) for part in text.split(",")]


def dense(inputs: int, units: int, activation: str):
    import keras

    return keras.Sequential([keras.Input((inputs,)), keras.layers.Dense(units, activation=activation)])


def build(method: str):
    """`(model, loss)` of `method`, built after the seed is set."""
    import grad_reverse

    if method == "dann":
        model = grad_reverse.DANN(
            dense(2, 15, "sigmoid"), dense(15, 1, "sigmoid"), dense(15, 1, "sigmoid"), lambda_max=6.0
        )
        return model, "binary_crossentropy"
    if method == "cdan":
        model = grad_reverse.CDAN(
            dense(2, 15, "sigmoid"),
            dense(15, 2, "softmax"),
            dense(15 * 2, 1, "sigmoid"),
            randomized=False,
            lambda_max=6.0,
        )
        return model, "sparse_categorical_crossentropy"
    if method == "mdd":
        return grad_reverse.MDD(dense(2, 15, "sigmoid"), dense(15, 2, "softmax")), "sparse_categorical_crossentropy"
    raise ValueError(f"unknown method {method!r}; accepted: {METHODS}")


def target_accuracy(method: str, seed: int, steps: int) -> float:
    import keras

    from grad_reverse.demo.data import make_domains

    moons = make_domains(seed=seed)
    keras.utils.set_random_seed(seed)
    model, loss = build(method)
    model.compile(keras.optimizers.Adam(0.01, use_ema=True), loss)
    labels = moons.y_source if method == "dann" else np.asarray(moons.y_source).reshape(-1).astype("int32")
    model.fit(
        moons.x_source, labels, target=moons.x_target, batch_size=300, steps_per_epoch=steps, seed=seed, verbose=0
    )
    predictions = np.asarray(model.predict(moons.x_target, batch_size=1000, verbose=0))
    classes = predictions.argmax(-1) if predictions.shape[-1] > 1 else (predictions[:, 0] > 0.5).astype(int)
    return float(np.mean(classes == np.asarray(moons.y_target).reshape(-1)))


def summary(values: list[float]) -> dict:
    values = np.asarray(values, np.float64)
    return {"mean": float(values.mean()), "se": float(values.std(ddof=1) / math.sqrt(len(values)))}


def result_path(out_dir: pathlib.Path, backend: str, steps: int) -> pathlib.Path:
    return out_dir / f"backend_agreement_{backend}_{steps}.json"


def run(args: argparse.Namespace) -> None:
    import keras

    import grad_reverse

    backend = keras.backend.backend()
    results = {
        "backend": backend,
        "keras": keras.__version__,
        "grad_reverse": getattr(grad_reverse, "__version__", "unknown"),
        "steps": args.steps,
        "seeds": args.seeds,
        "methods": {},
    }
    for method in args.methods:
        accuracies, seconds = [], []
        for seed in args.seeds:
            start = time.perf_counter()
            accuracies.append(target_accuracy(method, seed, args.steps))
            seconds.append(time.perf_counter() - start)
            print(f"{backend} {method} seed {seed}: target {accuracies[-1]:.4f} ({seconds[-1]:.1f} s)", flush=True)
        results["methods"][method] = {"target_accuracy": accuracies, "seconds": seconds, **summary(accuracies)}
        print(
            f"{backend} {method}: mean {results['methods'][method]['mean']:.4f} "
            f"s.e. {results['methods'][method]['se']:.4f}",
            flush=True,
        )
    args.out_dir.mkdir(parents=True, exist_ok=True)
    path = result_path(args.out_dir, backend, args.steps)
    path.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {path.name}")


def compare(args: argparse.Namespace) -> None:
    runs = {}
    for backend in BACKENDS:
        path = result_path(args.out_dir, backend, args.steps)
        if path.exists():
            runs[backend] = json.loads(path.read_text())
        else:
            print(f"(no {path.name}: run it with KERAS_BACKEND={backend})")
    if "tensorflow" not in runs:
        raise SystemExit("--compare needs TensorFlow's file, the reference")
    print(f"target accuracy, {args.steps} steps, seeds {runs['tensorflow']['seeds']}: mean +- s.e.")
    print(
        "| method | "
        + " | ".join(runs)
        + " |"
        + "".join(
            f" {b}: diff from TF / s.e. of diff / TF s.e. / within s.e. of diff |" for b in runs if b != "tensorflow"
        )
    )
    print("|---" * (1 + len(runs) + len(runs) - 1) + "|")
    for method in METHODS:
        if any(method not in r["methods"] for r in runs.values()):
            continue
        cells = [f"{r['methods'][method]['mean']:.4f} +- {r['methods'][method]['se']:.4f}" for r in runs.values()]
        tf_row = runs["tensorflow"]["methods"][method]
        for backend, r in runs.items():
            if backend == "tensorflow":
                continue
            row = r["methods"][method]
            difference = row["mean"] - tf_row["mean"]
            se_difference = math.sqrt(row["se"] ** 2 + tf_row["se"] ** 2)
            verdict = "yes" if abs(difference) <= se_difference else "no"
            cells.append(f"{difference:+.4f} / {se_difference:.4f} / {tf_row['se']:.4f} / {verdict}")
        print(f"| {method} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=seed_range, default=seed_range("0-9"))
    parser.add_argument("--steps", type=int, default=README_STEPS, help="steps_per_epoch (one epoch)")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--out-dir", type=pathlib.Path, default=OUT_DIR)
    parser.add_argument("--compare", action="store_true", help="the three backends' files as a table")
    args = parser.parse_args()
    args.methods = [m for m in args.methods.split(",") if m]
    compare(args) if args.compare else run(args)


if __name__ == "__main__":
    main()
