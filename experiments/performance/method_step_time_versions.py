"""DANN's, CDAN's and MDD's training step time in two versions of the package
(two source trees), side by side in one run: per method, the median step
time of each and the ratio of the second to the first.

    python experiments/performance/method_step_time_versions.py --before TREE [--after TREE]
        [--rounds 15] [--steps 30] [--moons-steps 150] [--warmup 20] [--bench-rounds 11]

`--before` and `--after` are source trees of this project (e.g. git worktrees
of two commits) whose `python/` directory holds the package with its compiled
libraries; `--after` defaults to the tree this script is in. Each tree gets a
worker process of its own (`PYTHONPATH=TREE/python`), running this tree's
`method_step_time.py` cases (the same networks, data, batches and
optimizers in both). A measurement is one short `fit` of one model: a
callback takes each step's duration (batch begin to batch end: the training
function's call, the batch's drawing included) from the second step on, and
the measurement is their median, so that a step the machine's other work
delays does not move it (the mean would). Each worker builds every model once and warms it up (`--warmup` untimed
steps); then the workers wait for orders, and the driver asks them in turn,
one fit at a time, so that only one of them works at any moment and
neighbouring measurements of the two versions share the machine's load.
Each round: every case, every method in an order rotating by one each round,
the two versions one after the other (which goes first alternating each
round). The ratio after / before is taken round by round; the table gives
its median and range, with the median (over rounds) per-step time of each
version and its quartiles. A last table counts the ops in each model's traced
training step, per op type, in both versions (what keras.ops adds or removes
in the graph the step runs).

Besides the methods of `method_step_time.py`, each worker times "DANN no
GRL": DANN whose domain head sees the features without the reversal (same
work, minus the GradReverse op), so that the ratio DANN / DANN no GRL, round
by round in each version, says what the native op costs inside the models'
step. At the end each worker also runs the bench's DANN-style step
(`grad_reverse.bench.cases.case_dann_step`, the speed goal's native / no GRL
case) for `--bench-rounds` rounds (0: skip it), one worker after the other.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULT = "RESULT "
NO_GRL = "DANN no GRL"
DIGITS, MOONS = "digits-like", "moons"
CASE_TITLES = {
    DIGITS: "digits-like (256+256, 784-512-256, 10 classes)",
    MOONS: "moons (150+150, 15 features, binary)",
}


# --- the worker: one version of the package ------------------------------------------


def _no_grl_dann() -> type:
    from grad_reverse.adaptation import DANN

    class DANNNoGRL(DANN):
        """DANN with the domain head on the features themselves: the step's work minus the reversal."""

        def _domain_prediction(self, features, lambda_):
            return self.domain_head(features, training=True)

    return DANNNoGRL


