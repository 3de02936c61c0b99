"""`grad_reverse.DANN`'s training step inside Keras' `fit` on Keras 3's JAX or
PyTorch backend, against a hand-written step of the same network in that
backend, side by side in one run.

    KERAS_BACKEND=jax python experiments/performance/backend_step_time.py [--rounds 11] [--steps 30]
        [--moons-steps 150] [--warmup 20]
    KERAS_BACKEND=torch python experiments/performance/backend_step_time.py ...

The two cases of `method_step_time.py`'s DANN row, rebuilt here without
TensorFlow (the same layers, data and optimizers):

* `digits-like`: 256 source + 256 target points of 784 values per batch,
  features Dense 512, 256 (relu), a softmax head of 10 classes (sparse
  categorical cross-entropy), the domain head Dense 256, 256, 1 (sigmoid),
  Adam(1e-3);
* `moons`: the moons demo (150 source + 150 target points per batch, 15
  sigmoid features, one sigmoid unit as the label head, the domain head
  Dense 16 (relu), 1 (sigmoid), binary cross-entropy, Adam(0.01) with EMA
  weights, momentum 0.99).

Per case, the timed runs:

* `DANN.fit`: `grad_reverse.DANN(features, label_head, domain_head)`,
  compiled with the label loss, trained by `fit(x, y, target=...)`;
* `Keras fit, same objective`: the hand-written run's model and objective
  (below) trained by Keras' own `fit` and default train_step (the objective
  as the model's `compute_loss`, lambda fixed at 1, batches from a
  `keras.utils.PyDataset` over the hand-written loop's batches): what Keras'
  fit costs around the same step, without the package;
* `hand-written`: a `keras.Model` of the same parts, its domain head behind
  the backend's own `grad_reverse.GradReverse` layer (`grad_reverse.backend_layer`)
  on a `keras.Variable` lambda, trained by the backend's idiomatic step. The
  same objective as DANN's default: the label loss's mean over the source
  points + the domain binary cross-entropy's mean over the source points +
  its mean over the target points (domain 0 for source, 1 for target), the
  paper's lambda ramp over the fit's steps (lambda_max 1, gamma 10), the
  same optimizer, batches of seeded random permutations of the arrays.
  On JAX: one `jax.jit`-compiled stateless step, `model.stateless_call`
  under `jax.value_and_grad`, then `optimizer.stateless_apply`; lambda
  computed in the step from the step number. On PyTorch: `model(...)`,
  `loss.backward()`, `optimizer.apply(gradients, variables)` under
  `torch.no_grad()`, lambda assigned before each step. The loss is read on
  the host after every step (`float(loss)`), as fit's callback reads the logs;
* on JAX also `hand-written, async`: the same step with the loss read only
  after the last step, so that JAX's asynchronous dispatch may overlap
  the host's work with the computation (what a loop that never looks at the
  loss gets; fit with a logging callback does not).

A run's time per step is the median interval between two consecutive steps'
ends (a fit's by a callback at each step's end, which reads the step's logs:
each step's results reach the host, as with any logging callback; the
loops' after reading the loss), from the first step's end on, so that a step
the machine's other work delays does not move it; the async run's is the
mean over its steps (they overlap). Every model is built and warmed up once
(`--warmup` untimed steps: tracing, compiling); then each round runs a short
run of each, the order rotating by one each round. The table gives the
per-step median and quartiles over the rounds and the ratio run / hand-written taken round by round (its median,
min and max). A last table gives the microseconds one batch's drawing takes
(median of 300 draws): DANN.fit's (`array_batches.PairedBatches.batch`, which
Keras' PyDataset adapter calls every step) and the hand-written loop's.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import keras
import numpy as np

import grad_reverse
from grad_reverse.demo.data import make_domains

BACKEND = keras.backend.backend()
LAMBDA_MAX, GAMMA = 1.0, 10.0  # DANN's defaults
MOONS_BATCH_PER_DOMAIN = 150  # grad_reverse.demo.training.BATCH_PER_DOMAIN (that module needs TensorFlow)
MOONS_LEARNING_RATE, MOONS_EMA_MOMENTUM = 0.01, 0.99  # grad_reverse.demo.training's optimizer()


class StepTimer(keras.callbacks.Callback):
    """A fit's seconds per step: the median interval between two consecutive steps' ends (on JAX and
    PyTorch Keras draws a batch between them: its drawing, the step and the callbacks are in it),
    from the first step's end on (the first step includes fit's setup)."""

    def __init__(self) -> None:
        super().__init__()
        self.ends: list = []

    def on_train_batch_end(self, batch, logs=None):
        self.ends.append(time.perf_counter())

    def per_step(self) -> float:
        return median_interval(self.ends)


def median_interval(ends: list) -> float:
    """The median of the intervals between consecutive times: a step the machine's other
    work delays does not move it (the mean would)."""
    return statistics.median(b - a for a, b in zip(ends, ends[1:]))


# --- the cases: parts, data, optimizer, label loss ----------------------------------------


def digits_like_case(seed: int) -> dict:
    rng = np.random.default_rng(seed)

    def parts() -> tuple:
        features = keras.Sequential(
            [
                keras.Input((784,)),
                keras.layers.Dense(512, activation="relu"),
                keras.layers.Dense(256, activation="relu"),
            ]
        )
        label = keras.Sequential([keras.Input((256,)), keras.layers.Dense(10, activation="softmax")])
        domain = keras.Sequential(
            [
                keras.Input((256,)),
                keras.layers.Dense(256, activation="relu"),
                keras.layers.Dense(256, activation="relu"),
                keras.layers.Dense(1, activation="sigmoid"),
            ]
        )
        return features, label, domain

    return {
        "x_source": rng.standard_normal((2048, 784)).astype("float32"),
        "y_source": rng.integers(0, 10, 2048).astype("int32"),
        "x_target": (rng.standard_normal((2048, 784)) + 0.5).astype("float32"),
        "parts": parts,
        "optimizer": lambda: keras.optimizers.Adam(1e-3),
        "loss": "sparse_categorical_crossentropy",
        "label_loss": keras.losses.sparse_categorical_crossentropy,
        "batch_size": 512,
    }


def moons_case(seed: int) -> dict:
    domains = make_domains(seed)

    def parts() -> tuple:
        features = keras.Sequential([keras.Input((2,)), keras.layers.Dense(15, activation="sigmoid")])
        label = keras.Sequential([keras.Input((15,)), keras.layers.Dense(1, activation="sigmoid")])
        domain = keras.Sequential(
            [keras.Input((15,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1, activation="sigmoid")]
        )
        return features, label, domain

    return {
        "x_source": domains.x_source.astype("float32"),
        "y_source": domains.y_source.reshape(-1, 1).astype("float32"),
        "x_target": domains.x_target.astype("float32"),
        "parts": parts,
        "optimizer": lambda: keras.optimizers.Adam(MOONS_LEARNING_RATE, use_ema=True, ema_momentum=MOONS_EMA_MOMENTUM),
        "loss": "binary_crossentropy",
        "label_loss": keras.losses.binary_crossentropy,
        "batch_size": 2 * MOONS_BATCH_PER_DOMAIN,
    }


# --- DANN in fit ----------------------------------------------------------------------------


def unshare_buffers(model: Any) -> None:
    """Gives each trainable variable a buffer of its own, untimed, between two fits.

    Keras 3.15.1 on JAX: at the end of a fit with `use_ema=True` the trainable
    variables take their moving averages' values, the same arrays, and the next
    fit's compiled step (which donates its state's buffers) fails with "Attempt
    to donate the same buffer twice" (a plain `keras.Sequential` too)."""
    import jax.numpy as jnp

    for variable in model.trainable_variables:
        variable.assign(jnp.array(variable.value, copy=True))


