// grad_reverse._kernels: the framework-free GradReverseGrad kernels on raw
// buffers, so they can be tested and benchmarked without TensorFlow (on numpy
// arrays on the CPU; on CuPy/PyTorch arrays through __cuda_array_interface__).
// On a machine without TensorFlow, import it as the top-level module `_kernels`
// from the build directory.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cc/compute/cpu_paths.h"
#include "cc/compute/grad_reverse_launcher.h"

namespace py = pybind11;
using grad_reverse::DType;

namespace {

constexpr const char* kAccepted = "float16, bfloat16, float32 or float64";

DType DTypeFromName(const std::string& name) {
  if (name == "float16" || name == "half") return DType::kHalf;
  if (name == "bfloat16") return DType::kBFloat16;
  if (name == "float32" || name == "float") return DType::kFloat;
  if (name == "float64" || name == "double") return DType::kDouble;
  throw py::type_error("unsupported dtype '" + name + "'; accepted: " + kAccepted);
}

// numpy dtype -> kernel dtype; bfloat16 is ml_dtypes' (numpy has none).
DType DTypeOfArray(const py::array& a) { return DTypeFromName(py::str(a.dtype().attr("name"))); }

// An invalid GRAD_REVERSE_CPU_PATH is an error, not a silent fallback.
void CheckCpuPath() {
  const std::string error = grad_reverse::CpuPathError();
  if (!error.empty()) throw py::value_error(error);
}

std::string ActiveCpuPathName() {
  CheckCpuPath();
  return grad_reverse::CpuPathName(grad_reverse::ActiveCpuPath());
}

void SetCpuPath(const std::string& name) {
  if (!grad_reverse::ForceCpuPath(name)) {
    std::string supported;
    for (const std::string& path : grad_reverse::SupportedCpuPathNames()) {
      supported += ", " + path;
    }
    throw py::value_error("CPU path '" + name +
                          "' is unknown or not supported by this CPU; "
                          "accepted here: auto" +
                          supported);
  }
}

py::array NegScaleCpu(const py::array& in, float lambda, py::object out_obj,
                      py::object streaming_obj) {
  CheckCpuPath();
  const DType dtype = DTypeOfArray(in);
  if (!(in.flags() & py::array::c_style)) {
    throw py::value_error("input must be C-contiguous");
  }
  py::array out =
      out_obj.is_none()
          ? py::array(in.dtype(), std::vector<py::ssize_t>(in.shape(), in.shape() + in.ndim()))
          : out_obj.cast<py::array>();
  if (!out.dtype().is(in.dtype()) || out.size() != in.size() ||
      !(out.flags() & py::array::c_style) || !out.writeable()) {
    throw py::value_error(
        "out must be a writeable C-contiguous array of the input's dtype and size");
  }
  const void* src = in.data();
  void* dst = out.mutable_data();
  const int64_t n = in.size();
  if (streaming_obj.is_none()) {
    py::gil_scoped_release release;
    grad_reverse::NegScaleCpu(src, dst, n, lambda, dtype);
  } else {
    const grad_reverse::NegScaleFn kernel =
        grad_reverse::NegScaleCpuFunction(dtype, streaming_obj.cast<bool>());
    py::gil_scoped_release release;
    kernel(src, dst, n, -lambda);
  }
  return out;
}

struct DeviceBuffer {
  uintptr_t pointer = 0;
  int64_t size = 0;
  std::string typestr;
};

// Reads a C-contiguous __cuda_array_interface__ (version 2 or 3).
DeviceBuffer ReadCudaArray(const py::object& obj, const char* what) {
  if (!py::hasattr(obj, "__cuda_array_interface__")) {
    throw py::type_error(std::string(what) +
                         " must expose __cuda_array_interface__ (a CuPy array "
                         "or a PyTorch CUDA tensor)");
  }
  py::dict iface = obj.attr("__cuda_array_interface__");
  DeviceBuffer buffer;
  buffer.pointer = py::cast<uintptr_t>(py::tuple(iface["data"])[0]);
  buffer.typestr = py::cast<std::string>(iface["typestr"]);
  buffer.size = 1;
  for (auto dim : py::tuple(iface["shape"])) buffer.size *= py::cast<int64_t>(dim);
  if (iface.contains("strides") && !iface["strides"].is_none()) {
    const py::tuple strides = iface["strides"];
    const py::tuple shape = iface["shape"];
    int64_t expected = std::stoi(buffer.typestr.substr(2));
    for (py::ssize_t i = static_cast<py::ssize_t>(shape.size()) - 1; i >= 0; --i) {
      const int64_t extent = py::cast<int64_t>(shape[i]);
      if (extent > 1 && py::cast<int64_t>(strides[i]) != expected) {
        throw py::value_error(std::string(what) + " must be C-contiguous");
      }
      expected *= extent;
    }
  }
  return buffer;
}

DType DTypeFromTypestr(const std::string& typestr, const std::string& override_name) {
  if (!override_name.empty()) return DTypeFromName(override_name);
  if (typestr == "<f2") return DType::kHalf;
  if (typestr == "<f4") return DType::kFloat;
  if (typestr == "<f8") return DType::kDouble;
  throw py::type_error("unsupported array type '" + typestr + "'; accepted: " + kAccepted +
                       " (pass dtype='bfloat16' for a 2-byte view)");
}

void NegScaleCuda(const py::object& in_obj, const py::object& out_obj, float lambda,
                  uintptr_t stream, const std::string& dtype_name) {
  const DeviceBuffer in = ReadCudaArray(in_obj, "input");
  const DeviceBuffer out = ReadCudaArray(out_obj, "out");
  const DType dtype = DTypeFromTypestr(in.typestr, dtype_name);
  if (in.typestr != out.typestr || in.size != out.size) {
    throw py::value_error("input and out must have the same type and size");
  }
  if (grad_reverse::DTypeSize(dtype) != std::stoi(in.typestr.substr(2))) {
    throw py::type_error("dtype '" + dtype_name + "' does not match the array's element size");
  }
  int error;
  {
    py::gil_scoped_release release;
    error = grad_reverse::NegScaleCuda(reinterpret_cast<const void*>(in.pointer),
                                       reinterpret_cast<void*>(out.pointer), in.size, lambda, dtype,
                                       reinterpret_cast<cudaStream_t>(stream));
  }
  if (error != 0) {
    throw std::runtime_error(std::string("CUDA launch failed: ") +
                             grad_reverse::CudaErrorString(error));
  }
}

}  // namespace