def step_durations_timer():
    """A callback keeping each step's duration (batch begin to batch end: the training function's
    call, batch drawing included), from the second step (the first includes fit's setup)."""
    import time

    from grad_reverse._tools import keras

    class StepDurations(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.durations: list = []
            self.start = 0.0

        def on_train_batch_begin(self, batch, logs=None):
            self.start = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            if batch >= 1:
                self.durations.append(time.perf_counter() - self.start)

    return StepDurations()


def graph_ops(model) -> dict:
    """`{op type: count}` in the graph of the model's last traced training function, its
    function library (the step Keras wraps in a nested tf.function) included."""
    from collections import Counter

    function = model.train_function  # Keras 3's wrapper around the tf.function it calls
    cells = dict(zip(function.__code__.co_freevars, function.__closure__ or ()))
    traced = cells["multi_step_on_iterator"].cell_contents if "multi_step_on_iterator" in cells else function
    concrete = traced._list_all_concrete_functions()[-1]
    graph = concrete.graph.as_graph_def()
    counts = Counter(node.op for node in graph.node)
    for function in graph.library.function:
        counts.update(node.op for node in function.node_def)
    return dict(counts)


def worker(warmup: int) -> None:
    import method_step_time as mst
    import tensorflow as tf
    from dann_step_time import StepTimer

    tf.get_logger().setLevel("ERROR")
    builds = mst.build
    no_grl = _no_grl_dann()
    built: list = []

    def build(method: str, parts: tuple):
        built.append(no_grl(*parts) if method == NO_GRL else builds(method, parts))
        return built[-1]

    # The cases look `build` up at call time: the same setup for the extra model.
    mst.build = build
    methods = mst.METHODS + (NO_GRL,)
    fits: dict = {DIGITS: {}, MOONS: {}}
    models: dict = {DIGITS: {}, MOONS: {}}
    for case, make_case in ((DIGITS, mst.digits_like_case), (MOONS, mst.moons_case)):
        for method in methods:
            fits[case][method] = make_case(method, 0)
            models[case][method] = built[-1]
    for by_method in fits.values():
        for fit in by_method.values():  # tracing and first steps, untimed
            fit(warmup, StepTimer(warmup))
    print(RESULT + json.dumps({"methods": list(methods)}), flush=True)
    for line in sys.stdin:
        order = json.loads(line)
        if order["do"] == "fit":
            timer = step_durations_timer()
            fits[order["case"]][order["method"]](order["steps"], timer)
            answer = {"seconds": statistics.median(timer.durations)}
        elif order["do"] == "ops":
            answer = {
                case: {m: graph_ops(model) for m, model in by_method.items()} for case, by_method in models.items()
            }
        elif order["do"] == "bench":
            from grad_reverse.bench import cases

            result = cases.case_dann_step(512, 2048, order["rounds"])
            ratios = [n / g for n, g in zip(result.times["native"], result.times["no GRL"])]
            answer = {
                "ratios": ratios,
                "native": statistics.median(result.times["native"]),
                "no GRL": statistics.median(result.times["no GRL"]),
            }
        else:
            break
        print(RESULT + json.dumps(answer), flush=True)


# --- the driver ---------------------------------------------------------------------


class Worker:
    def __init__(self, tree: Path, warmup: int) -> None:
        env = dict(os.environ, PYTHONPATH=str(tree / "python"), TF_CPP_MIN_LOG_LEVEL="2")
        self.commit = subprocess.run(
            ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker", "--warmup", str(warmup)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=str(tree),
        )

    def answer(self) -> dict:
        for line in self.process.stdout:
            if line.startswith(RESULT):
                return json.loads(line[len(RESULT) :])
        raise RuntimeError(f"the worker of {self.commit} ended (exit status {self.process.wait()})")

    def ask(self, **order) -> dict:
        self.process.stdin.write(json.dumps(order) + "\n")
        self.process.stdin.flush()
        return self.answer()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.write(json.dumps({"do": "stop"}) + "\n")
            self.process.stdin.close()
            self.process.wait()


def _quartiles(values: list) -> tuple:
    if len(values) < 2:
        return values[0], values[0], values[0]
    q1, median, q3 = statistics.quantiles(values, n=4)
    return median, q1, q3


def _ratio_cell(ratios: list) -> str:
    median, q1, q3 = _quartiles(ratios)
    return f"{median:.3f} [{q1:.3f}-{q3:.3f}] ({min(ratios):.3f}-{max(ratios):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="the source tree of the version compared against")
    parser.add_argument("--after", type=Path, default=HERE.parent.parent, help="default: this script's tree")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=30, help="steps per fit, digits-like case")
    parser.add_argument("--moons-steps", type=int, default=150, help="steps per fit, moons case")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--bench-rounds", type=int, default=11, help="rounds of the bench's DANN step (0: skip)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.warmup)
        return
    if args.before is None:
        parser.error("--before TREE is required")
    if args.rounds < 1 or args.steps < 2 or args.moons_steps < 2 or args.warmup < 1 or args.bench_rounds < 0:
        parser.error("--rounds >= 1, --steps >= 2, --moons-steps >= 2, --warmup >= 1, --bench-rounds >= 0")

    load_before = os.getloadavg()[0]
    versions = {
        "before": Worker(args.before.resolve(), args.warmup),
        "after": Worker(args.after.resolve(), args.warmup),
    }
    try:
        methods = [worker_.answer()["methods"] for worker_ in versions.values()][0]
        steps = {DIGITS: args.steps, MOONS: args.moons_steps}
        times = {(v, c, m): [] for v in versions for c in steps for m in methods}
        for round_index in range(args.rounds):
            shift = round_index % len(methods)
            order = list(versions) if round_index % 2 == 0 else list(versions)[::-1]
            for case in steps:
                for method in methods[shift:] + methods[:shift]:
                    for version in order:
                        answer = versions[version].ask(do="fit", case=case, method=method, steps=steps[case])
                        times[version, case, method].append(answer["seconds"])
            print(f"round {round_index + 1}/{args.rounds} done", file=sys.stderr, flush=True)
        graphs = {v: versions[v].ask(do="ops") for v in versions}
        bench = (
            {v: versions[v].ask(do="bench", rounds=args.bench_rounds) for v in versions} if args.bench_rounds else {}
        )
    finally:
        for worker_ in versions.values():
            worker_.close()

    import tensorflow as tf  # only for the version line: the workers have measured

    commits = ", ".join(f"{v} {w.commit}" for v, w in versions.items())
    print(
        f"TensorFlow {tf.__version__}; {commits}; load {load_before:.2f} before, {os.getloadavg()[0]:.2f} after; "
        f"{args.rounds} rounds of {args.steps - 1} (digits-like) and {args.moons_steps - 1} (moons) timed steps "
        f"per model and version, after {args.warmup} untimed"
    )
    print(
        "\n| case | method | before: ms per step, median [quartiles] | after: ms per step, median [quartiles] | "
        "after / before, round by round: median [quartiles] (min-max) |\n|---|---|---|---|---|"
    )
    for case in steps:
        for method in methods:
            cells = []
            for version in versions:
                median, q1, q3 = _quartiles(times[version, case, method])
                cells.append(f"{median * 1e3:.2f} [{q1 * 1e3:.2f}-{q3 * 1e3:.2f}]")
            ratios = [a / b for a, b in zip(times["after", case, method], times["before", case, method])]
            print(f"| {CASE_TITLES[case]} | {method} | {cells[0]} | {cells[1]} | {_ratio_cell(ratios)} |")
    print(
        "\n| case | DANN / DANN no GRL, round by round, before: median [quartiles] (min-max) | after |\n|---|---|---|"
    )
    for case in steps:
        cells = []
        for version in versions:
            ratios = [a / b for a, b in zip(times[version, case, "DANN"], times[version, case, NO_GRL])]
            cells.append(_ratio_cell(ratios))
        print(f"| {CASE_TITLES[case]} | {cells[0]} | {cells[1]} |")
    print(
        "\n| case | method | ops in the traced step, before | after | op types whose count differs: "
        "before -> after |\n|---|---|---|---|---|"
    )
    for case in steps:
        for method in methods:
            before, after = graphs["before"][case][method], graphs["after"][case][method]
            changed = ", ".join(
                f"{op} {before.get(op, 0)} -> {after.get(op, 0)}"
                for op in sorted(set(before) | set(after))
                if before.get(op, 0) != after.get(op, 0)
            )
            total = f"| {sum(before.values())} | {sum(after.values())} |"
            print(f"| {CASE_TITLES[case]} | {method} {total} {changed or 'none'} |")
    if bench:
        print(
            f"\n| bench DANN step 512x2048 ({args.bench_rounds} rounds) | native ms | no GRL ms | "
            "native / no GRL, round by round: median [quartiles] (min-max) |\n|---|---|---|---|"
        )
        for version, result in bench.items():
            print(
                f"| {version} | {result['native'] * 1e3:.1f} | {result['no GRL'] * 1e3:.1f} | "
                f"{_ratio_cell(result['ratios'])} |"
            )


if __name__ == "__main__":
    main()