def dann_fit(case: dict, seed: int) -> Callable:
    keras.utils.set_random_seed(seed)
    model = grad_reverse.DANN(*case["parts"]())
    model.compile(case["optimizer"](), case["loss"])

    def run(steps: int) -> float:
        timer = StepTimer()
        model.fit(
            case["x_source"],
            case["y_source"],
            target=case["x_target"],
            batch_size=case["batch_size"],
            epochs=1,
            steps_per_epoch=steps,
            seed=seed,
            verbose=0,
            callbacks=[timer],
        )
        if BACKEND == "jax" and model.optimizer.use_ema:
            unshare_buffers(model)
        return timer.per_step()

    return run


# --- the hand-written step ------------------------------------------------------------------


class HandDANN(keras.Model):
    """`(label_head(features[:n_source]), domain_head(GradReverse(features)))` of `(x_source, x_target)`."""

    def __init__(self, feature_extractor, label_head, domain_head, lambda_: keras.Variable) -> None:
        super().__init__()
        self.feature_extractor, self.label_head, self.domain_head = feature_extractor, label_head, domain_head
        self.reversal = grad_reverse.GradReverse(lambda_)

    def call(self, inputs, training=None):
        x_source, x_target = inputs
        features = self.feature_extractor(keras.ops.concatenate([x_source, x_target], axis=0), training=training)
        n_source = keras.ops.shape(x_source)[0]
        label = self.label_head(features[:n_source], training=training)
        return label, self.domain_head(self.reversal(features, training=training), training=training)


