"""What Keras' distribution API costs a `DANN.fit` on one device (JAX): the
same fit under `keras.distribution.DataParallel` over that one device, and
without a distribution, side by side in one run.

    KERAS_BACKEND=jax python experiments/performance/data_parallel_cost.py [--rounds 7] [--steps 300]

The fit is the README's "DANN in ten lines" (moons, 150 points a class,
batches of 150 source + 150 target points, 15 sigmoid features, Adam(0.01)
with EMA). Each case runs in a process of its own (Keras' distribution is
global to a process), started in alternating order, `--rounds` of each: the
process makes its model (under the distribution, or without one) and runs
one fit of 20 + `--steps` steps, timing the last `--steps` (the step is
compiled in the first). It prints each case's median and the ratio of the medians
(DataParallel / none) and exits 1 when the ratio is over `--max-ratio`
(1.05: the goal of docs/distributed.md).

Scaling (two devices against one) cannot be measured on a machine with no
more cores than the study's (forced host devices share the same cores); this
script measures only the cost of the distribution's machinery.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import keras

import grad_reverse
from grad_reverse.demo.data import make_domains

CASES = ("none", "DataParallel")


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--max-ratio", type=float, default=1.05)
    parser.add_argument("--case", choices=CASES, default=None, help="(the child process: one case, timed)")
    return parser.parse_args(argv)


def model() -> keras.Model:
    """The README's DANN, made (its variables placed) under the process's distribution."""
    keras.utils.set_random_seed(0)

    def dense(inputs: int, units: int, activation: str = "sigmoid") -> keras.Sequential:
        return keras.Sequential([keras.Input((inputs,)), keras.layers.Dense(units, activation=activation)])

    dann = grad_reverse.DANN(dense(2, 15), dense(15, 1), dense(15, 1), lambda_max=6.0)
    dann.compile(keras.optimizers.Adam(0.01, use_ema=True), "binary_crossentropy")
    return dann


WARMUP_STEPS = 20  # the step is compiled in the first


class _Clock(keras.callbacks.Callback):
    """The seconds from the end of the warm-up's last batch to the end of the fit."""

    def on_train_batch_end(self, batch, logs=None):
        if batch == WARMUP_STEPS - 1:
            self.start = time.perf_counter()

    def on_train_end(self, logs=None):
        self.seconds = time.perf_counter() - self.start


def one_case(case: str, steps: int) -> float:
    """Seconds of `steps` steps of a warmed-up fit, with or without `DataParallel` on one device. One
    fit (warm-up and timed steps in it): on JAX a second fit of a model whose Adam keeps EMA weights
    fails in Keras 3.15 (the EMA swap at a fit's end leaves two variables on one buffer)."""
    import jax

    if case == "DataParallel":
        keras.distribution.set_distribution(keras.distribution.DataParallel(devices=jax.devices()[:1]))
    moons = make_domains(seed=0, n_per_class=150)
    clock = _Clock()
    model().fit(
        moons.x_source,
        moons.y_source,
        target=moons.x_target,
        batch_size=300,
        steps_per_epoch=WARMUP_STEPS + steps,
        seed=0,
        verbose=0,
        callbacks=[clock],
    )
    return clock.seconds


def main(argv: list[str]) -> int:
    args = parse(argv)
    if keras.backend.backend() != "jax":
        print(f"Keras' distribution API is JAX's here; this process runs Keras on {keras.backend.backend()}")
        return 2
    if args.case:
        print(f"SECONDS {one_case(args.case, args.steps)}")
        return 0
    import jax

    times: dict = {case: [] for case in CASES}
    for round_ in range(args.rounds):
        for case in CASES if round_ % 2 == 0 else reversed(CASES):
            command = [sys.executable, __file__, "--case", case, "--steps", str(args.steps)]
            done = subprocess.run(command, env=os.environ, capture_output=True, text=True, check=True)
            times[case].append(float(done.stdout.split("SECONDS ")[-1]))
    medians = {case: statistics.median(values) for case, values in times.items()}
    print(f"device: {jax.devices()[0]}, jax {jax.__version__}, keras {keras.__version__}")
    print(f"{args.rounds} rounds of a {args.steps}-step DANN.fit (README's moons), medians:")
    for case, median in medians.items():
        spread = ", ".join(f"{t:.3f}" for t in times[case])
        print(f"  {case}: {median:.3f} s ({spread})")
    ratio = medians["DataParallel"] / medians["none"]
    print(f"ratio DataParallel (one device) / none: {ratio:.3f} (goal <= {args.max_ratio})")
    return 0 if ratio <= args.max_ratio else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
