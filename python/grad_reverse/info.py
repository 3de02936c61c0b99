"""What `python -m grad_reverse info` reports: versions, library, kernels.

TensorFlow and the op library are imported when the report is made, not when
this module is (so `info --help` needs neither)."""

from __future__ import annotations

from typing import Any


def collect() -> dict[str, Any]:
    import tensorflow as tf

    import grad_reverse
    from grad_reverse import ops
    from grad_reverse._native import calls
    from grad_reverse._native import choice as library_choice
    from grad_reverse._native.settings import AUTO, BACKWARD_VARIABLE, STABLE
    from grad_reverse._native.xla_fallback import kernel_devices

    build = grad_reverse.BUILD_INFO
    tf.zeros([])  # creates the devices, which registers the XLA kernels
    gpus = [d.name for d in tf.config.list_physical_devices("GPU")]
    backward = ops.BACKWARD  # decided at import, from the GPUs visible then
    choice = library_choice.chosen()
    stable = choice.kind == STABLE
    oldest = library_choice.OLDEST
    return {
        "grad_reverse": grad_reverse.__version__,
        "tensorflow_built_against": (
            _stable_built_against(build, oldest) if stable else build.get("tensorflow_version")
        ),
        "tensorflow_running": tf.__version__,
        "library": str(ops.LIBRARY.path),
        "library_kind": (
            "stable-ABI (TensorFlow's C API, one build for every release)"
            if stable
            else f"C++ (TensorFlow {library_choice.series(str(build.get('tensorflow_version')))}'s ABI)"
        ),
        "library_chosen_because": choice.reason,
        # A source build holds one; the portable wheel one per supported release.
        "libraries_for_tensorflow": ", ".join(
            library_choice.releases_held() + (["any (stable-ABI)"] if library_choice.has_stable() else [])
        ),
        "cuda_kernels_compiled": _compiled(build, "cuda"),
        # Which GPUs the CUDA kernels can run on (auto uses stock ops elsewhere).
        "cuda_architectures": build.get("cuda_architectures") or "none",
        "xla_kernels_compiled": _compiled(build, "xla"),
        "tensorflow_cuda_version": build.get("tensorflow_cuda_version") or "none (CPU build)",
        "cpu_path": _cpu_path(),
        "streaming_stores": calls.streaming_stores(ops.LIBRARY.cdll),
        "gpus_visible": gpus,
        "kernels": {op: sorted(kernel_devices(op)) for op in ("GradReverse", "GradReverseGrad")},
        # A mode set by hand is named in the reason already.
        "backward": backward.summary + (f" ({BACKWARD_VARIABLE}=auto)" if backward.mode == AUTO else ""),
        **({"warning": backward.warning} if backward.warning else {}),
    }


def _stable_built_against(build: dict[str, Any], oldest: str) -> str:
    """What the stable library loads into: the portable wheel's, built against
    the oldest release, any from that one on; a source build's, built against
    the running release, that release and newer ones."""
    headers = build.get("tensorflow_version")
    if build.get("built_for") == "source build":
        return f"{headers} and newer (a source build: against the running release's TensorFlow C API)"
    return f"any from {build.get('oldest_tensorflow') or oldest} on (TensorFlow's C API; headers of {headers})"


def _cpu_path() -> str:
    """The CPU backward's vector path (GRAD_REVERSE_CPU_PATH, or the fastest this CPU has)."""
    try:
        from grad_reverse import _kernels
    except ImportError:  # built without the pybind11 module
        return "unknown (no kernel module)"
    try:
        return f"{_kernels.cpu_path()} (available: {', '.join(_kernels.cpu_paths())})"
    except ValueError as error:  # a bad GRAD_REVERSE_CPU_PATH
        return f"error: {error}"


def _compiled(build: dict[str, Any], feature: str) -> str:
    """yes / no, with the build's reason when a feature was left out or has a caveat."""
    note = build.get(f"{feature}_note")
    answer = "yes" if build.get(feature) else "no"
    return f"{answer} ({note})" if note else answer


# What a line means, in plain words, printed under it (keys whose name is jargon).
PLAIN_WORDS = {
    "streaming_stores": "how the CPU backward writes a gradient of 16 MiB or more: streaming stores bypass "
    "the CPU cache, faster on some machines and sizes, slower on others, hence measured; results are the same",
}


def print_info() -> None:
    for key, value in collect().items():
        if isinstance(value, dict):
            for op, devices in value.items():
                print(f"{'kernels ' + op:28s} {', '.join(devices)}")
        else:
            print(f"{key:28s} {value}")
            if key in PLAIN_WORDS:
                print(f"{'':28s} ({PLAIN_WORDS[key]})")


def _run(args: Any) -> int:
    print_info()
    return 0


def add_cli(subparsers: Any) -> None:
    """Registers the `info` subcommand on the `python -m grad_reverse` parser."""
    parser = subparsers.add_parser(
        "info",
        help="versions, library path, compiled-in kernels",
        description="Shows the grad-reverse and TensorFlow versions, the op library's path, "
        "what was compiled in (CUDA, XLA), the devices that have kernels for the ops, and which "
        "backward the gradient uses (GRAD_REVERSE_BACKWARD) and why.",
    )
    parser.set_defaults(run=_run)
