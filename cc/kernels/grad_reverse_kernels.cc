// CPU and GPU OpKernels of GradReverse (identity, buffer forwarded) and
// GradReverseGrad (dx = -lambda * dy, in place when TensorFlow allows it).
#define EIGEN_USE_THREADS

#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cc/kernels/cpu_paths.h"
#include "cc/kernels/grad_reverse_launcher.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/register_types.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_types.h"
#include "unsupported/Eigen/CXX11/Tensor"

#if GRAD_REVERSE_WITH_CUDA
#include "cc/ops/tf_compat.h"
#include GRAD_REVERSE_STREAM_HEADER
#endif

namespace tensorflow {
namespace {

using CPUDevice = Eigen::ThreadPoolDevice;

template <typename T>
constexpr grad_reverse::DType KernelDType();
template <>
constexpr grad_reverse::DType KernelDType<Eigen::half>() {
  return grad_reverse::DType::kHalf;
}
template <>
constexpr grad_reverse::DType KernelDType<Eigen::bfloat16>() {
  return grad_reverse::DType::kBFloat16;
}
template <>
constexpr grad_reverse::DType KernelDType<float>() {
  return grad_reverse::DType::kFloat;
}
template <>
constexpr grad_reverse::DType KernelDType<double>() {
  return grad_reverse::DType::kDouble;
}

// `lambda` is a host-memory float scalar on every device. A NaN or Inf would
// silently poison every weight upstream of the layer, so it is rejected.
absl::Status ReadLambda(OpKernelContext* ctx, float* lambda) {
  const Tensor& t = ctx->input(1);
  if (!TensorShapeUtils::IsScalar(t.shape())) {
    return absl::InvalidArgumentError(
        absl::StrCat("lambda_ must be a scalar (shape []), got shape ",
                     t.shape().DebugString()));
  }
  *lambda = t.scalar<float>()();
  if (!std::isfinite(*lambda)) {
    return absl::InvalidArgumentError(
        absl::StrCat("lambda_ must be finite, got ", *lambda));
  }
  return absl::OkStatus();
}

// Forward: the identity. The output shares the input's buffer, like Identity.
class GradReverseOp : public OpKernel {
 public:
  explicit GradReverseOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    float lambda;
    OP_REQUIRES_OK(ctx, ReadLambda(ctx, &lambda));
    ctx->set_output(0, ctx->input(0));
  }
};

// Shared by the CPU and GPU backward kernels: validation and the in-place
// output; `Backend::Run` does the arithmetic.
template <typename Backend, typename T>
class GradReverseGradOp : public OpKernel {
 public:
  explicit GradReverseGradOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    float lambda;
    OP_REQUIRES_OK(ctx, ReadLambda(ctx, &lambda));
    const Tensor& dy = ctx->input(0);
    Tensor* dx = nullptr;
    OP_REQUIRES_OK(ctx, ctx->forward_input_or_allocate_output({0}, 0,
                                                              dy.shape(), &dx));
    if (dy.NumElements() == 0) return;
    Backend::template Run<T>(ctx, dy, lambda, dx);
  }
};

// The framework-free CPU kernel of the path cpu_paths.h chooses (vector
// registers for every type, conversions included), on shards of the intra-op
// pool. Eigen's cost model sizes the shards, as for TensorFlow's own
// element-wise ops, and keeps small tensors on the calling thread.
struct OnCpu {
  template <typename T>
  static void Run(OpKernelContext* ctx, const Tensor& dy, float lambda,
                  Tensor* dx) {
    const std::string path_error = grad_reverse::CpuPathError();
    OP_REQUIRES(ctx, path_error.empty(),
                absl::FailedPreconditionError(path_error));
    const bool streaming = grad_reverse::UseStreamingStores(
        dy.data(), dx->data(), dy.NumElements() * sizeof(T));
    const grad_reverse::NegScaleFn kernel =
        grad_reverse::NegScaleCpuFunction(KernelDType<T>(), streaming);
    const float scale = -lambda;
    const char* in = static_cast<const char*>(dy.data());
    char* out = static_cast<char*>(dx->data());
    // Per element: one load, one store, a multiply and two conversions at
    // most, a few instructions shared by a vector's lanes.
    const Eigen::TensorOpCost cost(sizeof(T), sizeof(T), 1.0);
    ctx->eigen_device<CPUDevice>().parallelFor(
        dy.NumElements(), cost,
        // Shards start on 64-byte boundaries of the buffer.
        [](Eigen::Index size) -> Eigen::Index {
          constexpr Eigen::Index kLine = 64 / sizeof(T);
          return (size + kLine - 1) / kLine * kLine;
        },
        [=](Eigen::Index first, Eigen::Index last) {
          kernel(in + first * sizeof(T), out + first * sizeof(T), last - first,
                 scale);
        });
  }
};

