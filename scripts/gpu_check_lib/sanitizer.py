"""compute-sanitizer: the check re-runs itself with --small under each tool
(memcheck, racecheck, ...), within the time budget; --cpu-only exercises the
re-invocation without a sanitizer."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

from gpu_check_lib.common import EXIT_OK, log

# The folder that holds this package: on PYTHONPATH, `python -m gpu_check_lib` runs its __main__.
SCRIPTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SANITIZER_ERROR_EXIT = 86
SMALL_MARKER = "gpu_check --small:"
SANITIZER_CAP_S = {"memcheck": 150, "racecheck": 100, "initcheck": 100, "synccheck": 100}


def find_compute_sanitizer() -> str | None:
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
    roots.append("/usr/local/cuda")  # the toolkit's default install location
    for root in filter(None, roots):
        for relative in ("bin/compute-sanitizer", "compute-sanitizer/compute-sanitizer"):
            candidate = os.path.join(root, relative)
            if os.access(candidate, os.X_OK):
                return candidate
    return None


def summary_lines(output: str) -> list[str]:
    keys = ("ERROR SUMMARY", "RACECHECK SUMMARY", "Device not supported", "not supported")
    return [line.strip() for line in output.splitlines() if any(k in line for k in keys)][-3:]


def run_sanitizers(args, tools: list[str], deadline: float) -> list[dict]:
    """Runs this check's --small mode under each tool. Status: clean, errors
    (the tool found some: a failure), failed (the checks failed under the
    tool: a failure), timeout / unavailable / skipped (no verdict)."""
    child = [sys.executable, "-m", "gpu_check_lib", "--small", "--build-dir", args.build_dir]
    if args.cpu_only:
        child.append("--cpu-only")
    if args.no_ml_dtypes:
        child.append("--no-ml-dtypes")
    exe = None if args.cpu_only else find_compute_sanitizer()
    results = []
    for tool in tools:
        remaining = deadline - time.time()
        if remaining < 30:
            results.append({"tool": tool, "status": "skipped", "reason": f"time budget ({remaining:.0f} s left)"})
            log(f"sanitizer {tool}: skipped, {remaining:.0f} s left in the time budget")
            continue
        if args.cpu_only:
            # No GPU: exercise the re-invocation itself, without a sanitizer.
            command = child
        elif exe is None:
            results.append({"tool": tool, "status": "unavailable", "reason": "compute-sanitizer not found"})
            log(f"sanitizer {tool}: compute-sanitizer not found (PATH, CUDA_HOME, nvcc's toolkit)")
            continue
        else:
            command = [
                exe,
                "--tool",
                tool,
                "--error-exitcode",
                str(SANITIZER_ERROR_EXIT),
                # CuPy's own probing calls may return benign API errors; a
                # failed launch of ours raises in the module and fails the run.
                "--report-api-errors",
                "no",
                "--print-limit",
                "20",
                *child,
            ]
        timeout = min(SANITIZER_CAP_S.get(tool, 100), remaining - 10)
        log(f"sanitizer {tool}: {' '.join(command)}  (timeout {timeout:.0f} s)")
        start = time.time()
        try:
            done = subprocess.run(
                command,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=timeout,
                env={
                    **os.environ,
                    "PYTHONUNBUFFERED": "1",
                    "PYTHONPATH": _with_scripts_dir(os.environ.get("PYTHONPATH")),
                },
            )
            output, rc = done.stdout, done.returncode
        except subprocess.TimeoutExpired as error:
            out = error.stdout or ""
            output, rc = (out.decode(errors="replace") if isinstance(out, bytes) else out), None
        seconds = time.time() - start
        if rc is None:
            status = "timeout"
        elif rc == SANITIZER_ERROR_EXIT:
            status = "errors"
        elif f"{SMALL_MARKER} FAILED" in output:
            status = "failed"
        elif rc == EXIT_OK and f"{SMALL_MARKER} ok" in output:
            status = "clean" if not args.cpu_only else "ran-without-sanitizer"
        else:
            status = "unavailable"  # the tool or the device refused, or the program died: no verdict
        result = {
            "tool": tool,
            "status": status,
            "returncode": rc,
            "seconds": round(seconds, 1),
            "summary": summary_lines(output),
            "output_tail": output[-4000:],
        }
        results.append(result)
        if os.environ.get("OUT") and not args.cpu_only:
            with open(os.path.join(os.environ["OUT"], f"sanitizer_{tool}.log"), "w") as f:
                f.write(output)
        log(f"sanitizer {tool}: {status} (rc {rc}, {seconds:.1f} s) {' | '.join(result['summary'])}")
        if status not in ("clean", "ran-without-sanitizer"):
            log("  ... " + "\n  ... ".join(output.strip().splitlines()[-15:]))
    return results


def sanitizer_verdict(results: list[dict]) -> str:
    statuses = {r["status"] for r in results}
    if statuses & {"errors", "failed"}:
        return "ERRORS (see above)"
    if not results:
        return "not run"
    if statuses <= {"clean"}:
        return "no errors"
    return "no verdict from " + ", ".join(f"{r['tool']} ({r['status']})" for r in results if r["status"] != "clean")


def _with_scripts_dir(pythonpath: str | None) -> str:
    """PYTHONPATH with this package's folder first (the child imports `gpu_check_lib`)."""
    return os.pathsep.join([SCRIPTS_DIR, *([pythonpath] if pythonpath else [])])
