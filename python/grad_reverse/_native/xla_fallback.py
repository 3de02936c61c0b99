"""Whether the native op can be compiled by XLA here, and the fallback if not.

The library's XLA kernels exist when it was built with them (BUILD_INFO["xla"])
and TensorFlow registered them on its XLA_*_JIT devices, at device creation or
through the library's late registration (see cc/kernels/grad_reverse_xla.cc).
Otherwise, inside an XLA context, `grad_reverse` uses the pure-Python version
(which XLA compiles) and warns once; `options.set_xla_fallback("always")`
makes it use that version in every XLA context, without a warning.
"""

from __future__ import annotations

import warnings

import tensorflow as tf
from tensorflow.python.framework import kernels as _kernels  # private: no public equivalent
from tensorflow.python.ops import control_flow_util as _control_flow_util  # private

from grad_reverse._native import settings

_warned = False


def kernel_devices(op_type: str) -> set[str]:
    """Device types with a kernel registered for `op_type` (XLA ones included)."""
    return {k.device_type for k in _kernels.get_registered_kernels_for_op(op_type).kernel}


def in_xla_context() -> bool:
    """True while tracing a function that XLA must compile (jit_compile=True)."""
    if tf.executing_eagerly():
        return False
    return _control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())


def missing_xla_devices(build_info: dict) -> set[str]:
    """XLA JIT devices that compile stock ops but have no GradReverse kernel.

    Empty before TensorFlow registers its XLA kernels: ours are registered
    with them then."""
    jit_devices = {d for d in kernel_devices("Identity") if d.endswith("_JIT")}
    if not build_info.get("xla"):
        return jit_devices or {"XLA_CPU_JIT"}
    return jit_devices - kernel_devices("GradReverse")


def use_fallback(build_info: dict) -> bool:
    """Whether this call must use the pure-Python version (warning once)."""
    global _warned
    if not in_xla_context():
        return False
    if settings.xla_fallback() == settings.ALWAYS:
        return True
    missing = missing_xla_devices(build_info)
    if not missing:
        return False
    if not _warned:
        _warned = True
        if build_info.get("xla"):
            reason = "its XLA kernels could not be registered"
        else:
            why = build_info.get("xla_note") or "rebuild with TensorFlow's tf2xla headers"
            reason = f"the library was built without XLA kernels ({why})"
        warnings.warn(
            f"grad_reverse: no XLA kernel for GradReverse on {', '.join(sorted(missing))}: {reason}. "
            "Using the pure-Python version inside XLA-compiled functions; results are identical.",
            RuntimeWarning,
            stacklevel=3,
        )
    return True
