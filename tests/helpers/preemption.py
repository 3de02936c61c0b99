"""A training process that preemption tests kill and resume: one small fit of
`DANN`, `CDAN`, `MDD`, a `Student` (or a plain Keras model with `GradReverse` and
`DANNLambdaSchedule`) on the moons, saved as a long run saves, ended with
`os._exit` where asked, and its result written to a file.

    python -m helpers.preemption --method dann --backup DIR --out result.npz [--kill 3 | --kill 3:4]

Run it once uninterrupted, once with `--kill` and once more with the same
arguments but `--kill` (the resume): the tests compare the results. The
result holds the final weights, the optimizer's iterations, and lambda as
logged after each training batch, keyed by (epoch, batch).

Ways to save and resume (`--resume-by`):
  backup      keras.callbacks.BackupAndRestore(DIR) (with `--save-freq N`: every N batches);
  weights     ModelCheckpoint(save_weights_only) every epoch; the resume builds the model,
              load_weights() and fit(initial_epoch=k), k read from the checkpoint's name;
  saved       model.save(.keras) every epoch; the resume keras.models.load_model() and fit(initial_epoch=k).
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

KILLED_EXIT_CODE = 9
METHODS = ("dann", "cdan", "cdan-e", "cdan-random", "mdd", "mdd-warm", "student", "keras")


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m helpers.preemption", description=__doc__.splitlines()[0])
    parser.add_argument("--method", choices=METHODS, default="dann")
    parser.add_argument("--backup", required=True, help="the folder the run saves into (kept between processes)")
    parser.add_argument("--out", required=True, help="the .npz result, written at the end of the fit")
    parser.add_argument("--kill", default=None, help="EPOCH (at its start) or EPOCH:BATCH (after that batch)")
    parser.add_argument("--resume-by", choices=("backup", "weights", "saved"), default="backup")
    parser.add_argument("--save-freq", type=int, default=None, help="BackupAndRestore every N batches")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--steps", type=int, default=10, help="steps per epoch")
    parser.add_argument("--steps-per-execution", type=int, default=1)
    parser.add_argument("--ema", action="store_true", help="Adam(use_ema=True)")
    parser.add_argument("--part-optimizers", action="store_true", help="the feature extractor at 0.5x the rate")
    parser.add_argument("--lr-schedule", action="store_true", help="DANNLearningRateSchedule")
    parser.add_argument("--mirrored", action="store_true", help="MirroredStrategy over two logical CPUs")
    parser.add_argument(
        "--readme-scale",
        action="store_true",
        help="the README's DANN in ten lines: 150 moons a class, 15 hidden units, batch 300, Adam(use_ema), "
        "DANN's lambda_max 6 (use with --steps 50)",
    )
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    strategy = None
    if args.mirrored:  # TensorFlow's; every other run is any backend's (KERAS_BACKEND)
        import tensorflow as tf

        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    from grad_reverse._keras import keras

    keras.utils.set_random_seed(0)  # as a script does first; the pipeline's shuffles depend on it too
    backup = Path(args.backup)
    resuming = backup.exists() and any(backup.iterdir())
    initial_epoch = 0
    with strategy.scope() if strategy else contextlib.nullcontext():
        if resuming and args.resume_by == "weights":
            model = build(args, keras)
            model(data(args).x_source[:1])  # weights load into a built model
            model.build_optimizers()  # and the optimizer's state into built optimizers
            checkpoint, initial_epoch = latest(backup, "*.weights.h5")
            model.load_weights(checkpoint)
        elif resuming and args.resume_by == "saved":
            checkpoint, initial_epoch = latest(backup, "*.keras")
            model = keras.models.load_model(checkpoint)
        else:
            model = build(args, keras)
    log = lambda_log(keras)
    callbacks = [saver(args, backup, keras), log]
    if args.kill is not None:
        callbacks.append(killer(args.kill, keras))
    fit(args, model, callbacks, initial_epoch)
    optimizer = model.optimizer
    np.savez(
        args.out,
        iterations=int(optimizer.iterations.numpy()),
        lambdas=np.asarray(log.rows, np.float64).reshape(-1, 3),
        **{f"w{i}": w for i, w in enumerate(model.get_weights())},
    )
    return 0


def data(args: argparse.Namespace):
    from grad_reverse.demo.data import make_domains

    return make_domains(seed=0, n_per_class=150 if args.readme_scale else 40)


def build(args: argparse.Namespace, keras):
    """The model of `args.method`, seeded and compiled."""
    import grad_reverse

    keras.utils.set_random_seed(0)

    def dense(inputs: int, units: int, activation: str = "sigmoid"):
        return keras.Sequential([keras.Input((inputs,)), keras.layers.Dense(units, activation=activation)])

    rate = 0.01
    hidden = 15 if args.readme_scale else 8
    if args.lr_schedule:
        rate = grad_reverse.adaptation.DANNLearningRateSchedule(0.01, decay_steps=args.epochs * args.steps)
    optimizer = keras.optimizers.Adam(rate, use_ema=args.ema or args.readme_scale)
    compile_kwargs = {"steps_per_execution": args.steps_per_execution}
    if args.part_optimizers:
        compile_kwargs["part_optimizers"] = {"feature_extractor": 0.5}
    if args.method == "keras":
        model = plain_keras_model(keras, dense)
        model.compile(optimizer, ["binary_crossentropy"] * 2, steps_per_execution=args.steps_per_execution)
        return model
    if args.method == "dann":
        lambda_max = 6.0 if args.readme_scale else 2.0
        model = grad_reverse.DANN(dense(2, hidden), dense(hidden, 1), dense(hidden, 1), lambda_max=lambda_max)
    elif args.method.startswith("cdan"):
        model = grad_reverse.CDAN(
            dense(2, hidden),
            dense(hidden, 2, "softmax"),
            dense(2 * hidden if args.method != "cdan-random" else 32, 1),
            entropy_conditioning=args.method == "cdan-e",
            randomized=args.method == "cdan-random",
            randomized_dim=32,
        )
    elif args.method == "student":
        # Taught by an ensemble of two seeded networks (untrained: a resume must only reproduce its labels).
        members = [keras.Sequential([dense(2, hidden), dense(hidden, 1)]) for _ in range(2)]
        teacher = grad_reverse.adaptation.ProbabilityEnsemble(members)
        teacher(data(args).x_source[:1])
        model = grad_reverse.adaptation.Student(dense(2, hidden), dense(hidden, 1), teacher, confidence=0.5)
    else:
        warm = {"lambda_schedule": "warm_start", "warm_start_steps": 20} if args.method == "mdd-warm" else {}
        model = grad_reverse.MDD(dense(2, hidden), dense(hidden, 2, "softmax"), **warm)
    loss = "binary_crossentropy" if args.method in ("dann", "student") else "sparse_categorical_crossentropy"
    model.compile(optimizer, loss, **compile_kwargs)
    return model


def plain_keras_model(keras, dense):
    """The seed users' recipe: GradReverse(lambda_=variable) scheduled by DANNLambdaSchedule."""
    import grad_reverse

    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        plain_keras_model.lambda_ = tf.Variable(0.0, trainable=False)
    else:
        plain_keras_model.lambda_ = keras.Variable(0.0, trainable=False)
    inputs = keras.Input((2,))
    features = dense(2, 8)(inputs)
    label = dense(8, 1)(features)
    domain = dense(8, 1)(grad_reverse.GradReverse(lambda_=plain_keras_model.lambda_)(features))
    return keras.Model(inputs, [label, domain])


