"""The choice of backward (GRAD_REVERSE_BACKWARD, python/grad_reverse/_native/backward_choice.py).

No GPU is needed: the decision is a pure function of the variable, the build
record, the visible GPUs and the driver's CUDA version, which the tests pass
in. The modes run, and the stock backward compared bit for bit with the
native kernel, are in test_backward_modes_and_stock.py.
"""

import os
import subprocess
import sys
import warnings

import pytest

import grad_reverse
from grad_reverse import ops
from grad_reverse._native import backward_choice, calls, gpu_facts
from grad_reverse._native.backward_choice import decide
from grad_reverse._native.xla_fallback import kernel_devices

GPUS = ["/physical_device:GPU:0"]
NO_NVCC = {
    "cuda": False,
    "cuda_note": "no CUDA toolkit (nvcc) found at build time",
    "tensorflow_cuda_version": "12.5.1",
    "cuda_toolkit_version": "",
}
CUDA_13 = {
    "cuda": True,
    "cuda_toolkit_version": "13.0.88",
    "tensorflow_cuda_version": "12.5.1",
    "cuda_architectures": "75-real;80-real;90",
}
CUDA_12 = {
    "cuda": True,
    "cuda_toolkit_version": "12.8.93",
    "tensorflow_cuda_version": "12.5.1",
    "cuda_architectures": "70-real;80-real;90",
}
AMPERE = {GPUS[0]: (8, 0)}


# ------------------------------------------------------------- decision ----


@pytest.mark.parametrize("value", [None, "", "auto", "native", "stock", "Native", " STOCK "])
def test_accepted_values_without_gpus(value):
    backward = decide(value, CUDA_13, [], None)
    mode = (value or "auto").strip().lower()
    assert backward.mode == mode and backward.warning is None
    assert backward.kernel == ("stock" if mode == "stock" else "native")


@pytest.mark.parametrize("value", ["fast", "cpu", "1", "gpu", "stock,native"])
def test_an_unknown_value_names_the_variable_and_the_accepted_values(value):
    with pytest.raises(ValueError) as error:
        decide(value, CUDA_13, GPUS, 13000)
    message = str(error.value)
    assert f"GRAD_REVERSE_BACKWARD={value!r}" in message
    assert "accepted values: auto (the default), native, stock" in message


def test_auto_uses_the_cuda_kernel_when_the_driver_has_the_library_cuda_major():
    for build, driver, versions in [
        (CUDA_13, 13000, "driver CUDA 13.0, library CUDA 13.0.88"),
        (CUDA_12, 12040, "driver CUDA 12.4, library CUDA 12.8.93"),
        (CUDA_12, 13010, "driver CUDA 13.1, library CUDA 12.8.93"),
    ]:
        backward = decide("auto", build, GPUS, driver, AMPERE)
        assert backward.kernel == "native" and backward.warning is None, backward
        assert backward.reason == f"native CUDA kernel on the GPU; {versions}"


def test_auto_uses_stock_ops_and_says_why_when_the_build_had_no_nvcc():
    backward = decide(None, NO_NVCC, GPUS, None)
    assert backward.kernel == "stock"
    assert (
        backward.reason == "the grad_reverse library has no CUDA kernels (no CUDA toolkit (nvcc) found at build time)"
    )
    warning = backward.warning
    assert warning.startswith(
        "grad_reverse: TensorFlow sees 1 GPU(s) (/physical_device:GPU:0), but the "
        "grad_reverse library has no CUDA kernels (no CUDA toolkit (nvcc) found at build time)"
    )
    assert "stock TensorFlow ops (dy * -lambda) on every device, which run on the GPU" in warning
    assert "install a CUDA 12.5.1 toolkit" in warning and "pip install --force-reinstall --no-deps ." in warning
    assert "Set GRAD_REVERSE_BACKWARD=stock to choose stock ops explicitly" in warning


def test_auto_uses_stock_ops_and_names_both_versions_when_the_driver_is_too_old():
    backward = decide("auto", CUDA_13, GPUS, 12040)
    assert backward.kernel == "stock"
    assert "driver CUDA 12.4 < library CUDA 13" in backward.reason
    assert "built with CUDA 13.0.88 and need a driver for CUDA 13" in backward.warning
    assert "the NVIDIA driver supports CUDA 12.4" in backward.warning
    assert "update the NVIDIA driver to one that supports CUDA 13" in backward.warning
    assert "CUDA 12.5.1 toolkit" in backward.warning  # the other fix: rebuild for TensorFlow's CUDA


