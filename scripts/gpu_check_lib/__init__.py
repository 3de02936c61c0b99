"""Device check of the CUDA GradReverseGrad kernel (out = -lambda * in), without TensorFlow.

Meant for a bare GPU machine that has CuPy but no TensorFlow:
it imports the pybind11 kernel module as the top-level `_kernels` from a CMake
build directory (scripts/gpu_check.sh builds it; the `grad_reverse` package
cannot be imported there because it imports TensorFlow), and

1. checks correctness for float16, bfloat16, float32 and float64 at sizes
   0, 1, 3, 4097 and 2^24+3: out of place with aligned pointers, with both
   pointers starting at element 1 (vectorized path with a scalar head), with
   only one of them misaligned (scalar path), in place (aligned and at element
   1), and on a non-default stream. Every result is compared bitwise (any NaN
   matches any NaN) with the CPU kernel `_kernels.neg_scale_cpu`, which is in
   turn compared with an independent numpy computation; sentinels around every
   output catch writes past either end, and inputs are checked unchanged;
2. re-runs itself with --small under `compute-sanitizer` (memcheck, then
   racecheck while the time budget allows);
3. measures the kernel's bandwidth (out of place and in place) against a
   device-to-device cudaMemcpyAsync of the same bytes, at 256 MiB and 1 GiB,
   timing with CUDA events over interleaved repetitions (median), and counting
   bytes read plus bytes written (2 x size) for both;

then prints a table and writes JSON to $OUT/gpu_check.json when OUT is set
(or to --json). Exit status: 0 when everything is correct, 1 on any
correctness failure (sanitizer errors included), 2 when the check could not
run (no GPU, module built without CUDA, ...). The bandwidth target (kernel
>= 0.90 x copy at >= 256 MiB for float32 and float16) is reported, not
enforced: timings on a shared machine are evidence, not a pass/fail gate.

--cpu-only runs every CPU-side part on the host, with the CPU kernel standing
in for the device and time.perf_counter for CUDA events: argument parsing,
references, the case and guard logic, the --small re-invocation (without a
sanitizer), the bandwidth table and the JSON.

Run it as `python scripts/gpu_check_lib --build-dir DIR [options]` (what
scripts/gpu_check.sh does after building the module), or `python -m
gpu_check_lib` with scripts/ on PYTHONPATH. Modules, in the order a run uses them:
`cli` (options, the module's import, the run), `values` (test values, numpy
references, the CPU-kernel oracle, bitwise comparison), `backends` (CUDA and
host), `correctness`, `bandwidth`, `sanitizer` (the --small re-run under
compute-sanitizer), `report` (tables, JSON), `common` (exit statuses, log).
"""
