"""`helpers.preemption`'s training process under Keras' distribution API on JAX:
one process over N forced host devices, or one of P processes on loopback.

    python -m helpers.distributed_fit --devices 2 -- --method dann --backup DIR --out result.npz
    python -m helpers.distributed_fit --processes 2 --process-id I --port PORT -- --method dann ...

Each group of arguments after a `--` is one fit of `helpers.preemption`, run
in turn in this process (starting JAX costs more than a small fit); a group
with `--no-distribution` runs without one (the reference). `--record FILE`
keeps the first batch this process drew (its share). The commands are docs/distributed.md's: `XLA_FLAGS` before JAX is imported, the
gloo CPU collectives, `keras.distribution.initialize`, `DataParallel` over
`jax.devices()` set before the model is made. `--mistakes a,b` makes each named
mistake in turn, which `fit` must refuse before any step: a line
`REFUSED[mistake]: message`, or `TRAINED[mistake]` where it was not refused
(`unequal-lambda`: process 1's DANN has lambda_max 3, process 0's 2).
"""

from __future__ import annotations

import argparse
import os
import sys

MISTAKES = ("odd-batch", "late-distribution", "unequal-data", "unequal-lambda", "arrays-after-fit")


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="python -m helpers.distributed_fit", description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=2, help="forced host devices of this process (0: none)")
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--process-id", type=int, default=0)
    parser.add_argument("--port", type=int, default=0, help="the coordinator's port on 127.0.0.1")
    parser.add_argument("--mistakes", default="", help=f"comma-separated, of {', '.join(MISTAKES)}")
    parser.add_argument(
        "--record", default=None, help="an .npz of the first batch this process drew ({i}: the process id)"
    )
    split = argv.index("--") if "--" in argv else len(argv)
    own = parser.parse_args(argv[:split])
    groups: list = []
    for argument in argv[split:]:
        if argument == "--":
            groups.append([])
        else:
            groups[-1].append(argument)
    return own, groups


def main(argv: list[str]) -> int:
    own, groups = parse(argv)
    rest = groups[0]
    if own.devices > 1:  # read when JAX starts: before its import
        os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={own.devices}"
    import jax

    if own.processes > 1:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    import keras

    from helpers import preemption

    if own.processes > 1:
        keras.distribution.initialize(f"127.0.0.1:{own.port}", own.processes, own.process_id)
    distribution = keras.distribution.DataParallel(devices=jax.devices())
    if own.mistakes:
        for mistake in own.mistakes.split(","):
            make_mistake(mistake, rest, own.process_id, distribution, keras)
        return 0
    if own.record:
        record_first_batch(own.record.replace("{i}", str(own.process_id)))
    for group in groups:
        alone = "--no-distribution" in group
        keras.distribution.set_distribution(None if alone else distribution)
        preemption.main([a for a in group if a != "--no-distribution"])
    return 0


def record_first_batch(path: str) -> None:
    """Saves the first batch `PairedBatches` gives Keras in this process (its share) to `path`."""
    import numpy as np

    from grad_reverse.adaptation.training.array_batches import PairedBatches

    draw = PairedBatches.__getitem__

    def drawn(self, index):
        batch = draw(self, index)
        if not os.path.exists(path):
            (x_source, x_target), y_source = batch
            np.savez(path, x_source=x_source, x_target=x_target, y_source=y_source)
        return batch

    PairedBatches.__getitem__ = drawn


def make_mistake(mistake: str, rest: list[str], process_id: int, distribution, keras) -> None:
    """Makes `mistake` with the setup `rest`; prints whether the fit refused it (a ValueError)."""
    from helpers import preemption

    options = preemption.parse(rest)
    late = mistake == "late-distribution"  # the model made first, the distribution set after it
    keras.distribution.set_distribution(None if late else distribution)
    model = preemption.build(options, keras)
    keras.distribution.set_distribution(distribution)
    if mistake == "unequal-lambda" and process_id == 1:
        # What DANN(..., lambda_max=3) holds, set on the one model: a second model made on one
        # process alone would make variables (its step counter, metrics) on that process only.
        model.lambda_max = 3.0
    moons = preemption.data(options)
    keep = len(moons.x_source) - (process_id if mistake == "unequal-data" else 0)  # process 1: a point fewer
    batch_size = 18 if mistake == "odd-batch" else 16  # 9 + 9 points do not split over 2 devices
    try:
        model.fit(
            moons.x_source[:keep],
            moons.y_source[:keep],
            target=moons.x_target,
            batch_size=batch_size,
            epochs=1,
            steps_per_epoch=2,
            seed=0,
            verbose=0,
        )
    except ValueError as error:
        steps = int(model.optimizer.iterations.numpy())
        print(f"REFUSED[{mistake}] after {steps} steps: {error}", flush=True)
        return
    if mistake == "arrays-after-fit":  # the fit was right: what follows it is asked
        after_fit(model, moons, keras)
        return
    print(f"TRAINED[{mistake}]", flush=True)


def after_fit(model, moons, keras) -> None:
    """`evaluate` and `predict` on arrays after a multi-process fit: a line `REFUSED[call]: message` for
    each refused, then `CALLED[sum]: VALUE` of the model called on the points (the docs' way)."""
    import numpy as np

    for call in ("evaluate", "predict"):
        try:
            if call == "evaluate":
                model.evaluate(moons.x_target, moons.y_target, verbose=0)
            else:
                model.predict(moons.x_target, verbose=0)
        except ValueError as error:
            print(f"REFUSED[{call}]: {error}", flush=True)
    outputs = keras.ops.convert_to_numpy(model(moons.x_target, training=False))
    print(f"CALLED[sum]: {float(np.sum(outputs)):.9g}", flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
