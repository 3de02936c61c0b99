"""What Keras' distribution API costs a `DANN.fit` on one device (JAX): the
same fit under `keras.distribution.DataParallel` over that one device, and
without a distribution, side by side in one run.

    KERAS_BACKEND=jax python experiments/performance/data_parallel_cost.py [--rounds 7] [--steps 300]

The fit is the README's "DANN in ten lines" (moons, 150 points a class,
batches of 150 source + 150 target points, 15 sigmoid features, Adam(0.01)
with EMA). Each case has its own model, compiled and warmed up by a first
fit of 20 steps (the step is compiled then); each round then times one more
fit of `--steps` steps of both cases, in alternating order. It prints each
case's median and the ratio of the medians (DataParallel / none) and exits 1
when the ratio is over `--max-ratio` (1.05: the goal of docs/distributed.md).

Scaling (two devices against one) cannot be measured on a machine with no
more cores than the study's (forced host devices share the same cores); this
script measures only the cost of the distribution's machinery.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import keras

import grad_reverse
from grad_reverse.demo.data import make_domains


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--max-ratio", type=float, default=1.05)
    return parser.parse_args(argv)


def model(distribution) -> keras.Model:
    """The README's DANN, made (variables placed) under `distribution` (None: no distribution)."""
    keras.distribution.set_distribution(distribution)
    keras.utils.set_random_seed(0)

    def dense(inputs: int, units: int, activation: str = "sigmoid") -> keras.Sequential:
        return keras.Sequential([keras.Input((inputs,)), keras.layers.Dense(units, activation=activation)])

    dann = grad_reverse.DANN(dense(2, 15), dense(15, 1), dense(15, 1), lambda_max=6.0)
    dann.compile(keras.optimizers.Adam(0.01, use_ema=True), "binary_crossentropy")
    return dann


def timed_fit(case: tuple, steps: int) -> float:
    model_, distribution, moons = case
    keras.distribution.set_distribution(distribution)
    start = time.perf_counter()
    model_.fit(
        moons.x_source, moons.y_source, target=moons.x_target, batch_size=300, steps_per_epoch=steps, seed=0, verbose=0
    )
    return time.perf_counter() - start


def main(argv: list[str]) -> int:
    args = parse(argv)
    if keras.backend.backend() != "jax":
        print(f"Keras' distribution API is JAX's here; this process runs Keras on {keras.backend.backend()}")
        return 2
    import jax

    moons = make_domains(seed=0, n_per_class=150)
    one_device = keras.distribution.DataParallel(devices=jax.devices()[:1])
    cases = {"none": None, "DataParallel, one device": one_device}
    built = {name: (model(distribution), distribution, moons) for name, distribution in cases.items()}
    for case in built.values():
        timed_fit(case, 20)  # compiles the step
    times: dict = {name: [] for name in cases}
    for round_ in range(args.rounds):
        order = list(cases) if round_ % 2 == 0 else list(reversed(cases))
        for name in order:
            times[name].append(timed_fit(built[name], args.steps))
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"device: {jax.devices()[0]}, jax {jax.__version__}, keras {keras.__version__}")
    print(f"{args.rounds} rounds of a {args.steps}-step DANN.fit (README's moons), medians:")
    for name, median in medians.items():
        spread = ", ".join(f"{t:.3f}" for t in times[name])
        print(f"  {name}: {median:.3f} s ({spread})")
    ratio = medians["DataParallel, one device"] / medians["none"]
    print(f"ratio DataParallel / none: {ratio:.3f} (goal <= {args.max_ratio})")
    keras.distribution.set_distribution(None)
    return 0 if ratio <= args.max_ratio else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
