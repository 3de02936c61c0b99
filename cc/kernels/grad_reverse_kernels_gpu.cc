// The GPU OpKernel of GradReverseGrad: host code that enqueues the
// framework-free CUDA kernel (cc/compute/grad_reverse_cuda.cu) on the op's
// stream. Compiled by the C++ compiler, and only into a library built with
// CUDA (cmake/OpLibrary.cmake); the forward's GPU kernel needs no CUDA and is
// in grad_reverse_kernels.cc.
#define EIGEN_USE_THREADS

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cc/compute/grad_reverse_launcher.h"
#include "cc/kernels/grad_reverse_kernels.h"
#include "cc/kernels/tf_compat.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/register_types.h"
#include "tensorflow/core/framework/tensor.h"
#include GRAD_REVERSE_STREAM_HEADER

namespace tensorflow {
namespace grad_reverse_kernels {
namespace {

// Enqueues the framework-free CUDA kernel on this op's stream.
struct OnGpu {
  template <typename T>
  static void Run(OpKernelContext* ctx, const Tensor& dy, float lambda, Tensor* dx) {
    auto* stream = static_cast<cudaStream_t>(
        ctx->op_device_context()->stream()->platform_specific_handle().stream);
    const int error = grad_reverse::NegScaleCuda(dy.data(), dx->data(), dy.NumElements(), lambda,
                                                 KernelDType<T>(), stream);
    OP_REQUIRES(ctx, error == 0,
                absl::InternalError(absl::StrCat("GradReverseGrad CUDA launch failed: ",
                                                 grad_reverse::CudaErrorString(error))));
  }
};

#define REGISTER_GPU(T)                                                                       \
  REGISTER_KERNEL_BUILDER(                                                                    \
      Name("GradReverseGrad").Device(DEVICE_GPU).HostMemory("lambda").TypeConstraint<T>("T"), \
      GradReverseGradOp<OnGpu, T>);

TF_CALL_half(REGISTER_GPU);
TF_CALL_bfloat16(REGISTER_GPU);
TF_CALL_float(REGISTER_GPU);
TF_CALL_double(REGISTER_GPU);
#undef REGISTER_GPU

}  // namespace
}  // namespace grad_reverse_kernels
}  // namespace tensorflow