def objective(label_loss_fn, y_source, label_output, domain_output, n_source: int, n_target: int):
    """`(total, label loss)`: DANN's default objective."""
    label_loss = keras.ops.mean(label_loss_fn(y_source, label_output))
    domain_true = keras.ops.concatenate([keras.ops.zeros((n_source, 1)), keras.ops.ones((n_target, 1))], axis=0)
    per_point = keras.losses.binary_crossentropy(domain_true, domain_output)
    domain_term = keras.ops.mean(per_point[:n_source]) + keras.ops.mean(per_point[n_source:])
    return label_loss + domain_term, label_loss


def ramp(step, total_steps):
    """The paper's lambda at `step` of `total_steps` (keras.ops: a traced value on JAX)."""
    progress = keras.ops.cast(step, "float32") / keras.ops.cast(total_steps, "float32")
    return LAMBDA_MAX * (2.0 / (1.0 + keras.ops.exp(-GAMMA * progress)) - 1.0)


class Batches:
    """Seeded batches of both domains from the arrays: each domain's points in a new random order every pass."""

    def __init__(self, case: dict, seed: int) -> None:
        self.case = case
        self.per_domain = case["batch_size"] // 2
        self.rng = np.random.default_rng(seed)
        self.source_order = self.target_order = np.empty(0, int)

    def next(self) -> tuple:
        case, k = self.case, self.per_domain
        if len(self.source_order) < k:
            self.source_order = self.rng.permutation(len(case["x_source"]))
        if len(self.target_order) < k:
            self.target_order = self.rng.permutation(len(case["x_target"]))
        source, self.source_order = self.source_order[:k], self.source_order[k:]
        target, self.target_order = self.target_order[:k], self.target_order[k:]
        return case["x_source"][source], case["x_target"][target], case["y_source"][source]


class FitDANN(HandDANN):
    """HandDANN trained by Keras' own `fit` and default train_step: the objective as its `compute_loss`."""

    def __init__(self, *args, label_loss_fn=None, per_domain: int = 0) -> None:
        super().__init__(*args)
        self.label_loss_fn, self.per_domain = label_loss_fn, per_domain

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        label_output, domain_output = y_pred
        k = self.per_domain
        return objective(self.label_loss_fn, y, label_output, domain_output, k, k)[0]


class ReadyBatches(keras.utils.PyDataset):
    """`steps` batches `((x_source, x_target), y_source)` drawn by `Batches`."""

    def __init__(self, batches: Batches, steps: int) -> None:
        super().__init__()
        self.batches, self.steps = batches, steps

    def __len__(self) -> int:
        return self.steps

    def __getitem__(self, index: int) -> tuple:
        x_source, x_target, y_source = self.batches.next()
        return (x_source, x_target), y_source


def keras_fit(case: dict, seed: int) -> Callable:
    """The hand-written network and objective in Keras' `fit` (lambda fixed at 1: no ramp)."""
    keras.utils.set_random_seed(seed)
    k = case["batch_size"] // 2
    lambda_ = keras.Variable(1.0, trainable=False, dtype="float32", name="lambda")
    model = FitDANN(*case["parts"](), lambda_, label_loss_fn=case["label_loss"], per_domain=k)
    model((case["x_source"][:k], case["x_target"][:k]))
    model.compile(case["optimizer"]())
    batches = Batches(case, seed)

    def run(steps: int) -> float:
        timer = StepTimer()
        model.fit(ReadyBatches(batches, steps), epochs=1, verbose=0, callbacks=[timer])
        if BACKEND == "jax" and model.optimizer.use_ema:
            unshare_buffers(model)
        return timer.per_step()

    return run


