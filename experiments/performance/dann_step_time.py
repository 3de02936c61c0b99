"""Time per training step of `grad_reverse.DANN` against the same DANN wired
by hand (the moons demo before the class existed), side by side in one run.

    python experiments/performance/dann_step_time.py [--rounds 30] [--steps 200] [--warmup 200]

Both train the demo's network on the demo's data (150 source + 150 target
points per batch, Adam with EMA weights, the paper's lambda ramp to 6) with
Keras `fit`:

* hand-wired: one functional model with `{"label", "domain"}` outputs, the
  GradReverse layer on a `tf.Variable` that `DANNLambdaSchedule` assigns
  before every batch, and a dataset of `(x, targets, sample_weights)` whose
  label weights zero the target half;
* class: `DANN` from the demo (lambda computed inside the step, label head
  on the source half only).

Both models are built and warmed up (`--warmup` untimed steps: tracing,
first-step work) once; then each round runs a short `fit` of `--steps` steps
of each (order alternating), timed from a callback, so that neighbouring
measurements share the machine's load. The table gives the per-step median
and quartiles over rounds, and the ratio class / hand-wired of each round. Say the machine's load when quoting it: the steps are short
(about a millisecond) and a shared CPU moves them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

from grad_reverse._tools import keras  # noqa: E402
from grad_reverse.demo.data import make_domains  # noqa: E402
from grad_reverse.demo.models import HIDDEN_UNITS, build_dann  # noqa: E402
from grad_reverse.demo.training import BATCH_PER_DOMAIN, GAMMA, LAMBDA_MAX, optimizer  # noqa: E402
from grad_reverse.layer import GradReverse  # noqa: E402
from grad_reverse.schedule import DANNLambdaSchedule  # noqa: E402


class StepTimer(keras.callbacks.Callback):
    """Seconds per step over the steps after the first `warmup`."""

    def __init__(self, warmup: int) -> None:
        super().__init__()
        self.warmup = warmup
        self.start = self.end = 0.0
        self.steps = 0

    def on_train_batch_begin(self, batch, logs=None):
        if batch == self.warmup:
            self.start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        if batch >= self.warmup:
            self.steps += 1
            self.end = time.perf_counter()

    def per_step(self) -> float:
        return (self.end - self.start) / self.steps


def hand_wired(domains, seed: int):
    """The demo's DANN before `grad_reverse.DANN`: one model, sample weights, a schedule callback."""
    lambda_ = tf.Variable(0.0, trainable=False)
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((2,))
    features = keras.layers.Dense(HIDDEN_UNITS, activation="sigmoid")(inputs)
    label = keras.layers.Dense(1, activation="sigmoid")(features)
    domain = keras.layers.Dense(1, activation="sigmoid")(GradReverse(lambda_)(features))
    model = keras.Model(inputs, {"label": label, "domain": domain})
    model.compile(
        optimizer=optimizer(),
        loss={"label": keras.losses.BinaryCrossentropy(), "domain": keras.losses.BinaryCrossentropy()},
        weighted_metrics={"label": ["accuracy"]},
    )
    k = BATCH_PER_DOMAIN

    def batches(points, n, seed):
        return tf.data.Dataset.from_tensor_slices(points).shuffle(n, seed=seed).repeat().batch(k, drop_remainder=True)

    zeros, ones = tf.zeros([k]), tf.ones([k])
    label_weight = tf.concat([tf.fill([k], 2.0), zeros], 0)

    def join(source_batch, x_target):
        x_source, y_source = source_batch
        targets = {"label": tf.concat([y_source, zeros], 0), "domain": tf.concat([zeros, ones], 0)}
        return (
            tf.concat([x_source, x_target], 0),
            targets,
            {"label": label_weight, "domain": tf.concat([ones, ones], 0)},
        )

    source = batches((domains.x_source, domains.y_source), len(domains.x_source), seed)
    target = batches(domains.x_target, len(domains.x_target), seed + 1)
    dataset = tf.data.Dataset.zip((source, target)).map(join)

    def fit(steps: int, timer: StepTimer) -> None:
        model.fit(
            dataset,
            epochs=1,
            steps_per_epoch=steps,
            shuffle=False,
            verbose=0,
            callbacks=[DANNLambdaSchedule(lambda_, gamma=GAMMA, lambda_max=LAMBDA_MAX), timer],
        )

    return fit


def with_class(domains, seed: int):
    model = build_dann(seed, lambda_max=LAMBDA_MAX, gamma=GAMMA)
    model.compile(optimizer=optimizer(), loss="binary_crossentropy", metrics=["accuracy"])

    def fit(steps: int, timer: StepTimer) -> None:
        model.fit(
            domains.x_source,
            domains.y_source,
            target=domains.x_target,
            batch_size=2 * BATCH_PER_DOMAIN,
            epochs=1,
            steps_per_epoch=steps,
            seed=seed,
            verbose=0,
            callbacks=[timer],
        )

    return fit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=200)
    args = parser.parse_args()
    if args.rounds < 1 or args.steps < 2 or args.warmup < 1:
        parser.error("--rounds >= 1, --steps >= 2, --warmup >= 1")
    domains = make_domains(0)
    runs = {"hand-wired": hand_wired(domains, 0), "class": with_class(domains, 0)}
    for fit in runs.values():  # tracing and first steps, untimed
        fit(args.warmup, StepTimer(args.warmup))
    times = {name: [] for name in runs}
    for round_index in range(args.rounds):
        order = list(runs) if round_index % 2 == 0 else list(runs)[::-1]
        for name in order:
            timer = StepTimer(1)  # from the second step: the first includes fit's setup
            runs[name](args.steps, timer)
            times[name].append(timer.per_step())
    ratios = [c / h for c, h in zip(times["class"], times["hand-wired"])]
    print(
        f"TensorFlow {tf.__version__}, Keras {keras.__version__}; load {os.getloadavg()[0]:.2f}; "
        f"{args.rounds} rounds of {args.steps - 1} timed steps per model (after {args.warmup} untimed)"
    )
    print("| model | ms per step: median | lower quartile | upper quartile |\n|---|---|---|---|")
    for name in runs:
        q1, median, q3 = statistics.quantiles(times[name], n=4) if len(times[name]) > 1 else [times[name][0]] * 3
        print(f"| {name} | {median * 1e3:.3f} | {q1 * 1e3:.3f} | {q3 * 1e3:.3f} |")
    print(
        f"\nclass / hand-wired, round by round: median {statistics.median(ratios):.3f}, "
        f"min {min(ratios):.3f}, max {max(ratios):.3f}"
    )


if __name__ == "__main__":
    main()
