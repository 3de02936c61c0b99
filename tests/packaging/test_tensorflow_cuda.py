"""build_tools/tensorflow_cuda.py: the CUDA version a TensorFlow was built
with, where its build info says it (up to 2.21), from its wheel's CUDA
runtime requirement or the runtime installed (2.22), else "unknown"."""

import pytest

# build_tools/ is on the path (pyproject's pytest `pythonpath`).
import tensorflow_cuda

# What TensorFlow 2.22.0rc0's wheel metadata says (its and-cuda extra).
REQUIREMENTS_2_22 = [
    "numpy>=1.26.0",
    'nvidia-cublas-cu12<13.0,>=12.5.3.2; extra == "and-cuda"',
    'nvidia-cuda-runtime-cu12<13.0,>=12.5.82; extra == "and-cuda"',
]


@pytest.mark.parametrize(
    "build_info, requirements, installed, expected",
    [
        ({"cuda_version": "12.5.1", "is_cuda_build": True}, REQUIREMENTS_2_22, {}, "12.5.1"),
        ({"is_cuda_build": True}, REQUIREMENTS_2_22, {"nvidia-cuda-runtime-cu12": "12.9.79"}, "12.5.82"),
        ({"is_cuda_build": True}, ["numpy"], {"nvidia-cuda-runtime-cu12": "12.9.79"}, "12.9.79"),
        ({"is_cuda_build": True}, ["nvidia-cuda-runtime-cu13"], {}, "13"),
        ({"is_cuda_build": True}, ["numpy"], {}, "unknown"),
        ({"is_cuda_build": False}, REQUIREMENTS_2_22, {"nvidia-cuda-runtime-cu12": "12.9.79"}, ""),
        ({}, [], {}, ""),
    ],
)
def test_the_cuda_version_is_read_where_tensorflow_gives_it(build_info, requirements, installed, expected):
    assert tensorflow_cuda.cuda_version(build_info, requirements, installed) == expected
