"""Bytes the backward allocates, from TensorFlow's per-node allocation records.

The records come from a traced Session run (`RunOptions.FULL_TRACE`), which
starts TensorFlow's profiler for that one run. The profiler logs from C++
(`profiler_session.cc` start/stop lines, `xplane_to_step_stats.cc: GPU trace
was not collected.` on a CPU machine), past Python's logging and past
`TF_CPP_MIN_LOG_LEVEL` once TensorFlow is loaded. So the traced run writes
its stderr (file descriptor 2) into a temporary file, which `verbose=True`
copies back to stderr afterwards; nothing else of the process is affected.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator

import numpy as np
import tensorflow as tf

from grad_reverse.bench.cases import LAYERS


@contextlib.contextmanager
def native_stderr_captured(verbose: bool = False) -> Iterator[None]:
    """Sends what C++ code writes to stderr inside the block to a temporary
    file; replays it on stderr afterwards when `verbose`, or when the block
    raised (its log lines may say why)."""
    sys.stderr.flush()
    with tempfile.TemporaryFile() as captured:
        saved = os.dup(2)
        failed = True
        try:
            os.dup2(captured.fileno(), 2)
            yield
            failed = False
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            if verbose or failed:
                captured.seek(0)
                sys.stderr.write(captured.read().decode(errors="replace"))
                sys.stderr.flush()


def backward_allocations(impl: str, size: int, dtype: tf.DType = tf.float32, verbose: bool = False) -> int:
    """Bytes that the backward's own nodes allocate for one step. `dy` is a
    temporary made in the graph (x + 1), so an in-place backward needs none."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(dtype, [size])
        y = LAYERS[impl](x, 0.5)
        with tf.name_scope("make_dy"):
            dy = x + tf.constant(1, dtype)
        (dx,) = tf.compat.v1.gradients(y, x, grad_ys=dy, name="backward")
        total = tf.reduce_sum(tf.cast(dx, tf.float32))
    options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    metadata = tf.compat.v1.RunMetadata()
    with tf.compat.v1.Session(graph=graph) as session, native_stderr_captured(verbose):
        session.run(total, {x: np.ones(size, dtype.as_numpy_dtype)}, options=options, run_metadata=metadata)
    return sum(
        memory.total_bytes
        for device in metadata.step_stats.dev_stats
        for node in device.node_stats
        if node.node_name.startswith("backward")
        for memory in node.memory
    )
