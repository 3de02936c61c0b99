"""Device backends: `CudaBackend` (CuPy arrays on device 0, the CUDA kernel,
CUDA events) and `HostBackend` (--cpu-only: numpy arrays, the CPU kernel
standing in for the device, time.perf_counter). Both offer the same calls to
the correctness and bandwidth parts."""

from __future__ import annotations

import platform
import time
from collections.abc import Callable

import numpy as np

from gpu_check_lib.common import SetupError
from gpu_check_lib.values import STORAGE, host_view_dtype


class CudaBackend:
    """CuPy arrays on device 0, the CUDA kernel, CUDA events."""

    kind = "cuda"

    def __init__(self, kernels, exact_allocations: bool):
        try:
            import cupy
        except ImportError as error:
            raise SetupError(f"CuPy is needed for the device check ({error}); use --cpu-only without a GPU") from error
        self.cp = cupy
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except cupy.cuda.runtime.CUDARuntimeError as error:
            raise SetupError(f"no usable CUDA device: {error}") from error
        if count < 1:
            raise SetupError("no CUDA device")
        if not kernels.cuda_compiled_in():
            raise SetupError("the kernel module was built without CUDA (configure with -DGRAD_REVERSE_CUDA=ON)")
        self.kernels = kernels
        if exact_allocations:
            # No memory pool: every array is its own cudaMalloc, so memcheck
            # sees an access past an array's end as out of bounds.
            cupy.cuda.set_allocator(None)
        # Non-blocking: it does not synchronize with the legacy default stream
        # that the other cases use, so the stream argument really is honoured.
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self._start, self._end = cupy.cuda.Event(), cupy.cuda.Event()

    def info(self) -> dict:
        cp = self.cp
        props = cp.cuda.runtime.getDeviceProperties(0)
        name = props.get("name", b"?")
        free, total = cp.cuda.runtime.memGetInfo()
        return {
            "name": name.decode() if isinstance(name, bytes) else str(name),
            "compute_capability": f"{props.get('major')}.{props.get('minor')}",
            "multiprocessors": props.get("multiProcessorCount"),
            "memory_bytes": int(total),
            "memory_free_bytes": int(free),
            "l2_cache_bytes": props.get("l2CacheSize"),
            "cuda_runtime": cp.cuda.runtime.runtimeGetVersion(),
            "cuda_driver": cp.cuda.runtime.driverGetVersion(),
            "cupy": cp.__version__,
        }

    def upload(self, host: np.ndarray):
        return self.cp.asarray(host)

    def download(self, device) -> np.ndarray:
        return self.cp.asnumpy(device)

    def synchronize(self) -> None:
        self.cp.cuda.runtime.deviceSynchronize()

    def neg_scale(self, name: str, src, dst, lambda_: float, on_stream: bool = False) -> None:
        if on_stream:
            # Uploads from pageable memory may still be in flight on the legacy
            # stream, which a non-blocking stream does not wait for.
            self.synchronize()
            self.kernels.neg_scale_cuda(src, dst, lambda_, stream=self.stream.ptr, dtype=name)
            self.stream.synchronize()
        else:
            self.kernels.neg_scale_cuda(src, dst, lambda_, dtype=name)

    # bandwidth
    def alloc_bytes(self, nbytes: int):
        buffer = self.cp.empty(nbytes, self.cp.uint8)
        # 0x3F in every byte is a normal number in all four types.
        self.cp.cuda.runtime.memset(buffer.data.ptr, 0x3F, nbytes)
        self.synchronize()
        return buffer

    def view(self, buffer, name: str, count: int):
        return buffer[: count * np.dtype(STORAGE[name]).itemsize].view(STORAGE[name])

    def timed_ops(self, name: str, src, dst, nbytes: int) -> dict[str, Callable[[], None]]:
        runtime, stream, kernels = self.cp.cuda.runtime, self.stream.ptr, self.kernels
        return {
            "copy": lambda: runtime.memcpyAsync(
                dst.data.ptr, src.data.ptr, nbytes, runtime.memcpyDeviceToDevice, stream
            ),
            # lambda 1: in place, values only flip sign, so they stay normal.
            "kernel": lambda: kernels.neg_scale_cuda(src, dst, 1.0, stream=stream, dtype=name),
            "kernel_in_place": lambda: kernels.neg_scale_cuda(dst, dst, 1.0, stream=stream, dtype=name),
        }

    def time_ms(self, op: Callable[[], None], inner: int) -> float:
        # One untimed launch first keeps the GPU busy while Python records the
        # start event and enqueues the timed launches, so the interval holds
        # no idle time spent waiting for the host.
        op()
        self._start.record(self.stream)
        for _ in range(inner):
            op()
        self._end.record(self.stream)
        self._end.synchronize()
        return self.cp.cuda.get_elapsed_time(self._start, self._end) / inner


class HostBackend:
    """--cpu-only: numpy arrays, the CPU kernel, time.perf_counter."""

    kind = "cpu"

    def __init__(self, kernels, use_ml_dtypes: bool):
        self.kernels = kernels
        self.use_ml_dtypes = use_ml_dtypes

    def info(self) -> dict:
        return {
            "name": f"host CPU ({platform.machine()}), CPU kernel standing in for the device",
            "cuda_compiled_in": bool(self.kernels.cuda_compiled_in()),
        }

    def upload(self, host: np.ndarray) -> np.ndarray:
        return np.array(host, copy=True)

    def download(self, device: np.ndarray) -> np.ndarray:
        return np.array(device, copy=True)

    def synchronize(self) -> None:
        pass

    def can_run(self, name: str) -> bool:
        return host_view_dtype(name, self.use_ml_dtypes) is not None

    def neg_scale(self, name: str, src, dst, lambda_: float, on_stream: bool = False) -> None:
        view = host_view_dtype(name, self.use_ml_dtypes)
        self.kernels.neg_scale_cpu(src.view(view), lambda_, out=dst.view(view))

    def alloc_bytes(self, nbytes: int) -> np.ndarray:
        return np.full(nbytes, 0x3F, np.uint8)

    def view(self, buffer, name: str, count: int):
        return buffer[: count * np.dtype(STORAGE[name]).itemsize].view(STORAGE[name])

    def timed_ops(self, name: str, src, dst, nbytes: int) -> dict[str, Callable[[], None]]:
        view = host_view_dtype(name, self.use_ml_dtypes)
        s, d, k = src.view(view), dst.view(view), self.kernels
        return {
            "copy": lambda: np.copyto(dst, src),
            "kernel": lambda: k.neg_scale_cpu(s, 1.0, out=d),
            "kernel_in_place": lambda: k.neg_scale_cpu(d, 1.0, out=d),
        }

    def time_ms(self, op: Callable[[], None], inner: int) -> float:
        start = time.perf_counter()
        for _ in range(inner):
            op()
        return (time.perf_counter() - start) * 1e3 / inner
