"""The command line: options, the kernel module's import from a build
directory, and the run in order (correctness, bandwidth, sanitizers, report)."""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import os
import sys
import time

import numpy as np

from gpu_check_lib.backends import CudaBackend, HostBackend
from gpu_check_lib.bandwidth import parse_bytes, run_bandwidth, target_verdict
from gpu_check_lib.common import EXIT_FAILED, EXIT_OK, EXIT_SETUP, SetupError, log
from gpu_check_lib.correctness import LAMBDAS, SIZES, SMALL_LAMBDAS, SMALL_SIZES, run_correctness
from gpu_check_lib.report import print_report, write_json
from gpu_check_lib.sanitizer import SMALL_MARKER, run_sanitizers
from gpu_check_lib.values import DTYPES, ml_dtypes


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Correctness, compute-sanitizer and bandwidth check of the CUDA GradReverseGrad kernel "
        "through the pybind11 module `_kernels`, without TensorFlow."
    )
    parser.add_argument(
        "--build-dir",
        required=True,
        help="CMake build directory holding the _kernels module (see scripts/gpu_check.sh)",
    )
    parser.add_argument(
        "--cpu-only",
        action="store_true",
        help="no GPU: run every CPU-side part with the CPU kernel standing in for the device",
    )
    parser.add_argument(
        "--small", action="store_true", help="small correctness cases only (what runs under compute-sanitizer)"
    )
    parser.add_argument(
        "--no-ml-dtypes",
        action="store_true",
        help="behave as if ml_dtypes were absent (bfloat16 checked against numpy bit arithmetic)",
    )
    parser.add_argument(
        "--sizes",
        type=lambda s: [int(v) for v in s.split(",") if v],
        default=None,
        help="correctness sizes in elements (default: 0,1,3,4097,16777219; --small: 0,1,3,4097)",
    )
    parser.add_argument(
        "--bandwidth-sizes",
        type=lambda s: [parse_bytes(v) for v in s.split(",") if v],
        default=None,
        help="buffer sizes in bytes, e.g. 256M,1G (default; --cpu-only: 1M,8M)",
    )
    parser.add_argument(
        "--bandwidth-dtypes",
        type=lambda s: [v for v in s.split(",") if v],
        default=["float32", "float16", "bfloat16", "float64"],
        help="dtypes to time, in order (default float32,float16,bfloat16,float64; later ones are "
        "dropped if the time budget runs short)",
    )
    parser.add_argument("--reps", type=int, default=None, help="timed repetitions per op (default 30; --cpu-only 5)")
    parser.add_argument(
        "--inner", type=int, default=None, help="launches per timed repetition (default 5; --cpu-only 1)"
    )
    parser.add_argument(
        "--sanitizers",
        default="memcheck,racecheck",
        help="compute-sanitizer tools to run on the small case, in order; empty for none",
    )
    parser.add_argument(
        "--time-budget",
        type=float,
        default=240.0,
        help="seconds for the whole check, counted from GPU_CHECK_T0 (set by gpu_check.sh) when "
        "given; optional steps are skipped to stay inside it",
    )
    parser.add_argument(
        "--json", default=None, help="where to write the JSON (default: $OUT/gpu_check.json when OUT is set)"
    )
    args = parser.parse_args(argv)
    for name in args.bandwidth_dtypes:
        if name not in DTYPES:
            parser.error(f"unknown dtype {name!r} in --bandwidth-dtypes; accepted: {', '.join(DTYPES)}")
    if args.sizes is None:
        args.sizes = list(SMALL_SIZES if args.small else SIZES)
    if args.bandwidth_sizes is None:
        args.bandwidth_sizes = [1 << 20, 8 << 20] if args.cpu_only else [256 << 20, 1 << 30]
    if args.reps is None:
        args.reps = 5 if args.cpu_only else 30
    if args.inner is None:
        args.inner = 1 if args.cpu_only else 5
    if args.reps < 1 or args.inner < 1:
        parser.error("--reps and --inner must be at least 1")
    return args


