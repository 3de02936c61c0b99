"""What the built libraries ask of the process they load into.

* Every CUDA runtime symbol our kernels call resolves inside our own library
  (its static runtime, the one nvcc compiled the kernels for), never against
  whatever else exports the CUDA runtime API: the `tensorflow` package's
  libtensorflow_framework.so.2 does (CUDA 12.5), and a link that lists it
  before the static runtime made our kernels register with, and launch
  through, TensorFlow's runtime. Checked in every build; CI's step 1 builds
  against `tensorflow`, its wheel step against `tensorflow-cpu`.
* In the portable wheel (GRAD_REVERSE_EXPECT_PORTABLE=1), no library needs a
  glibc / libstdc++ symbol version newer than TensorFlow's own libraries do.
"""

import os
import shutil
from pathlib import Path

# build_tools/ is on the path (pyproject's pytest `pythonpath`).
import elf_symbols
import pytest

import grad_reverse
from grad_reverse._native import choice as library_choice
from grad_reverse._tools import library_path

pytestmark = pytest.mark.skipif(
    not (shutil.which("nm") and shutil.which("objdump")), reason="binutils (nm, objdump) not on PATH"
)
PACKAGE = Path(grad_reverse.__file__).resolve().parent


def built_libraries() -> list[Path]:
    return (
        sorted(PACKAGE.glob("_libs/tf*/" + library_choice.LIBRARY_NAME))
        + sorted(PACKAGE.glob("_libs/stable/" + library_choice.LIBRARY_NAME))
        + sorted(PACKAGE.glob("_kernels*.so"))
    )


def test_the_package_holds_the_libraries_it_loads():
    assert library_path() in built_libraries()


@pytest.mark.parametrize("library", built_libraries(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_cuda_runtime_symbol_is_left_for_another_library(library):
    assert elf_symbols.undefined_cuda_symbols(library) == []


@pytest.mark.skipif(
    os.environ.get("GRAD_REVERSE_EXPECT_PORTABLE") != "1",
    reason="a source build links this machine's glibc and libstdc++ (set "
    "GRAD_REVERSE_EXPECT_PORTABLE=1 to check the portable wheel)",
)
@pytest.mark.parametrize("library", built_libraries(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_portable_wheel_needs_no_newer_symbols_than_tensorflow(library):
    assert elf_symbols.too_new(elf_symbols.newest_versions(library)) == []