def hand_model(case: dict, seed: int) -> tuple:
    keras.utils.set_random_seed(seed)
    lambda_ = keras.Variable(0.0, trainable=False, dtype="float32", name="lambda")
    model = HandDANN(*case["parts"](), lambda_)
    k = case["batch_size"] // 2
    model((case["x_source"][:k], case["x_target"][:k]))
    optimizer = case["optimizer"]()
    optimizer.build(model.trainable_variables)
    return model, optimizer, lambda_


def jax_hand_written(case: dict, seed: int, read_every_step: bool) -> Callable:
    import jax

    model, optimizer, lambda_ = hand_model(case, seed)
    lambda_index = next(i for i, v in enumerate(model.non_trainable_variables) if v is lambda_)
    k = case["batch_size"] // 2

    def loss_and_updates(trainable, non_trainable, x_source, x_target, y_source):
        (label_output, domain_output), non_trainable = model.stateless_call(
            trainable, non_trainable, (x_source, x_target), training=True
        )
        total, label_loss = objective(case["label_loss"], y_source, label_output, domain_output, k, k)
        return total, (label_loss, non_trainable)

    gradient_of = jax.value_and_grad(loss_and_updates, has_aux=True)

    @jax.jit
    def train_step(state, x_source, x_target, y_source, step, total_steps):
        trainable, non_trainable, optimizer_values = state
        non_trainable = list(non_trainable)
        non_trainable[lambda_index] = ramp(step, total_steps)
        (total, (_, non_trainable)), gradients = gradient_of(trainable, non_trainable, x_source, x_target, y_source)
        trainable, optimizer_values = optimizer.stateless_apply(optimizer_values, gradients, trainable)
        return total, (trainable, non_trainable, optimizer_values)

    state = (
        [v.value for v in model.trainable_variables],
        [v.value for v in model.non_trainable_variables],
        [v.value for v in optimizer.variables],
    )
    batches = Batches(case, seed)
    box = {"state": state}

    def run(steps: int) -> float:
        state = box["state"]
        ends = []
        for step in range(steps):
            x_source, x_target, y_source = batches.next()
            # step and total_steps are traced arguments: a new value retraces nothing.
            loss, state = train_step(state, x_source, x_target, y_source, step, steps)
            if read_every_step or step == 0:
                float(loss)
                ends.append(time.perf_counter())
        float(loss)
        jax.block_until_ready(state)
        box["state"] = state
        if read_every_step:
            return median_interval(ends)
        return (time.perf_counter() - ends[0]) / (steps - 1)  # asynchronous: the mean from the first step's end

    return run


def torch_hand_written(case: dict, seed: int) -> Callable:
    import torch

    model, optimizer, lambda_ = hand_model(case, seed)
    trainable = model.trainable_variables
    k = case["batch_size"] // 2
    batches = Batches(case, seed)

    def run(steps: int) -> float:
        ends = []
        for step in range(steps):
            x_source, x_target, y_source = (torch.from_numpy(a) for a in batches.next())
            lambda_.assign(LAMBDA_MAX * (2.0 / (1.0 + math.exp(-GAMMA * step / steps)) - 1.0))
            label_output, domain_output = model((x_source, x_target), training=True)
            total, _ = objective(case["label_loss"], y_source, label_output, domain_output, k, k)
            model.zero_grad()
            total.backward()
            gradients = [v.value.grad for v in trainable]
            with torch.no_grad():
                optimizer.apply(gradients, trainable)
            float(total.detach())
            ends.append(time.perf_counter())
        return median_interval(ends)

    return run


# --- measurement ----------------------------------------------------------------------------


def runs_of(case: dict, seed: int) -> dict:
    runs = {"DANN.fit": dann_fit(case, seed), "Keras fit, same objective": keras_fit(case, seed)}
    if BACKEND == "jax":
        runs["hand-written"] = jax_hand_written(case, seed, read_every_step=True)
        runs["hand-written, async"] = jax_hand_written(case, seed, read_every_step=False)
    elif BACKEND == "torch":
        runs["hand-written"] = torch_hand_written(case, seed)
    else:
        raise SystemExit(f"set KERAS_BACKEND to jax or torch (this process runs {BACKEND!r})")
    return runs


