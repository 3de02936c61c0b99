"""The native op's graph-mode forward + backward on two intra-op threads
against one, side by side: the goal is that no size runs slower on two.

    python experiments/performance/two_threads.py [--rounds 31] [--sizes 256K,1M,4M,16M] [--library release]

TensorFlow fixes its thread pools when it starts, so each thread count runs
in a worker process of its own (`tf.config.threading` set to 1 or 2
intra-op threads) that builds every size's `tf.function` (forward + backward
of `grad_reverse`, float32, dy passed in, a `tf.Variable` lambda) once and
warms it up; then, round after round, the parent asks each worker in turn
(the order alternating) to time each size, so that a round's two samples
share the machine's load. The table gives each count's median per call and
the median of the round-by-round ratios two threads / one, with the
quartiles: above 1, the second thread costs time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

# Calls per sample: about 20 ms of work at every size.
CALL_BYTES = 64 << 20


def worker(threads: int, sizes: list[int]) -> None:
    """Reads sizes on stdin; answers each with seconds per call (JSON)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import grad_reverse
    from grad_reverse.bench import cases

    lambda_ = cases.make_lambda("variable")
    fn = cases.fwd_bwd_function(grad_reverse.grad_reverse, lambda_)
    inputs = {size: cases.inputs(size, tf.float32) for size in sizes}

    def run(size: int) -> float:
        x, dy = inputs[size]
        count = max(1, CALL_BYTES // (4 * size))
        for _ in range(3):  # settle: this size's buffers, not the last one's
            fn(x, dy)
        start = time.perf_counter()
        for _ in range(count):
            result = fn(x, dy)
        result.numpy()
        return (time.perf_counter() - start) / count

    for size in sizes:
        run(size)
    print(json.dumps({"ready": grad_reverse.BUILD_INFO["library"]["kind"]}), flush=True)
    for line in sys.stdin:
        print(json.dumps({"seconds": run(int(line))}), flush=True)


def main() -> None:
    from speed_goals import ratio_quartiles

    from grad_reverse.bench import regime, table

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--sizes", default="256K,1M,4M,16M", help=table.SIZES_HELP)
    parser.add_argument("--library", default="release", choices=("release", "stable"))
    args = parser.parse_args()
    sizes = table.parse_sizes(args.sizes)
    env = dict(os.environ, GRAD_REVERSE_LIBRARY=args.library, TF_CPP_MIN_LOG_LEVEL="2")
    workers = {}
    for threads in (1, 2):
        command = [sys.executable, __file__, "--worker", str(threads), ",".join(map(str, sizes))]
        workers[threads] = subprocess.Popen(command, env=env, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    for threads, process in workers.items():
        ready = json.loads(process.stdout.readline())
        if ready["ready"] != args.library:
            raise SystemExit(f"the {threads}-thread worker loaded the {ready['ready']} library")
    samples = {(threads, size): [] for threads in workers for size in sizes}
    for round_index in range(args.rounds):
        for size in sizes:
            order = (1, 2) if round_index % 2 == 0 else (2, 1)
            for threads in order:
                workers[threads].stdin.write(f"{size}\n")
                workers[threads].stdin.flush()
                samples[threads, size].append(json.loads(workers[threads].stdout.readline())["seconds"])
    for process in workers.values():
        process.stdin.close()
        process.wait()
    print(f"CPU: {regime.cpu_model()}; {args.library} library; {args.rounds} rounds; load {os.getloadavg()[0]:.2f}")
    print("| elements (bytes) | 1 thread, µs | 2 threads, µs | 2 / 1, median [quartiles] |")
    print("|---|---:|---:|---|")
    for size in sizes:
        one, two = samples[1, size], samples[2, size]
        median, low, high = ratio_quartiles(two, one)
        print(
            f"| {table.size_label(size)} ({4 * size / 2**20:g} MiB) "
            f"| {statistics.median(one) * 1e6:.0f} | {statistics.median(two) * 1e6:.0f} "
            f"| {median:.2f} [{low:.2f}-{high:.2f}] |"
        )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(int(sys.argv[2]), [int(s) for s in sys.argv[3].split(",")])
    else:
        main()
