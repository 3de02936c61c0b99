"""The op library that runs is built for the CPU it runs on: the portable
wheels carry a library per CPU (x86-64, aarch64), and an aarch64 wheel's
tests run under qemu's user-mode emulation on an x86-64 machine
(scripts/aarch64_emulated_tests.sh). These checks say which CPU the tests
really ran on, and that the library loaded is that CPU's.

GRAD_REVERSE_EXPECT_MACHINE (x86_64, aarch64): the CPU the run must report;
the emulated run sets it, so a run that silently fell back to the host's
Python cannot pass as an aarch64 one."""

import os
import platform
from pathlib import Path

# build_tools/ is on the path (pyproject's pytest `pythonpath`).
from elf_symbols import ELF_MACHINES, elf_machine

import grad_reverse
from grad_reverse._tools import library_path


def test_the_machine_is_the_one_the_run_expects():
    expected = os.environ.get("GRAD_REVERSE_EXPECT_MACHINE")
    machine = platform.machine()
    assert machine in ELF_MACHINES, f"tests run on {machine}, a CPU no wheel is built for"
    if expected:
        assert machine == expected, f"GRAD_REVERSE_EXPECT_MACHINE={expected}, but this Python runs on {machine}"


def test_the_loaded_op_library_is_built_for_this_machine():
    library = library_path()
    assert elf_machine(library) == ELF_MACHINES[platform.machine()], (
        f"{library} is not an ELF library for {platform.machine()}"
    )


def test_the_kernel_module_is_built_for_this_machine():
    from grad_reverse import _kernels

    assert elf_machine(Path(_kernels.__file__)) == ELF_MACHINES[platform.machine()]


def test_the_op_runs_here_as_the_reference_does():
    import numpy as np
    import tensorflow as tf

    x = tf.constant(np.linspace(-3, 3, 24, dtype=np.float32).reshape(4, 6))
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = grad_reverse.grad_reverse(x, 0.75)
    dx = tape.gradient(y, x, output_gradients=tf.ones_like(x))
    np.testing.assert_array_equal(y.numpy(), x.numpy())
    np.testing.assert_array_equal(dx.numpy(), np.full((4, 6), -0.75, np.float32))