def import_kernels(build_dir: str):
    """The module `_kernels` of `build_dir` (and no other: the folder alone is searched)."""
    build_dir = os.path.abspath(build_dir)
    try:
        spec = importlib.machinery.PathFinder.find_spec("_kernels", [build_dir])
        if spec is None or spec.loader is None:
            raise ImportError(f"no module named '_kernels' in {build_dir}")
        _kernels = importlib.util.module_from_spec(spec)
        sys.modules["_kernels"] = _kernels
        spec.loader.exec_module(_kernels)
    except ImportError as error:
        raise SetupError(
            f"cannot import the kernel module `_kernels` from {build_dir}: {error} "
            "(build it with scripts/gpu_check.sh, or cmake -DGRAD_REVERSE_KERNELS_ONLY=ON)"
        ) from error
    where = os.path.abspath(_kernels.__file__)
    if os.path.dirname(where) != build_dir:
        raise SetupError(f"imported `_kernels` from {where}, not from the build directory {build_dir}")
    return _kernels


def main(argv=None) -> int:
    args = parse_args(argv)
    started = float(os.environ.get("GPU_CHECK_T0", time.time()))
    deadline = started + args.time_budget
    use_ml_dtypes = not args.no_ml_dtypes
    report: dict = {
        "mode": "cpu-only" if args.cpu_only else "cuda",
        "small": args.small,
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "ml_dtypes": (ml_dtypes.__version__ if ml_dtypes is not None and use_ml_dtypes else None),
    }
    try:
        kernels = import_kernels(args.build_dir)
        report["kernels_module"] = kernels.__file__
        report["cuda_compiled_in"] = bool(kernels.cuda_compiled_in())
        backend = (
            HostBackend(kernels, use_ml_dtypes) if args.cpu_only else CudaBackend(kernels, exact_allocations=args.small)
        )
        report["device"] = backend.info()
    except SetupError as error:
        log(f"gpu_check: cannot run: {error}")
        return EXIT_SETUP
    log(
        f"gpu_check: {report['device']['name']}; module {report['kernels_module']}; "
        f"bfloat16 oracle: {'CPU kernel via ml_dtypes' if report['ml_dtypes'] else 'numpy bit arithmetic'}"
    )

    lambdas = SMALL_LAMBDAS if args.small else LAMBDAS
    records: list[dict] = []
    try:
        run_correctness(backend, kernels, args.sizes, lambdas, use_ml_dtypes, records)
    except Exception as error:  # a launch error is a finding, not a setup problem
        log(f"gpu_check: correctness run raised {type(error).__name__}: {error}")
        records.append(
            {
                "dtype": "-",
                "n": 0,
                "lambda": None,
                "case": "exception",
                "ok": False,
                "mismatches": -1,
                "guards_ok": False,
                "error": f"{type(error).__name__}: {error}",
            }
        )
    failures = [r for r in records if not r["ok"]]
    correct = not failures
    if args.small:
        # The parent reads this marker: an exit status alone cannot tell
        # failed checks from a sanitizer that could not run the program.
        log(f"{SMALL_MARKER} {'ok' if correct else 'FAILED'} ({len(records) - len(failures)}/{len(records)} checks ok)")
        return EXIT_OK if correct else EXIT_FAILED

    bandwidth: list[dict] = []
    bandwidth_error = None
    try:
        bandwidth = run_bandwidth(
            backend, args.bandwidth_dtypes, args.bandwidth_sizes, args.reps, args.inner, deadline, bandwidth
        )
    except Exception as error:  # e.g. a CUDA context broken by a failed check: still report the rest
        bandwidth_error = f"{type(error).__name__}: {error}"
        log(f"gpu_check: bandwidth measurement raised {bandwidth_error}")
    tools = [t for t in args.sanitizers.split(",") if t]
    sanitizers = run_sanitizers(args, tools, deadline)
    sanitizer_failed = [s for s in sanitizers if s["status"] in ("errors", "failed")]
    verdict = target_verdict(bandwidth)

    report.update(
        {
            "ok": correct and not sanitizer_failed,
            "correctness": {
                "checks": len(records),
                "failed": len(failures),
                "failures": failures[:50],
                "records": records,
            },
            "sanitizer": sanitizers,
            "bandwidth": bandwidth,
            "bandwidth_error": bandwidth_error,
            "target": verdict,
            "elapsed_s": round(time.time() - started, 1),
        }
    )
    json_path = args.json or (os.path.join(os.environ["OUT"], "gpu_check.json") if os.environ.get("OUT") else None)
    if json_path:
        write_json(report, json_path)
    print_report(report, args.reps, args.inner, json_path)
    return EXIT_OK if report["ok"] else EXIT_FAILED