def fit(args: argparse.Namespace, model, callbacks: list, initial_epoch: int) -> None:
    moons = data(args)
    common = dict(epochs=args.epochs, steps_per_epoch=args.steps, initial_epoch=initial_epoch, verbose=0)
    if args.method == "keras":
        import grad_reverse

        x = np.concatenate([moons.x_source, moons.x_target])
        y_label = np.concatenate([moons.y_source, moons.y_source])  # the target's labels are not used for real
        y_domain = np.concatenate([np.zeros(len(moons.x_source)), np.ones(len(moons.x_target))]).astype("float32")
        schedule = grad_reverse.DANNLambdaSchedule(plain_keras_model.lambda_, lambda_max=2.0)
        model.fit(x, (y_label, y_domain), batch_size=16, shuffle=True, callbacks=[schedule, *callbacks], **common)
        return
    model.fit(
        moons.x_source,
        moons.y_source,
        target=moons.x_target,
        batch_size=300 if args.readme_scale else 16,
        seed=0,
        callbacks=callbacks,
        **common,
    )


def saver(args: argparse.Namespace, backup: Path, keras):
    if args.resume_by == "backup":
        return keras.callbacks.BackupAndRestore(str(backup), save_freq=args.save_freq or "epoch")
    backup.mkdir(parents=True, exist_ok=True)
    if args.resume_by == "weights":
        # The name carries the epoch count done, as users name them ({epoch} counts from 1).
        path = str(backup / "epoch{epoch:03d}.weights.h5")
        return keras.callbacks.ModelCheckpoint(path, save_weights_only=True)
    return keras.callbacks.ModelCheckpoint(str(backup / "epoch{epoch:03d}.keras"))


