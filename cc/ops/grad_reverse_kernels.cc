// CPU and GPU OpKernels of GradReverse (identity, buffer forwarded) and
// GradReverseGrad (dx = -lambda * dy, in place when TensorFlow allows it).
#define EIGEN_USE_THREADS

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
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

// `lambda` is a host-memory float scalar on every device. A NaN or Inf would
// silently poison every weight upstream of the layer, so it is rejected.
absl::Status ReadLambda(OpKernelContext* ctx, float* lambda) {
  const Tensor& t = ctx->input(1);
  if (!TensorShapeUtils::IsScalar(t.shape())) {
    return absl::InvalidArgumentError(
        absl::StrCat("lambda must be a scalar (shape []), got shape ",
                     t.shape().DebugString()));
  }
  *lambda = t.scalar<float>()();
  if (!std::isfinite(*lambda)) {
    return absl::InvalidArgumentError(
        absl::StrCat("lambda must be finite, got ", *lambda));
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

// out = -lambda * in on the CPU. Eigen's cost model splits large tensors over
// the intra-op pool and keeps small ones on the calling thread.
template <typename T>
struct NegScaleCpuFunctor {
  void operator()(const CPUDevice& d, typename TTypes<T>::ConstFlat in,
                  float lambda, typename TTypes<T>::Flat out) {
    out.device(d) = in * in.constant(static_cast<T>(-lambda));
  }
};

// half and bfloat16: computed in float, rounded once (the GPU and XLA kernels
// do the same, so all three agree bit for bit).
template <typename T>
struct NegScaleCpuFunctorViaFloat {
  void operator()(const CPUDevice& d, typename TTypes<T>::ConstFlat in,
                  float lambda, typename TTypes<T>::Flat out) {
    out.device(d) = (in.template cast<float>() * -lambda).template cast<T>();
  }
};

template <>
struct NegScaleCpuFunctor<Eigen::half>
    : NegScaleCpuFunctorViaFloat<Eigen::half> {};
template <>
struct NegScaleCpuFunctor<Eigen::bfloat16>
    : NegScaleCpuFunctorViaFloat<Eigen::bfloat16> {};

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

struct OnCpu {
  template <typename T>
  static void Run(OpKernelContext* ctx, const Tensor& dy, float lambda,
                  Tensor* dx) {
    NegScaleCpuFunctor<T>()(ctx->eigen_device<CPUDevice>(), dy.flat<T>(),
                            lambda, dx->flat<T>());
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

#if GRAD_REVERSE_WITH_CUDA

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
  REGISTER_KERNEL_BUILDER(Name("GradReverse")                               \
                              .Device(DEVICE_GPU)                           \
                              .HostMemory("lambda")                         \
                              .TypeConstraint<T>("T"),                      \
                          GradReverseOp);                                   \
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
