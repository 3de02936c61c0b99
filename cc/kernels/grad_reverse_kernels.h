// What the CPU and GPU OpKernels share (grad_reverse_kernels.cc,
// grad_reverse_kernels_gpu.cc): the check of `lambda`, and the backward
// kernel around a backend that does the arithmetic.
#ifndef GRAD_REVERSE_CC_KERNELS_GRAD_REVERSE_KERNELS_H_
#define GRAD_REVERSE_CC_KERNELS_GRAD_REVERSE_KERNELS_H_

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cc/compute/grad_reverse_launcher.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_types.h"

namespace tensorflow {
namespace grad_reverse_kernels {

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
inline absl::Status ReadLambda(OpKernelContext* ctx, float* lambda) {
  const Tensor& t = ctx->input(1);
  if (!TensorShapeUtils::IsScalar(t.shape())) {
    return absl::InvalidArgumentError(
        absl::StrCat("lambda_ must be a scalar (shape []), got shape ", t.shape().DebugString()));
  }
  *lambda = t.scalar<float>()();
  if (!std::isfinite(*lambda)) {
    return absl::InvalidArgumentError(absl::StrCat("lambda_ must be finite, got ", *lambda));
  }
  return absl::OkStatus();
}

// Shared by the CPU and GPU backward kernels: validation and the in-place
// output; `Backend::Run` does the arithmetic.
template <typename Backend, typename T>
class GradReverseGradOp : public OpKernel {
 public:
  explicit GradReverseGradOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    // Set by ReadLambda whenever it returns OK; initialised because GCC cannot
    // see that and warns that `lambda` may be used uninitialized.
    float lambda = 0.0f;
    OP_REQUIRES_OK(ctx, ReadLambda(ctx, &lambda));
    const Tensor& dy = ctx->input(0);
    Tensor* dx = nullptr;
    OP_REQUIRES_OK(ctx, ctx->forward_input_or_allocate_output({0}, 0, dy.shape(), &dx));
    if (dy.NumElements() == 0) return;
    Backend::template Run<T>(ctx, dy, lambda, dx);
  }
};

}  // namespace grad_reverse_kernels
}  // namespace tensorflow

#endif  // GRAD_REVERSE_CC_KERNELS_GRAD_REVERSE_KERNELS_H_
