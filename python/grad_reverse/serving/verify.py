"""The proof that a rewritten SavedModel computes what the original did.

Every signature of the MetaGraph is run twice on the same inputs: SRC in this
process (which has the op library), DST in a child process that never imports
`grad_reverse` (so the op is not registered there; the child checks that).
Inputs come from each signature's TensorSpecs with a fixed seed, unknown
dimensions set to 2. Outputs must be equal bit for bit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tensorflow as tf

from grad_reverse.serving import held_stderr, signature_runner
from grad_reverse.serving.saved_model_dir import PathLike

UNKNOWN_DIMENSION = 2
SEED = 0
# A signature's verdicts. NOT_RUN: no inputs could be generated, or SRC itself
# fails on them, so nothing was compared; FAILED: one side ran, the other not.
EQUAL, DIFFERENT, NOT_RUN, FAILED = "equal", "different", "not run", "failed"


class SourceLoadError(RuntimeError):
    """SRC does not load in this process (with the op library): a bad SRC, not a bad copy."""


@dataclass
class SignatureResult:
    """One signature's comparison: `status` is EQUAL, DIFFERENT, NOT_RUN or FAILED."""

    key: str
    status: str
    detail: str
    tags: tuple = ()  # the MetaGraph's

    @property
    def ok(self) -> bool:
        """Proven: run on both sides, outputs bitwise equal."""
        return self.status == EQUAL


def make_inputs(signature_def, seed: int = SEED) -> dict:
    """Random inputs matching a SignatureDef's inputs; raises TypeError for ones it cannot make."""
    rng = np.random.default_rng(seed)
    inputs = {}
    for key in sorted(signature_def.inputs):
        info = signature_def.inputs[key]
        dtype = tf.as_dtype(info.dtype)
        shape = info.tensor_shape
        dims = (
            [UNKNOWN_DIMENSION]
            if shape.unknown_rank
            else [d.size if d.size >= 0 else UNKNOWN_DIMENSION for d in shape.dim]
        )
        if dtype.is_floating or dtype.is_complex:
            value = (rng.standard_normal(dims) * 4).astype(dtype.as_numpy_dtype)
        elif dtype.is_bool:
            value = rng.integers(0, 2, dims).astype(bool)
        elif dtype.is_integer:
            value = rng.integers(0, 4, dims).astype(dtype.as_numpy_dtype)
        else:
            raise TypeError(f"input '{key}' is {dtype.name}; only numbers and bools are generated")
        inputs[key] = value
    return inputs


def describe_inputs(inputs: dict) -> str:
    return ", ".join(f"{key} {tf.as_dtype(value.dtype).name}{list(value.shape)}" for key, value in inputs.items())


def verify(src: PathLike, dst: PathLike, meta_graph, tags: Sequence[str]) -> list[SignatureResult]:
    """Runs each signature of `meta_graph` on SRC here and on DST in a child; compares bitwise."""
    results: list[SignatureResult] = []
    inputs: dict[str, dict] = {}
    for key in sorted(meta_graph.signature_def):
        if key == "__saved_model_init_op":  # run at load time, not callable
            continue
        try:
            inputs[key] = make_inputs(meta_graph.signature_def[key])
        except TypeError as error:
            results.append(SignatureResult(key, NOT_RUN, str(error)))
    if inputs:
        results.extend(_compare_runs(src, dst, tags, inputs))
    for result in results:
        result.tags = tuple(tags)
    return sorted(results, key=lambda r: r.key)


def _compare_runs(src: PathLike, dst: PathLike, tags: Sequence[str], inputs: dict) -> list[SignatureResult]:
    with held_stderr.stderr_held_back() as held:
        try:
            expected = signature_runner.run_signatures(str(src), list(tags), inputs)
        except Exception as error:  # TensorFlow raises many types; the caller reports one line
            held.drop()  # TensorFlow's log lines and tracebacks about it: summarised by the message
            raise SourceLoadError(_last_line(str(error))) from None
    actual = _run_in_child(dst, tags, inputs)
    return [_compare(key, inputs[key], expected[key], actual[key]) for key in inputs]


def _run_in_child(path: PathLike, tags: Sequence[str], inputs: dict) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        inputs_file, outputs_file = Path(tmp) / "inputs.json", Path(tmp) / "outputs.json"
        inputs_file.write_text(json.dumps({key: signature_runner.encode(value) for key, value in inputs.items()}))
        code = Path(signature_runner.__file__).read_text()
        # cwd: a `python -c` child puts its working directory first on sys.path.
        result = subprocess.run(
            [
                sys.executable,
                "-c",
                code,
                str(Path(path).resolve()),
                ",".join(tags),
                str(inputs_file),
                str(outputs_file),
            ],
            capture_output=True,
            text=True,
            cwd=tmp,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2")),
        )
        if result.returncode != 0 or not outputs_file.is_file():
            raise RuntimeError(
                f"the process without the op library could not run {path} (exit {result.returncode}): "
                f"{_last_line(result.stderr)}"
            )
        encoded = json.loads(outputs_file.read_text())
    return {
        key: {"outputs": signature_runner.decode(value["outputs"])} if "outputs" in value else value
        for key, value in encoded.items()
    }


def _compare(key: str, inputs: dict, expected: dict, actual: dict) -> SignatureResult:
    fed = f"inputs {describe_inputs(inputs) or '(none)'}"
    if "error" in expected and "error" in actual:
        return SignatureResult(key, NOT_RUN, f"SRC fails on generated {fed} too: {expected['error']}")
    if "error" in expected or "error" in actual:
        which, error = ("SRC", expected["error"]) if "error" in expected else ("DST", actual["error"])
        return SignatureResult(key, FAILED, f"{which} fails on {fed}: {error}")
    want, got = expected["outputs"], actual["outputs"]
    if sorted(want) != sorted(got):
        return SignatureResult(key, DIFFERENT, f"outputs {sorted(got)}, expected {sorted(want)}")
    for name in sorted(want):
        difference = _difference(want[name], got[name])
        if difference:
            return SignatureResult(key, DIFFERENT, f"output '{name}': {difference}")
    return SignatureResult(key, EQUAL, f"{len(want)} output{'s' * (len(want) != 1)} bitwise equal on {fed}")


def _difference(expected: np.ndarray, actual: np.ndarray) -> str:
    """'' if bitwise equal, else what differs."""
    if expected.dtype != actual.dtype or expected.shape != actual.shape:
        return f"{actual.dtype}{list(actual.shape)}, expected {expected.dtype}{list(expected.shape)}"
    if expected.dtype == object:
        return "" if np.array_equal(expected, actual) else "values differ"
    if expected.tobytes() == actual.tobytes():
        return ""
    wide_e, wide_a = expected.astype(np.float64), actual.astype(np.float64)
    return f"not bitwise equal (max abs difference {np.nanmax(np.abs(wide_e - wide_a)):.3g})"


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"