def measure(case: dict, rounds: int, steps: int, warmup: int) -> dict:
    """`{run: [seconds per step, one per round]}`."""
    runs = runs_of(case, 0)
    for run in runs.values():  # tracing, compiling, first steps: untimed
        run(warmup)
    names = list(runs)
    times: dict = {name: [] for name in names}
    for round_index in range(rounds):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            times[name].append(runs[name](steps))
    return times


def batch_drawing(case: dict, calls: int = 300) -> tuple:
    """Microseconds per batch, median of `calls`: DANN.fit's batch drawing
    (`array_batches.PairedBatches.batch`, what Keras' PyDataset adapter calls every step)
    and the hand-written loop's (`Batches.next`)."""
    from grad_reverse.adaptation.training.array_batches import PairedBatches

    k = case["batch_size"] // 2
    paired = PairedBatches(case["x_source"], case["y_source"], case["x_target"], (k, k), calls, True, 0)
    batches = Batches(case, 0)
    medians = []
    for draw in (paired.batch, lambda _: batches.next()):
        durations = []
        for number in range(calls):
            start = time.perf_counter()
            draw(number)
            durations.append(time.perf_counter() - start)
        medians.append(statistics.median(durations) * 1e6)
    return tuple(medians)


def rows(title: str, times: dict) -> list:
    lines = []
    for name, values in times.items():
        q1, median, q3 = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
        ratios = [t / h for t, h in zip(values, times["hand-written"])]
        ratio = (
            "1 (reference)"
            if name == "hand-written"
            else f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})"
        )
        lines.append(f"| {title} | {name} | {median * 1e3:.3f} | {q1 * 1e3:.3f} | {q3 * 1e3:.3f} | {ratio} |")
    return lines


def versions() -> str:
    if BACKEND == "jax":
        import jax

        return f"JAX {jax.__version__}"
    import torch

    return f"PyTorch {torch.__version__}, {torch.get_num_threads()} threads"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--steps", type=int, default=30, help="steps per run, digits-like case")
    parser.add_argument("--moons-steps", type=int, default=150, help="steps per run, moons case")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--torch-threads", type=int, default=0, help="PyTorch's intra-op threads (0: its default)")
    args = parser.parse_args()
    if BACKEND == "torch" and args.torch_threads > 0:
        import torch

        torch.set_num_threads(args.torch_threads)
    if args.rounds < 1 or args.steps < 2 or args.moons_steps < 2 or args.warmup < 2:
        parser.error("--rounds >= 1, --steps >= 2, --moons-steps >= 2, --warmup >= 2")
    load_before = os.getloadavg()[0]
    results = {
        "digits-like (256+256, 784-512-256, 10 classes)": measure(
            digits_like_case(0), args.rounds, args.steps, args.warmup
        ),
        "moons (150+150, 15 features, binary)": measure(moons_case(0), args.rounds, args.moons_steps, args.warmup),
    }
    print(
        f"Keras {keras.__version__} on {BACKEND} ({versions()}); load {load_before:.2f} before, "
        f"{os.getloadavg()[0]:.2f} after; {args.rounds} rounds of {args.steps - 1} (digits-like) and "
        f"{args.moons_steps - 1} (moons) timed steps per run, after {args.warmup} untimed"
    )
    print(
        "| case | run | ms per step: median | lower quartile | upper quartile | "
        "/ hand-written, round by round: median (min-max) |\n|---|---|---|---|---|---|"
    )
    for title, times in results.items():
        print("\n".join(rows(title, times)))
    print(
        "\n| case | DANN.fit's batch drawing (PairedBatches.batch), us | the hand-written loop's (Batches.next), us |"
        "\n|---|---|---|"
    )
    for title, case in (("digits-like", digits_like_case(0)), ("moons", moons_case(0))):
        paired, hand = batch_drawing(case)
        print(f"| {title} | {paired:.1f} | {hand:.1f} |")


if __name__ == "__main__":
    main()
