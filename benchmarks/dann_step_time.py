"""Time per training step of `grad_reverse.DANN` against the same DANN wired
by hand (the moons demo before the class existed), side by side in one run.

    python benchmarks/dann_step_time.py [--rounds 9] [--steps 1000] [--warmup 100]

Both train the demo's network on the demo's data (150 source + 150 target
points per batch, Adam with EMA weights, the paper's lambda ramp to 6) with
Keras `fit`:

* hand-wired: one functional model with `{"label", "domain"}` outputs, the
  GradReverse layer on a `tf.Variable` that `DANNLambdaSchedule` assigns
  before every batch, and a dataset of `(x, targets, sample_weights)` whose
  label weights zero the target half;
* class: `DANN` from the demo (lambda computed inside the step, label head
  on the source half only).

Each round trains a fresh model of each kind (order alternating), times the
steps after `--warmup` (tracing, first-step work) from a callback, and the
table gives the per-step median over rounds and the ratio class / hand-wired
of each round. Say the machine's load when quoting it: the steps are short
(about a millisecond) and a shared CPU moves them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

from grad_reverse._keras import keras  # noqa: E402
from grad_reverse.demo.data import make_domains  # noqa: E402
from grad_reverse.demo.models import HIDDEN_UNITS, build_dann  # noqa: E402
from grad_reverse.demo.training import BATCH_PER_DOMAIN, GAMMA, LAMBDA_MAX, _optimizer  # noqa: E402
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


def hand_wired(domains, seed: int, steps: int, timer: StepTimer) -> None:
    """The demo's DANN before `grad_reverse.DANN`: one model, sample weights, a schedule callback."""
    lambda_ = tf.Variable(0.0, trainable=False)
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((2,))
    features = keras.layers.Dense(HIDDEN_UNITS, activation="sigmoid")(inputs)
    label = keras.layers.Dense(1, activation="sigmoid")(features)
    domain = keras.layers.Dense(1, activation="sigmoid")(GradReverse(lambda_)(features))
    model = keras.Model(inputs, {"label": label, "domain": domain})
    model.compile(optimizer=_optimizer(),
                  loss={"label": keras.losses.BinaryCrossentropy(), "domain": keras.losses.BinaryCrossentropy()},
                  weighted_metrics={"label": ["accuracy"]})
    k = BATCH_PER_DOMAIN

    def batches(points, n, seed):
        return tf.data.Dataset.from_tensor_slices(points).shuffle(n, seed=seed).repeat().batch(k, drop_remainder=True)

    zeros, ones = tf.zeros([k]), tf.ones([k])
    label_weight = tf.concat([tf.fill([k], 2.0), zeros], 0)

    def join(source_batch, x_target):
        x_source, y_source = source_batch
        targets = {"label": tf.concat([y_source, zeros], 0), "domain": tf.concat([zeros, ones], 0)}
        return tf.concat([x_source, x_target], 0), targets, {"label": label_weight, "domain": tf.concat([ones, ones], 0)}

    source = batches((domains.x_source, domains.y_source), len(domains.x_source), seed)
    target = batches(domains.x_target, len(domains.x_target), seed + 1)
    model.fit(tf.data.Dataset.zip((source, target)).map(join), epochs=1, steps_per_epoch=steps, shuffle=False,
              verbose=0, callbacks=[DANNLambdaSchedule(lambda_, gamma=GAMMA, lambda_max=LAMBDA_MAX), timer])


def with_class(domains, seed: int, steps: int, timer: StepTimer) -> None:
    model = build_dann(seed, lambda_max=LAMBDA_MAX, gamma=GAMMA)
    model.compile(optimizer=_optimizer(), loss="binary_crossentropy", metrics=["accuracy"])
    model.fit(domains.x_source, domains.y_source, target=domains.x_target, batch_size=2 * BATCH_PER_DOMAIN,
              epochs=1, steps_per_epoch=steps, seed=seed, verbose=0, callbacks=[timer])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=100)
    args = parser.parse_args()
    if not 0 <= args.warmup < args.steps:
        parser.error("--warmup must be below --steps")
    domains = make_domains(0)
    runs = {"hand-wired": hand_wired, "class": with_class}
    times = {name: [] for name in runs}
    for round_index in range(args.rounds):
        order = list(runs) if round_index % 2 == 0 else list(runs)[::-1]
        for name in order:
            timer = StepTimer(args.warmup)
            runs[name](domains, round_index, args.steps, timer)
            times[name].append(timer.per_step())
        print(f"round {round_index}: " + ", ".join(f"{n} {times[n][-1] * 1e3:.3f} ms" for n in runs), flush=True)
    ratios = [c / h for c, h in zip(times["class"], times["hand-wired"])]
    print(f"\nTensorFlow {tf.__version__}, Keras {keras.__version__}; load {os.getloadavg()[0]:.2f}; "
          f"{args.rounds} rounds of {args.steps - args.warmup} timed steps")
    print("| model | ms per step (median) |\n|---|---|")
    for name in runs:
        print(f"| {name} | {statistics.median(times[name]) * 1e3:.3f} |")
    print(f"\nclass / hand-wired per round: {', '.join(f'{r:.3f}' for r in ratios)}; "
          f"median {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
