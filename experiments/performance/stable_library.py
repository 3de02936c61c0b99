"""The stable-ABI library against the C++ library of the running TensorFlow,
side by side in one run.

    python experiments/performance/stable_library.py [--rounds 15]

Two libraries that register the same ops cannot share a process, so each
runs in a worker process of its own (GRAD_REVERSE_LIBRARY=release, =stable)
that builds every case once and warms it up; then, round after round, the
parent asks each worker in turn (order alternating) to time each case, so
that the two samples of a round share the machine's load. Cases:

* eager 1K: forward + backward of 1,024 float32 under a GradientTape
  (the eager overhead of a small layer), per call;
* backward 256K / 4M / 16M / 64M: GradReverseGrad alone on that many
  float32 in eager mode (out of place: the caller holds dy), as bytes read +
  written per second (256K is a batch of 256 x 1,024 features: one thread;
  the larger ones are split over threads);
* DANN step: one training step of the moons demo's `grad_reverse.DANN`
  (`fit` on 150 + 150 points), per step.

The table gives each library's median over rounds and the median of the
round-by-round ratios stable / C++ (time) or stable / C++ (bandwidth).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CASES = ("eager 1K", "backward 256K", "backward 4M", "backward 16M", "backward 64M", "DANN step")
# What a worker times per sample: calls (or steps) back to back.
PER_SAMPLE = {
    "eager 1K": 2000,
    "backward 256K": 1000,
    "backward 4M": 60,
    "backward 16M": 20,
    "backward 64M": 6,
    "DANN step": 200,
}
SIZES = {"backward 256K": 1 << 18, "backward 4M": 4 << 20, "backward 16M": 16 << 20, "backward 64M": 64 << 20}


def worker() -> None:
    """Reads case names on stdin; answers each with seconds per call (JSON)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf

    import grad_reverse
    from grad_reverse.demo.data import make_domains
    from grad_reverse.demo.models import build_dann
    from grad_reverse.demo.training import BATCH_PER_DOMAIN, GAMMA, LAMBDA_MAX, optimizer

    rng = np.random.default_rng(0)
    small = tf.constant(rng.standard_normal(1024).astype(np.float32))
    large = {n: tf.constant(rng.standard_normal(n).astype(np.float32)) for n in SIZES.values()}
    reverse_grad = grad_reverse.ops.LIBRARY.module.grad_reverse_grad

    def eager_small():
        with tf.GradientTape() as tape:
            tape.watch(small)
            y = grad_reverse.grad_reverse(small, 1.0)
        return tape.gradient(y, small, output_gradients=small)

    domains = make_domains(0)
    model = build_dann(0, lambda_max=LAMBDA_MAX, gamma=GAMMA)
    model.compile(optimizer=optimizer(), loss="binary_crossentropy")

    def dann_steps(steps):
        model.fit(
            domains.x_source,
            domains.y_source,
            target=domains.x_target,
            batch_size=2 * BATCH_PER_DOMAIN,
            epochs=1,
            steps_per_epoch=steps,
            seed=0,
            verbose=0,
        )

    def timed(call, count):
        start = time.perf_counter()
        for _ in range(count):
            result = call()
        if hasattr(result, "numpy"):
            result.numpy()
        return (time.perf_counter() - start) / count

    def run(case):
        count = PER_SAMPLE[case]
        if case == "eager 1K":
            return timed(eager_small, count)
        if case.startswith("backward"):
            dy = large[SIZES[case]]
            return timed(lambda: reverse_grad(dy, 0.5), count)
        start = time.perf_counter()
        dann_steps(count)  # includes one fit's setup, the same for both libraries
        return (time.perf_counter() - start) / count

    for case in CASES:  # warm-up: tracing, first allocations
        run(case)
    print(json.dumps({"ready": grad_reverse.BUILD_INFO["library"]["kind"], "tensorflow": tf.__version__}), flush=True)
    for line in sys.stdin:
        print(json.dumps({"seconds": run(line.strip())}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=21)
    args = parser.parse_args()
    workers = {}
    for kind in ("release", "stable"):
        env = dict(os.environ, GRAD_REVERSE_LIBRARY=kind, TF_CPP_MIN_LOG_LEVEL="2")
        workers[kind] = subprocess.Popen(
            [sys.executable, __file__, "--worker"], env=env, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
    versions = {}
    for kind, process in workers.items():
        ready = json.loads(process.stdout.readline())
        if ready["ready"] != kind:
            raise SystemExit(f"the {kind} worker loaded the {ready['ready']} library")
        versions[kind] = ready["tensorflow"]
    samples = {(kind, case): [] for kind in workers for case in CASES}
    for round_index in range(args.rounds):
        for case in CASES:
            order = list(workers) if round_index % 2 == 0 else list(workers)[::-1]
            for kind in order:
                workers[kind].stdin.write(case + "\n")
                workers[kind].stdin.flush()
                samples[kind, case].append(json.loads(workers[kind].stdout.readline())["seconds"])
    for process in workers.values():
        process.stdin.close()
        process.wait()
    print(
        f"TensorFlow {versions['release']}; {args.rounds} rounds; load {os.getloadavg()[0]:.2f} at the end; "
        f"{os.cpu_count()} CPUs"
    )
    print("| case | C++ library | stable library | stable / C++ (round by round: median, min, max) |")
    print("|---|---:|---:|---|")
    for case in CASES:
        cpp, stable = samples["release", case], samples["stable", case]
        if case.startswith("backward"):
            n_bytes = 2 * 4 * SIZES[case]  # read + write
            cpp_value, stable_value = (n_bytes / statistics.median(t) / 1e9 for t in (cpp, stable))
            ratios = [c / s for c, s in zip(cpp, stable)]  # bandwidth ratio: inverse of time
            cells = f"{cpp_value:.1f} GB/s | {stable_value:.1f} GB/s"
            what = "bandwidth"
        else:
            cells = f"{statistics.median(cpp) * 1e6:.1f} µs | {statistics.median(stable) * 1e6:.1f} µs"
            ratios = [s / c for c, s in zip(cpp, stable)]
            what = "time"
        print(f"| {case} | {cells} | {what} {statistics.median(ratios):.3f} ({min(ratios):.3f} to {max(ratios):.3f}) |")


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        worker()
    else:
        main()
