"""The extra wall time of a CDAN or MDD training step over DANN's at the same
batch and network, as ratios measured side by side in one run.

    python experiments/performance/method_step_time.py [--rounds 15] [--steps 50] [--moons-steps 200] [--warmup 20]

Methods: DANN, CDAN (the full multilinear map), CDAN with the randomized map
(1024 values), CDAN+E (full map, entropy weights) and MDD (classification,
its adversarial head a copy of the label head). Two cases, each a row per
method:

* `digits-like`: 256 source + 256 target points of 784 values (a flattened
  28x28 image) per batch, a feature extractor of Dense 512 and 256 (relu),
  a softmax head of 10 classes, the domain head Dense 256, 256, 1 (TLlib's
  discriminator shape at a quarter of its 1024 width, to keep a CPU step
  short), Adam. Why this one: it is what users of these methods run on a
  CPU: TLlib's examples put a 256-unit bottleneck before the heads, digit
  tasks have 10 classes, and the full map is then 2560 values, under the
  4096 switch, so CDAN's default uses it (the randomized row is what its
  1024-value map costs instead). Synthetic points: the data do not change
  the step's arithmetic.
* `moons`: the moons demo's small case (`grad_reverse.demo.method_runs`'
  networks: 15 sigmoid features, one sigmoid unit as a binary head, domain
  head Dense 16, 1; 150 source + 150 target points, Adam with EMA weights).

As experiments/performance/dann_step_time.py: every model is built and warmed up once
(`--warmup` untimed steps: tracing, first-step work); then each round runs a
short `fit` of each model, the order rotating by one each round, timed by a
callback from its second step, so that neighbouring measurements share the
machine's load. The table gives the per-step median and quartiles over the
rounds, and the ratio method / DANN taken round by round (its median, min
and max). Quote the load with it: the machine's other work moves the times.
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Callable
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from dann_step_time import StepTimer  # noqa: E402

from grad_reverse._tools import keras  # noqa: E402
from grad_reverse.adaptation import CDAN, DANN, MDD  # noqa: E402
from grad_reverse.demo.data import make_domains  # noqa: E402
from grad_reverse.demo.training import BATCH_PER_DOMAIN, optimizer  # noqa: E402

METHODS = ("DANN", "CDAN", "CDAN randomized", "CDAN+E", "MDD")


def build(method: str, parts: tuple) -> Any:
    """The uncompiled model of `method` on fresh `parts` (feature extractor, label head, domain head)."""
    features, label, domain = parts
    if method == "DANN":
        return DANN(features, label, domain)
    if method == "MDD":
        return MDD(features, label)
    return CDAN(
        features, label, domain, randomized=method == "CDAN randomized", entropy_conditioning=method == "CDAN+E"
    )


def digits_like_parts() -> tuple:
    features = keras.Sequential(
        [keras.Input((784,)), keras.layers.Dense(512, activation="relu"), keras.layers.Dense(256, activation="relu")]
    )
    label = keras.Sequential([keras.Input((256,)), keras.layers.Dense(10, activation="softmax")])
    # Unbuilt: CDAN builds it on its map's size.
    domain = keras.Sequential(
        [
            keras.layers.Dense(256, activation="relu"),
            keras.layers.Dense(256, activation="relu"),
            keras.layers.Dense(1, activation="sigmoid"),
        ]
    )
    return features, label, domain


def moons_parts() -> tuple:
    features = keras.Sequential([keras.Input((2,)), keras.layers.Dense(15, activation="sigmoid")])
    label = keras.Sequential([keras.Input((15,)), keras.layers.Dense(1, activation="sigmoid")])
    domain = keras.Sequential([keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1, activation="sigmoid")])
    return features, label, domain


def digits_like_case(method: str, seed: int) -> Callable:
    rng = np.random.default_rng(seed)
    x_source = rng.standard_normal((2048, 784)).astype("float32")
    y_source = rng.integers(0, 10, 2048).astype("int32")
    x_target = (rng.standard_normal((2048, 784)) + 0.5).astype("float32")
    keras.utils.set_random_seed(seed)
    model = build(method, digits_like_parts())
    model.compile(keras.optimizers.Adam(1e-3), "sparse_categorical_crossentropy")
    return fitter(model, x_source, y_source, x_target, batch_size=512, seed=seed)


def moons_case(method: str, seed: int) -> Callable:
    domains = make_domains(seed)
    keras.utils.set_random_seed(seed)
    model = build(method, moons_parts())
    model.compile(optimizer(), "binary_crossentropy")
    return fitter(
        model,
        domains.x_source,
        domains.y_source.reshape(-1, 1).astype("float32"),
        domains.x_target,
        batch_size=2 * BATCH_PER_DOMAIN,
        seed=seed,
    )


def fitter(model: Any, x_source, y_source, x_target, batch_size: int, seed: int) -> Callable:
    def fit(steps: int, timer: StepTimer) -> None:
        model.fit(
            x_source,
            y_source,
            target=x_target,
            batch_size=batch_size,
            epochs=1,
            steps_per_epoch=steps,
            seed=seed,
            verbose=0,
            callbacks=[timer],
        )

    return fit


def measure(make_case: Callable, rounds: int, steps: int, warmup: int) -> dict:
    """`{method: [seconds per step, one per round]}`."""
    runs = {method: make_case(method, 0) for method in METHODS}
    for fit in runs.values():  # tracing and first steps, untimed
        fit(warmup, StepTimer(warmup))
    times: dict = {method: [] for method in METHODS}
    for round_index in range(rounds):
        shift = round_index % len(METHODS)
        for method in METHODS[shift:] + METHODS[:shift]:
            timer = StepTimer(1)  # from the second step: the first includes fit's setup
            runs[method](steps, timer)
            times[method].append(timer.per_step())
    return times


def rows(case: str, times: dict) -> list:
    lines = []
    for method in METHODS:
        values = times[method]
        q1, median, q3 = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
        ratios = [t / d for t, d in zip(values, times["DANN"])]
        ratio = (
            "1 (reference)"
            if method == "DANN"
            else (f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})")
        )
        lines.append(f"| {case} | {method} | {median * 1e3:.2f} | {q1 * 1e3:.2f} | {q3 * 1e3:.2f} | {ratio} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=50, help="steps per fit, digits-like case")
    parser.add_argument("--moons-steps", type=int, default=200, help="steps per fit, moons case")
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args()
    if args.rounds < 1 or args.steps < 2 or args.moons_steps < 2 or args.warmup < 1:
        parser.error("--rounds >= 1, --steps >= 2, --moons-steps >= 2, --warmup >= 1")
    # Each fit's first step retraces (a new dataset per fit) and TensorFlow warns; the timer skips that step.
    tf.get_logger().setLevel("ERROR")
    load_before = os.getloadavg()[0]
    results = {
        "digits-like (256+256, 784-512-256, 10 classes)": measure(
            digits_like_case, args.rounds, args.steps, args.warmup
        ),
        "moons (150+150, 15 features, binary)": measure(moons_case, args.rounds, args.moons_steps, args.warmup),
    }
    print(
        f"TensorFlow {tf.__version__}, Keras {keras.__version__}; load {load_before:.2f} before, "
        f"{os.getloadavg()[0]:.2f} after; {args.rounds} rounds of {args.steps - 1} (digits-like) and "
        f"{args.moons_steps - 1} (moons) timed steps per model, after {args.warmup} untimed"
    )
    print(
        "| case | method | ms per step: median | lower quartile | upper quartile | "
        "/ DANN, round by round: median (min-max) |\n|---|---|---|---|---|---|"
    )
    for case, times in results.items():
        print("\n".join(rows(case, times)))


if __name__ == "__main__":
    main()