@pytest.mark.parametrize(
    "driver, says",
    [
        (0, "no NVIDIA driver was found"),
        (-1, "could not determine the driver's CUDA version"),
        (None, "could not determine the driver's CUDA version"),
    ],
)
def test_auto_uses_stock_ops_when_the_driver_is_missing_or_unknown(driver, says):
    backward = decide("auto", CUDA_13, GPUS, driver)
    assert backward.kernel == "stock" and says in backward.warning


def test_auto_uses_stock_ops_when_the_build_record_lacks_the_toolkit_version():
    backward = decide("auto", dict(CUDA_13, cuda_toolkit_version=""), GPUS, 13000)
    assert backward.kernel == "stock" and "the CUDA version the library was built with" in backward.warning


def test_native_is_obeyed_but_warns_of_a_cpu_round_trip_or_a_failing_launch():
    no_kernels = decide("native", NO_NVCC, GPUS, None)
    assert no_kernels.kernel == "native"
    assert "GRAD_REVERSE_BACKWARD=native forces the native backward" in no_kernels.warning
    assert "copying each gradient from the GPU and back" in no_kernels.warning
    old_driver = decide("native", CUDA_13, GPUS, 12020)
    assert old_driver.kernel == "native" and "fail at its first launch" in old_driver.warning
    assert "driver CUDA 12.2 < library CUDA 13" in old_driver.warning
    fine = decide("native", CUDA_13, GPUS, 13000, AMPERE)
    assert fine.kernel == "native" and fine.warning is None
    assert fine.reason == "chosen by GRAD_REVERSE_BACKWARD=native; driver CUDA 13.0, library CUDA 13.0.88"


@pytest.mark.parametrize(
    "architectures, capability, runs",
    [
        ("75-real;80-real;90", (8, 6), True),  # sm_80 SASS runs on 8.6
        ("75-real;80-real;90", (7, 5), True),
        ("75-real;80-real;90", (9, 0), True),
        ("75-real;80-real;90", (12, 0), True),  # compute_90 PTX, compiled by the driver
        ("75-real;80-real;90", (6, 1), False),  # Pascal: no SASS of major 6, PTX 9.0 too new
        ("75-real;80-real;90", (7, 0), False),  # sm_75 SASS does not run on 7.0
        ("75-real;80-real", (9, 0), False),  # no SASS of major 9, no PTX
        ("75-real;80-real", (12, 0), False),
        ("70-real;80-real;90", (7, 2), True),
        ("90-virtual", (8, 9), False),  # PTX only runs on capabilities at least its own
        ("90-virtual", (10, 0), True),
        ("100-real", (10, 3), True),
    ],
)
def test_auto_uses_the_kernel_exactly_on_gpus_the_built_architectures_cover(architectures, capability, runs):
    build = dict(CUDA_13, cuda_architectures=architectures)
    assert gpu_facts.runs_on(architectures.split(";"), capability) is runs
    backward = decide("auto", build, GPUS, 13000, {GPUS[0]: capability})
    assert backward.kernel == ("native" if runs else "stock"), backward
    if runs:
        assert backward.warning is None
    else:
        found = f"{capability[0]}.{capability[1]}"
        assert backward.reason == (
            f"/physical_device:GPU:0 has compute capability {found}, which the library's "
            f"CUDA kernels (built for CUDA architectures {architectures}) do not cover"
        )
        wanted = f"{capability[0]}{capability[1]}-real;{architectures}"
        assert f'-C "cmake.define.CMAKE_CUDA_ARCHITECTURES={wanted}"' in backward.warning
        assert "with a CUDA toolkit that supports that architecture" in backward.warning
        native = decide("native", build, GPUS, 13000, {GPUS[0]: capability})
        assert native.kernel == "native" and "fail at its first launch" in native.warning
        assert f"compute capability {found}" in native.warning


def test_one_uncovered_gpu_among_several_makes_auto_use_stock_ops():
    gpus = ["/physical_device:GPU:0", "/physical_device:GPU:1"]
    backward = decide("auto", CUDA_13, gpus, 13000, {gpus[0]: (8, 0), gpus[1]: (6, 1)})
    assert backward.kernel == "stock" and "GPU:1 has compute capability 6.1" in backward.warning
    assert decide("auto", CUDA_13, gpus, 13000, {gpus[0]: (8, 0), gpus[1]: (8, 9)}).kernel == "native"