PYBIND11_MODULE(_kernels, m) {
  m.doc() = "GradReverseGrad kernels (out = -lambda * in) on raw buffers, without TensorFlow.";
  m.def("neg_scale_cpu", &NegScaleCpu, py::arg("x"), py::arg("lambda_"),
        py::arg("out") = py::none(), py::arg("streaming") = py::none(),
        "out = -lambda_ * x on the CPU (single thread, on the path cpu_path() names) for a "
        "C-contiguous numpy array of float16, ml_dtypes.bfloat16, float32 or float64. `out` "
        "may be `x` (in place). half/bfloat16 are computed in float and rounded once. "
        "streaming: None picks the stores as TensorFlow's kernel does (streaming_stores() "
        "says which, for an output of 16 MiB or more that is not x); True/False force them.");
  m.def("cpu_path", &ActiveCpuPathName,
        "The CPU kernel path in use: 'portable', 'avx2', 'avx512' or 'avx512bf16'; the "
        "fastest this CPU supports unless GRAD_REVERSE_CPU_PATH (read once) or set_cpu_path "
        "says otherwise. Raises ValueError if GRAD_REVERSE_CPU_PATH names no supported path.");
  m.def("cpu_paths", &grad_reverse::SupportedCpuPathNames,
        "The CPU kernel paths this CPU and build support, slowest first.");
  m.def("set_cpu_path", &SetCpuPath, py::arg("name"),
        "Force the CPU kernel path of this module ('auto': back to the default choice); "
        "ValueError for a path this CPU does not support. Affects only this module, not the "
        "TensorFlow op library (whose C function GradReverseSetCpuPath does the same there).");
  m.def("streaming_stores", &grad_reverse::StreamingStoresState,
        "Whether this module's large out-of-place passes use streaming stores, and why: "
        "GRAD_REVERSE_STREAMING_STORES (auto, on, off; read once) or set_streaming_stores, "
        "and under auto the measurement of the first passes.");
  m.def(
      "set_streaming_stores",
      [](const std::string& mode) {
        if (!grad_reverse::ForceStreamingStores(mode)) {
          throw py::value_error("streaming stores '" + mode + "' is not one of auto, on, off");
        }
      },
      py::arg("mode"),
      "Force this module's streaming-store choice: 'on', 'off', or 'auto' (the environment's "
      "choice again; a finished measurement is kept). Affects only this module.");
  m.def("streaming_store_passes", &grad_reverse::StreamingStorePasses,
        "How many of this module's passes have written with streaming stores so far.");
  m.def(
      "streaming_stores_win",
      [](const std::vector<double>& plain, const std::vector<double>& streaming) {
        if (plain.size() != streaming.size()) {
          throw py::value_error("plain and streaming must hold one time per pair each");
        }
        return grad_reverse::StreamingStoresWin(plain.data(), streaming.data(),
                                                static_cast<int>(plain.size()));
      },
      py::arg("plain"), py::arg("streaming"),
      "The measurement's decision (the function `auto` applies): seconds per byte of each "
      "pair's plain-store and streaming-store pass; True when streaming stores win.");
  m.def("neg_scale_cuda", &NegScaleCuda, py::arg("x"), py::arg("out"), py::arg("lambda_"),
        py::arg("stream") = 0, py::arg("dtype") = "",
        "Enqueue out = -lambda_ * x on a CUDA stream (a raw cudaStream_t as int; 0 is the "
        "legacy default stream). x and out expose __cuda_array_interface__; out may be x. "
        "dtype='bfloat16' reads 2-byte integer arrays as bfloat16.");
  m.def("cuda_compiled_in", &grad_reverse::CudaCompiledIn,
        "Whether this build contains the CUDA kernel.");
}
