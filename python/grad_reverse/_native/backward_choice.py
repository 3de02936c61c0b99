"""Which backward GradReverse's registered gradient builds, decided at import (and again by `options.set_backward`).

Two implementations of the same function, `dx = -lambda * dy`:

* `native`: the library's GradReverseGrad op (CPU kernel, CUDA kernel when
  the library was built with CUDA, XLA kernel);
* `stock`: stock TensorFlow ops (`dy * -lambda`; float16 and bfloat16 through
  float32, rounded once), which TensorFlow has kernels for on every device,
  rounding as the kernels do (bit for bit on the CPU, tested; one known
  exception, a constant lambda of -1, and unverified on a GPU: docs/gpu.md).

The gradient is built when a graph is traced (or an eager op is taped),
before TensorFlow places the ops, so one choice holds for every device of
the process. `settings.backward_mode()` (`GRAD_REVERSE_BACKWARD`, or
`options.set_backward`: auto, native, stock; default auto) chooses; `auto`
picks the native kernel unless TensorFlow sees a GPU on
which the library's CUDA kernel cannot run (no CUDA kernels built, a
driver older than the CUDA the kernels were built with, or a GPU whose
compute capability none of the built architectures covers), where the
native op would run on the CPU (a copy of every gradient to the host and
back) or fail at its first launch. `decide` is a pure function of the
variable, the build record, the visible GPUs, their compute capabilities and
the driver's CUDA version, so all can be injected in tests; `choose_backward`
gathers them from the process.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import tensorflow as tf

from grad_reverse._native import gpu_facts, settings
from grad_reverse._native.settings import BACKWARD_VARIABLE, NATIVE, STOCK
from grad_reverse._native.user_warning import warn_at_user

Capability = tuple[int, int]

_STOCK_DESCRIPTION = "stock TensorFlow ops (dy * -lambda) on every device"
_SILENCE = f"Set {BACKWARD_VARIABLE}={STOCK} to choose stock ops explicitly (and silence this warning)."


@dataclass(frozen=True)
class Backward:
    """The choice: `kernel` is NATIVE or STOCK; `reason` says why (for
    `python -m grad_reverse info`); `warning` is what to tell the user at
    import, or None when there is nothing to fix."""

    mode: str
    kernel: str
    reason: str
    warning: str | None = None

    @property
    def summary(self) -> str:
        what = "native GradReverseGrad kernel" if self.kernel == NATIVE else _STOCK_DESCRIPTION
        return f"{what}: {self.reason}"


def needs_driver_version(mode: str, build_info: Mapping[str, Any], gpus: Sequence[str]) -> bool:
    """Whether `decide` will look at the driver's CUDA version (so `choose_backward`
    asks the driver only then)."""
    return mode != STOCK and bool(gpus) and bool(build_info.get("cuda"))


def decide(
    value: str | None,
    build_info: Mapping[str, Any],
    gpus: Sequence[str],
    driver_cuda_version: int | None,
    capabilities: Mapping[str, Capability | None] | None = None,
) -> Backward:
    """The backward for this process.

    Args:
      value: GRAD_REVERSE_BACKWARD as read from the environment (None if unset).
      build_info: the library's build record (`cuda`, `cuda_toolkit_version`,
        `cuda_note`, `tensorflow_cuda_version`).
      gpus: the GPUs TensorFlow sees.
      driver_cuda_version: the driver's CUDA version (12040 is 12.4), 0 for
        no driver, None or negative when unknown; only read when
        `needs_driver_version` says so.
      capabilities: each GPU's compute capability ((8, 6) for 8.6), keyed by
        its name in `gpus`; a GPU missing or mapped to None is unknown. Read
        when `driver_cuda_version` is.
    Raises:
      ValueError: `value` is not one of settings.BACKWARD_MODES.
    """
    mode = settings.parse_backward_mode(value)
    if mode == STOCK:
        return Backward(mode, STOCK, f"chosen by {BACKWARD_VARIABLE}={STOCK}")
    if not gpus:
        chosen = f"chosen by {BACKWARD_VARIABLE}={NATIVE}" if mode == NATIVE else "no GPU visible"
        return Backward(mode, NATIVE, chosen)
    devices = f"TensorFlow sees {len(gpus)} GPU(s) ({', '.join(gpus)})"
    problem, fix = _gpu_kernel_problem(build_info, driver_cuda_version)
    if problem is None:
        problem, fix = _architecture_problem(build_info, gpus, capabilities or {})
    if mode == NATIVE:
        reason = f"chosen by {BACKWARD_VARIABLE}={NATIVE}"
        if problem is None:
            return Backward(mode, NATIVE, f"{reason}; {_cuda_versions(build_info, driver_cuda_version)}")
        consequence = (
            "GradReverseGrad on a GPU would fail at its first launch"
            if build_info.get("cuda")
            else "GradReverseGrad runs on the CPU, copying each gradient from the GPU and back, unless XLA compiles it"
        )
        return Backward(
            mode,
            NATIVE,
            f"{reason}, although {problem}",
            (
                f"grad_reverse: {devices} and {BACKWARD_VARIABLE}={NATIVE} forces the native backward, but "
                f"{problem}: {consequence}. Unset {BACKWARD_VARIABLE} (auto uses stock TensorFlow ops on the GPU "
                f"then, with the same results), or: {fix}"
            ),
        )
    if problem is None:
        return Backward(
            mode, NATIVE, f"native CUDA kernel on the GPU; {_cuda_versions(build_info, driver_cuda_version)}"
        )
    return Backward(
        mode,
        STOCK,
        problem,
        (
            f"grad_reverse: {devices}, but {problem}. GradReverse's gradient therefore uses "
            f"{_STOCK_DESCRIPTION}, which run on the GPU and are meant to round as the kernel does "
            f"(bit for bit on the CPU but for one case; unverified on a GPU: see docs/gpu.md). "
            f"For the native kernel: {fix} {_SILENCE}"
        ),
    )


def _gpu_kernel_problem(build_info: Mapping[str, Any], driver: int | None) -> tuple[str | None, str]:
    """(why the library's CUDA kernel cannot run here, or None; how to fix it)."""
    tf_cuda = build_info.get("tensorflow_cuda_version") or ""
    tf_cuda = "" if tf_cuda == "unknown" else tf_cuda  # a TensorFlow that does not say (2.22)
    toolkit_hint = (
        f"a CUDA {tf_cuda} toolkit (the CUDA this TensorFlow was built with)" if tf_cuda else "a CUDA toolkit"
    )
    rebuild = (
        f"install {toolkit_hint} with nvcc on PATH and rebuild: "
        "`pip install --force-reinstall --no-deps .` from the grad-reverse source tree."
    )
    if not build_info.get("cuda"):
        why = build_info.get("cuda_note") or "it was built without them"
        if build_info.get("abi") == "stable":
            return f"the grad_reverse library has no CUDA kernels ({why})", (
                "run a TensorFlow release this installation holds a C++ library for "
                "(`python -m grad_reverse info` lists them)."
            )
        return f"the grad_reverse library has no CUDA kernels ({why})", rebuild
    library = build_info.get("cuda_toolkit_version") or ""
    library_major = gpu_facts.major_version(library)
    if driver is None or driver < 0 or library_major is None:
        what = (
            "the driver's CUDA version" if library_major is not None else "the CUDA version the library was built with"
        )
        return (
            f"grad_reverse could not determine {what}, so its CUDA kernels may not run here",
            f"check the NVIDIA driver installation, or {rebuild}",
        )
    if driver == 0 or driver // 1000 < library_major:
        found = (
            "no NVIDIA driver was found"
            if driver == 0
            else (f"the NVIDIA driver supports CUDA {gpu_facts.format_cuda_version(driver)}")
        )
        return (
            f"the library's CUDA kernels were built with CUDA {library} and need a driver for "
            f"CUDA {library_major}, and {found} (driver CUDA {gpu_facts.format_cuda_version(driver)} "
            f"< library CUDA {library_major})",
            f"update the NVIDIA driver to one that supports CUDA {library_major}, or {rebuild}",
        )
    return None, ""


def _architecture_problem(
    build_info: Mapping[str, Any],
    gpus: Sequence[str],
    capabilities: Mapping[str, Capability | None],
) -> tuple[str | None, str]:
    """(why some visible GPU has no code in the library's fatbin, or None; the fix)."""
    recorded = build_info.get("cuda_architectures")
    rebuild = (
        "rebuild for it: `pip install --force-reinstall --no-deps . "
        '-C "cmake.define.CMAKE_CUDA_ARCHITECTURES=..."` from the grad-reverse source tree '
        "(with a CUDA toolkit that supports that architecture)"
    )
    if not isinstance(recorded, str) or not recorded.strip():
        return (
            "the library's build record does not list the CUDA architectures it was built for "
            "(an older build), so its CUDA kernels may not run on this GPU",
            "rebuild: `pip install --force-reinstall --no-deps .` from the grad-reverse source tree.",
        )
    architectures = [entry for entry in recorded.split(";") if entry.strip()]
    for gpu in gpus:
        capability = capabilities.get(gpu)
        if capability is None:
            return (
                f"grad_reverse could not read the compute capability of {gpu}, so its CUDA kernels "
                f"(built for {recorded}) may not run there",
                "check the NVIDIA driver installation, or set GRAD_REVERSE_BACKWARD=native to try them.",
            )
        try:
            runnable = gpu_facts.runs_on(architectures, capability)
        except ValueError as error:
            return f"grad_reverse cannot read the CUDA architectures it was built for ({error})", rebuild + "."
        if not runnable:
            found = f"{capability[0]}.{capability[1]}"
            return (
                f"{gpu} has compute capability {found}, which the library's CUDA kernels "
                f"(built for CUDA architectures {recorded}) do not cover",
                f"{rebuild.replace('=...', f'={capability[0]}{capability[1]}-real;{recorded}')}.",
            )
    return None, ""


def _cuda_versions(build_info: Mapping[str, Any], driver: int | None) -> str:
    return f"driver CUDA {gpu_facts.format_cuda_version(driver)}, library CUDA {build_info.get('cuda_toolkit_version')}"


def choose_backward(
    build_info: Mapping[str, Any],
    driver_cuda_version: Callable[[], int],
    visible_gpus: Callable[[], list[str]] = gpu_facts.visible_gpus,
    environ: Mapping[str, str] = os.environ,
    compute_capability: Callable[[str], Capability | None] = gpu_facts.compute_capability,
) -> Backward:
    """Reads the mode (`settings.backward_mode`: set in process, else the
    variable in `environ`), lists the GPUs (only when the choice depends on
    them) and asks the driver and each GPU's compute capability (only when
    `needs_driver_version`); warns (RuntimeWarning) when there is something
    to fix."""
    value = settings.backward_mode(environ)
    mode = settings.parse_backward_mode(value)
    gpus = [] if mode == STOCK else visible_gpus()
    driver, capabilities = None, {}
    if needs_driver_version(mode, build_info, gpus):
        driver = driver_cuda_version()
        capabilities = {gpu: compute_capability(gpu) for gpu in gpus}
    backward = decide(value, build_info, gpus, driver, capabilities)
    if backward.warning:
        warn_at_user(backward.warning)
    return backward


def stock_reverse(dy: tf.Tensor, lambda_: tf.Tensor) -> tf.Tensor:
    """`-lambda_ * dy` from stock ops, rounded as the GradReverseGrad kernels round.

    float32: one multiply by the float32 `-lambda`; float64: by `-lambda`
    widened (exact); float16 and bfloat16: widened to float32 (exact),
    multiplied, rounded to nearest even once. Negating is exact, so this is
    the kernels' `-lambda * dy`. `lambda_` gets no gradient, as with the
    native op: a second-order gradient flows through `dy` only.
    """
    # tf.raw_ops: the generated wrappers' fast path, without the dispatch
    # layers of tf.math, which cost an eager call more (docs/benchmark.md).
    scale = tf.raw_ops.Neg(x=tf.raw_ops.StopGradient(input=lambda_))
    dtype = dy.dtype
    if dtype == tf.float32:
        return tf.raw_ops.Mul(x=dy, y=scale)
    if dtype == tf.float64:
        return tf.raw_ops.Mul(x=dy, y=tf.raw_ops.Cast(x=scale, DstT=tf.float64))
    wide = tf.raw_ops.Mul(x=tf.raw_ops.Cast(x=dy, DstT=tf.float32), y=scale)
    return tf.raw_ops.Cast(x=wide, DstT=dtype, Truncate=False)  # round to nearest even, once