@pytest.mark.parametrize(
    "build, capabilities, says",
    [
        (
            {k: v for k, v in CUDA_13.items() if k != "cuda_architectures"},
            AMPERE,
            "does not list the CUDA architectures it was built for (an older build)",
        ),
        (dict(CUDA_13, cuda_architectures=""), AMPERE, "does not list the CUDA architectures"),
        (CUDA_13, {GPUS[0]: None}, "could not read the compute capability of /physical_device:GPU:0"),
        (CUDA_13, None, "could not read the compute capability of /physical_device:GPU:0"),
        (dict(CUDA_13, cuda_architectures="sm_80"), AMPERE, "'sm_80' is not a CUDA architecture"),
    ],
)
def test_auto_uses_stock_ops_when_the_architectures_or_the_capability_are_unknown(build, capabilities, says):
    backward = decide("auto", build, GPUS, 13000, capabilities)
    assert backward.kernel == "stock" and says in backward.warning


def test_the_build_record_lists_the_architectures_cmake_used():
    build = grad_reverse.BUILD_INFO
    if not build.get("cuda"):
        assert build.get("cuda_architectures", "") == ""
        return
    architectures = build["cuda_architectures"].split(";")
    # CMakeLists.txt's default for this toolkit: sm_70 was dropped by CUDA 13.
    oldest = "75-real" if gpu_facts.major_version(build["cuda_toolkit_version"]) >= 13 else "70-real"
    assert architectures == [oldest, "80-real", "90"]
    for entry in architectures:
        gpu_facts.parse_architecture(entry)  # raises on an entry runs_on cannot read


def test_stock_is_obeyed_silently_whatever_the_build_and_driver():
    for build, driver in [(NO_NVCC, None), (CUDA_13, 12040), (CUDA_13, 13000)]:
        backward = decide("stock", build, GPUS, driver)
        assert (backward.kernel, backward.warning) == ("stock", None)
        assert backward.reason == "chosen by GRAD_REVERSE_BACKWARD=stock"


def test_choose_asks_the_driver_only_with_gpus_and_cuda_kernels_and_warns_once(recwarn):
    def must_not_be_called():
        raise AssertionError("asked although the answer cannot change the choice")

    assert backward_choice.choose_backward(CUDA_13, must_not_be_called, lambda: [], environ={}).kernel == "native"
    assert backward_choice.choose_backward(NO_NVCC, must_not_be_called, lambda: GPUS, environ={}).kernel == "stock"
    stock = {"GRAD_REVERSE_BACKWARD": "stock"}
    assert (
        backward_choice.choose_backward(CUDA_13, must_not_be_called, must_not_be_called, environ=stock).kernel
        == "stock"
    )
    assert [str(w.message) for w in recwarn] == [decide(None, NO_NVCC, GPUS, None).warning]
    recwarn.clear()
    asked = []
    backward = backward_choice.choose_backward(
        CUDA_13,
        lambda: asked.append(1) or 12040,
        lambda: GPUS,
        environ={},
        compute_capability=lambda gpu: asked.append(gpu) or (8, 0),
    )
    assert asked == [1, GPUS[0]] and backward.kernel == "stock"
    assert len(recwarn) == 1 and recwarn[0].category is RuntimeWarning
    recwarn.clear()
    pascal = backward_choice.choose_backward(
        CUDA_13, lambda: 13000, lambda: GPUS, environ={}, compute_capability={GPUS[0]: (6, 1)}.get
    )
    assert pascal == decide(None, CUDA_13, GPUS, 13000, {GPUS[0]: (6, 1)}) and pascal.kernel == "stock"
    assert [str(w.message) for w in recwarn] == [pascal.warning]
    assert (
        backward_choice.choose_backward(
            CUDA_13, lambda: 13000, lambda: GPUS, environ={}, compute_capability={GPUS[0]: (8, 6)}.get
        ).kernel
        == "native"
    )
    with pytest.raises(ValueError, match="accepted values"):
        backward_choice.choose_backward(
            CUDA_13, must_not_be_called, must_not_be_called, environ={"GRAD_REVERSE_BACKWARD": "x"}
        )


def test_cuda_version_helpers():
    assert gpu_facts.format_cuda_version(12040) == "12.4"
    assert gpu_facts.format_cuda_version(13000) == "13.0"
    assert gpu_facts.format_cuda_version(-1) == "unknown"
    assert gpu_facts.major_version("13.0.88") == 13 and gpu_facts.major_version("") is None


def test_this_process_uses_what_decide_says_for_it():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the import warned already, if there was cause
        assert (
            backward_choice.choose_backward(
                grad_reverse.BUILD_INFO, lambda: calls.cuda_driver_version(ops.LIBRARY.cdll)
            )
            == ops.BACKWARD
        )
    expected = (
        grad_reverse.ops.LIBRARY.module.grad_reverse_grad
        if ops.BACKWARD.kernel == "native"
        else backward_choice.stock_reverse
    )
    assert ops._reverse_dense is expected