#define REGISTER_CPU(T)                                                     \
  REGISTER_KERNEL_BUILDER(                                                  \
      Name("GradReverse").Device(DEVICE_CPU).TypeConstraint<T>("T"),        \
      GradReverseOp);                                                       \
  REGISTER_KERNEL_BUILDER(                                                  \
      Name("GradReverseGrad").Device(DEVICE_CPU).TypeConstraint<T>("T"),    \
      GradReverseGradOp<OnCpu, T>);

TF_CALL_half(REGISTER_CPU);
TF_CALL_bfloat16(REGISTER_CPU);
TF_CALL_float(REGISTER_CPU);
TF_CALL_double(REGISTER_CPU);
#undef REGISTER_CPU

// The forward on the GPU in every build, CUDA compiled or not: its kernel is
// host code (the output is the input's buffer; lambda is in host memory), so
// a GPU model never copies its activations to the CPU and back for it. The
// backward's GPU kernel needs CUDA (below); without it the package's Python
// gradient uses stock TensorFlow ops, which run on the GPU (ops.py).
#define REGISTER_GPU_FORWARD(T)                                             \
  REGISTER_KERNEL_BUILDER(Name("GradReverse")                               \
                              .Device(DEVICE_GPU)                           \
                              .HostMemory("lambda")                         \
                              .TypeConstraint<T>("T"),                      \
                          GradReverseOp);

TF_CALL_half(REGISTER_GPU_FORWARD);
TF_CALL_bfloat16(REGISTER_GPU_FORWARD);
TF_CALL_float(REGISTER_GPU_FORWARD);
TF_CALL_double(REGISTER_GPU_FORWARD);
#undef REGISTER_GPU_FORWARD

#if GRAD_REVERSE_WITH_CUDA

// Enqueues the framework-free CUDA kernel on this op's stream.
struct OnGpu {
  template <typename T>
  static void Run(OpKernelContext* ctx, const Tensor& dy, float lambda,
                  Tensor* dx) {
    auto* stream = static_cast<cudaStream_t>(
        ctx->op_device_context()->stream()->platform_specific_handle().stream);
    const int error = grad_reverse::NegScaleCuda(
        dy.data(), dx->data(), dy.NumElements(), lambda, KernelDType<T>(),
        stream);
    OP_REQUIRES(ctx, error == 0,
                absl::InternalError(
                    absl::StrCat("GradReverseGrad CUDA launch failed: ",
                                 grad_reverse::CudaErrorString(error))));
  }
};

#define REGISTER_GPU(T)                                                     \
  REGISTER_KERNEL_BUILDER(Name("GradReverseGrad")                           \
                              .Device(DEVICE_GPU)                           \
                              .HostMemory("lambda")                         \
                              .TypeConstraint<T>("T"),                      \
                          GradReverseGradOp<OnGpu, T>);

TF_CALL_half(REGISTER_GPU);
TF_CALL_bfloat16(REGISTER_GPU);
TF_CALL_float(REGISTER_GPU);
TF_CALL_double(REGISTER_GPU);
#undef REGISTER_GPU

#endif  // GRAD_REVERSE_WITH_CUDA

}  // namespace
}  // namespace tensorflow

// GradReverseCpuPath and GradReverseSetCpuPath: cc/kernels/cpu_path_exports.cc.

// For the package's choice of backward (python/grad_reverse/_backward.py),
// through ctypes: the CUDA version of the installed driver as 1000 * major +
// 10 * minor (12040 is 12.4), 0 when no driver is installed, -1 when the
// library was built without CUDA or the query failed. It starts no CUDA
// context. The CUDA kernels need a driver of their toolkit's major version.
extern "C" int GradReverseCudaDriverVersion() {
  return grad_reverse::CudaDriverVersion();
}
