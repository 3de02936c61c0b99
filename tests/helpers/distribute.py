"""Running a test file as a script in fresh processes (one scenario, or
MultiWorkerMirroredStrategy workers on 127.0.0.1) and comparing the weights
they print: the tf.distribute tests of tests/op/ and tests/adaptation/.

A scenario process must set up logical devices and the multi-worker runtime
before TensorFlow initializes, which the pytest process already has; it
prints one line, `RESULT <json>`, and the tests assert on that.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

TESTS = Path(__file__).resolve().parents[1]  # holds helpers/
RESULT_MARKER = "RESULT "
SCENARIO_TIMEOUT_S = 180  # whole-process bound; a healthy run takes a fraction of it


def script_environment(**update: str) -> dict[str, str]:
    """This process's environment with `update`, and tests/ first on
    PYTHONPATH: a test file run as a script imports these helpers."""
    path = os.pathsep.join([str(TESTS), *filter(None, [os.environ.get("PYTHONPATH")])])
    return dict(os.environ, **update, PYTHONPATH=path)


def as_lists(arrays) -> list:
    return [np.asarray(a).tolist() for a in arrays]  # float32 -> Python float is exact


def as_arrays(lists) -> list[np.ndarray]:
    return [np.asarray(a, np.float32) for a in lists]


def run_scenario(
    args: list[str], env_update: dict[str, str], timeout: float = SCENARIO_TIMEOUT_S, *, script: str
) -> dict:
    """Runs the test file `script` as a script and returns its RESULT json."""
    process = start_scenario(args, env_update, script)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop(process)
        stderr = process.communicate(timeout=30)[1]
        pytest.fail(f"scenario {args} did not finish within {timeout}s\nstderr tail:\n{stderr[-4000:]}")
    finally:
        stop(process)
    return parse_result(process, stdout, stderr)


def start_scenario(args: list[str], env_update: dict[str, str], script: str) -> subprocess.Popen:
    # The environment passes through (PYTHONPATH when testing a source tree,
    # nothing when testing an installed package), with tests/ added so the
    # script imports these helpers. CPU only: the scenarios are about
    # logical CPU devices and loopback workers, not whatever GPU a host has.
    env = script_environment(CUDA_VISIBLE_DEVICES="-1", TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("TF_CONFIG", None)  # only a worker gets one, its own
    env.update(env_update)
    return subprocess.Popen(
        [sys.executable, str(Path(script).resolve()), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.kill()
        process.wait(timeout=30)


def parse_result(process: subprocess.Popen, stdout: str, stderr: str) -> dict:
    lines = [line for line in stdout.splitlines() if line.startswith(RESULT_MARKER)]
    assert process.returncode == 0 and lines, (
        f"scenario {process.args[2:]} exited with {process.returncode}\n"
        f"stdout tail:\n{stdout[-2000:]}\nstderr tail:\n{stderr[-4000:]}"
    )
    return json.loads(lines[-1][len(RESULT_MARKER) :])


def free_loopback_ports(count: int) -> list[int]:
    """Ports the kernel reports free on 127.0.0.1 now (held together so they differ)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def assert_weights_close(actual, expected, what: str, rtol=1e-5, atol=1e-6) -> None:
    assert len(actual) == len(expected), what
    for i, (a, e) in enumerate(zip(actual, expected)):
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, err_msg=f"{what}: weight {i}")


def max_abs_difference(a, b) -> float:
    return max(float(np.max(np.abs(x - y))) if x.size else 0.0 for x, y in zip(a, b))


def run_workers(args: list[str], workers: int, *, script: str) -> list[dict]:
    """Runs `script args` as `workers` MultiWorkerMirroredStrategy workers on
    127.0.0.1 ports (one TF_CONFIG each); returns their RESULT jsons in task order."""
    ports = free_loopback_ports(workers)
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    processes = []
    outputs = {}
    try:
        for index in range(workers):
            tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
            processes.append(start_scenario(args, {"TF_CONFIG": tf_config}, script))
        deadline = time.monotonic() + SCENARIO_TIMEOUT_S
        for index, process in enumerate(processes):
            try:
                outputs[index] = process.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                for p in processes:
                    stop(p)
                # After a kill, communicate() returns everything each one wrote.
                stderr = "\n".join(
                    f"--- worker {i}:\n{(outputs[i] if i in outputs else p.communicate(timeout=30))[1][-3000:]}"
                    for i, p in enumerate(processes)
                )
                pytest.fail(f"workers did not finish within {SCENARIO_TIMEOUT_S}s on {cluster}\n{stderr}")
    finally:
        for process in processes:
            stop(process)
    return [parse_result(processes[i], *outputs[i]) for i in range(workers)]