def test_the_driver_query_answers_in_every_build():
    # Never a crash. Built without CUDA: -1. Where TensorFlow sees no GPU the
    # runtime finds no driver (0) or fails to ask it (-1; what a machine with
    # CUDA libraries but no GPU gives); where it sees one, the driver answers.
    version = calls.cuda_driver_version(ops.LIBRARY.cdll)
    if not grad_reverse.BUILD_INFO.get("cuda"):
        assert version == -1
    elif not gpu_facts.visible_gpus():
        assert version in (0, -1)
    else:
        assert version >= 10000, version


def test_info_reports_the_backward_and_its_warning(monkeypatch):
    from grad_reverse import info

    monkeypatch.setattr(ops, "BACKWARD", decide("auto", CUDA_13, [], None))
    report = info.collect()
    assert report["backward"] == "native GradReverseGrad kernel: no GPU visible (GRAD_REVERSE_BACKWARD=auto)"
    assert report["cuda_architectures"] == (
        grad_reverse.BUILD_INFO["cuda_architectures"] if grad_reverse.BUILD_INFO.get("cuda") else "none"
    )
    assert "warning" not in report
    monkeypatch.setattr(ops, "BACKWARD", decide("stock", CUDA_13, [], None))
    assert info.collect()["backward"] == (
        "stock TensorFlow ops (dy * -lambda) on every device: chosen by GRAD_REVERSE_BACKWARD=stock"
    )
    monkeypatch.setattr(ops, "BACKWARD", decide("auto", CUDA_13, GPUS, 12040))
    report = info.collect()
    assert report["backward"].startswith("stock TensorFlow ops (dy * -lambda) on every device: the library's CUDA")
    assert report["backward"].endswith("(GRAD_REVERSE_BACKWARD=auto)")
    assert "driver CUDA 12.4 < library CUDA 13" in report["warning"]


# ---------------------------------------------------- kernel registry ----


def test_forward_has_a_gpu_kernel_in_every_build_and_the_backward_exactly_with_cuda():
    """TensorFlow's kernel registry lists what the loaded library registered,
    GPU kernels included, on a machine without a GPU. CI runs this against
    a CUDA build and a CPU-only build and says which it built
    (GRAD_REVERSE_EXPECT_CUDA=1 or 0), so neither case can pass unseen."""
    cuda = bool(grad_reverse.BUILD_INFO.get("cuda"))
    expected = os.environ.get("GRAD_REVERSE_EXPECT_CUDA")
    if grad_reverse.BUILD_INFO.get("abi") == "stable":
        # No CUDA backward kernel by design; what the installation's C++
        # libraries hold is checked in test_loader.py.
        assert not cuda
    elif expected is not None:
        assert cuda == (expected == "1"), (expected, grad_reverse.BUILD_INFO)
    assert {"CPU", "GPU"} <= kernel_devices("GradReverse")
    assert ("GPU" in kernel_devices("GradReverseGrad")) == cuda
    assert "CPU" in kernel_devices("GradReverseGrad")


def test_the_import_warning_points_at_the_users_import(tmp_path):
    # A fresh process where TensorFlow seems to see a GPU whose driver and
    # capability cannot be read: auto warns at import, and the warning names
    # the file holding `import grad_reverse`, not a module of the package.
    # The driver is asked first (gpu_facts.cuda_driver_has_devices): a
    # stand-in for libcuda says it has one device.
    script = tmp_path / "user_script.py"
    script.write_text(
        "import ctypes, warnings\n"
        "import tensorflow as tf\n"
        "class Driver:\n"
        "    cuInit = staticmethod(lambda flags: 0)\n"
        "    def cuDeviceGetCount(self, count):\n"
        "        ctypes.cast(count, ctypes.POINTER(ctypes.c_int))[0] = 1\n"
        "        return 0\n"
        "real_cdll = ctypes.CDLL\n"
        "ctypes.CDLL = lambda name, *a, **k: Driver() if name == 'libcuda.so.1' else real_cdll(name, *a, **k)\n"
        "tf.test.is_built_with_cuda = lambda: True\n"
        "tf.config.list_physical_devices = lambda kind=None: "
        "[tf.config.PhysicalDevice('/physical_device:GPU:0', 'GPU')] if kind == 'GPU' else []\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    import grad_reverse\n"
        "ours = [w for w in caught if str(w.message).startswith('grad_reverse: TensorFlow sees')]\n"
        "print('WARNED AT', [(w.filename, w.lineno) for w in ours])\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "GRAD_REVERSE_BACKWARD"}
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    line = script.read_text().splitlines().index("    import grad_reverse") + 1
    assert f"WARNED AT [({str(script)!r}, {line})]" in result.stdout, result.stdout