def latest(backup: Path, pattern: str) -> tuple[str, int]:
    """The newest checkpoint and the number of epochs it holds (its name's)."""
    path = sorted(glob.glob(str(backup / pattern)))[-1]
    return path, int(re.search(r"epoch(\d+)", os.path.basename(path)).group(1))


def lambda_log(keras):
    """A callback keeping lambda as logged after each training batch (by the models, or by
    DANNLambdaSchedule before it in the list), in `rows` of `(epoch, batch, lambda)`."""

    class _Log(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.rows: list = []
            self.epoch = 0

        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = epoch

        def on_train_batch_end(self, batch, logs=None):
            self.rows.append((self.epoch, batch, float(logs["lambda"])))

    return _Log()


def killer(where: str, keras):
    """A callback that ends the process with os._exit, as a preempted machine does: at the start
    of epoch E (`"E"`), or after batch B of epoch E (`"E:B"`), once the callbacks before it ran."""
    epoch, _, batch = where.partition(":")
    epoch = int(epoch)
    batch = int(batch) if batch else None

    class _Kill(keras.callbacks.Callback):
        def on_epoch_begin(self, e, logs=None):
            if batch is None and e == epoch:
                sys.stdout.flush()
                os._exit(KILLED_EXIT_CODE)
            self.epoch = e

        def on_train_batch_end(self, b, logs=None):
            if batch is not None and self.epoch == epoch and b == batch:
                sys.stdout.flush()
                os._exit(KILLED_EXIT_CODE)

    return _Kill()


# --- for the tests: running the process and reading its result -------------------------------

RUN_TIMEOUT_S = 240  # one process; a healthy one takes a few seconds


def run(args: list[str], *, expect_killed: bool = False) -> str:
    """Runs `python -m helpers.preemption args`; returns its stderr (warnings)."""
    from helpers.distribute import script_environment

    env = script_environment(CUDA_VISIBLE_DEVICES="-1", TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run(
        [sys.executable, "-m", "helpers.preemption", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    expected = KILLED_EXIT_CODE if expect_killed else 0
    assert done.returncode == expected, (
        f"helpers.preemption {args} exited with {done.returncode}, expected {expected}\n"
        f"stderr tail:\n{done.stderr[-4000:]}"
    )
    return done.stderr


def result(path) -> dict:
    """`{"weights": [...], "iterations": int, "lambdas": {(epoch, batch): lambda}}` of a result file."""
    with np.load(path) as saved:
        weights = [saved[f"w{i}"] for i in range(sum(1 for k in saved.files if k.startswith("w")))]
        rows = saved["lambdas"]
        return {
            "weights": weights,
            "iterations": int(saved["iterations"]),
            "lambdas": {(int(e), int(b)): float(v) for e, b, v in rows},
        }


def kill_and_resume(folder: Path, args: list[str], kill: str, saving: tuple = ()) -> tuple[dict, str]:
    """Trains with `args` until `kill`, then resumes in a second process: the resumed result
    and the resuming process's stderr. `saving`: how the run saves (`--resume-by`, `--save-freq`),
    which changes nothing of the training, so one uninterrupted run serves every way."""
    args = [*args, *saving]
    backup = str(folder / "backup")
    run([*args, "--backup", backup, "--out", str(folder / "killed.npz"), "--kill", kill], expect_killed=True)
    stderr = run([*args, "--backup", backup, "--out", str(folder / "resumed.npz")])
    return result(folder / "resumed.npz"), stderr


def uninterrupted(folder: Path, args: list[str]) -> dict:
    run([*args, "--backup", str(folder / "backup"), "--out", str(folder / "full.npz")])
    return result(folder / "full.npz")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
