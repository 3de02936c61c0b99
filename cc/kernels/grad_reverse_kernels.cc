// CPU OpKernels of GradReverse (identity, buffer forwarded) and GradReverseGrad
// (dx = -lambda * dy, in place when TensorFlow allows it), and the forward's
// GPU kernel; the backward's GPU kernel is in grad_reverse_kernels_gpu.cc.
#define EIGEN_USE_THREADS

#include <string>

#include "absl/status/status.h"
#include "cc/compute/cpu_paths.h"
#include "cc/compute/grad_reverse_launcher.h"
#include "cc/kernels/grad_reverse_kernels.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/register_types.h"
#include "tensorflow/core/framework/tensor.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace tensorflow {
namespace grad_reverse_kernels {
namespace {

using CPUDevice = Eigen::ThreadPoolDevice;

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

// The framework-free CPU kernel of the path cpu_paths.h chooses (vector
// registers for every type, conversions included), on shards of the intra-op
// pool. Eigen's cost model sizes the shards, as for TensorFlow's own
// element-wise ops, and keeps small tensors on the calling thread.
struct OnCpu {
  template <typename T>
  static void Run(OpKernelContext* ctx, const Tensor& dy, float lambda, Tensor* dx) {
    const std::string path_error = grad_reverse::CpuPathError();
    OP_REQUIRES(ctx, path_error.empty(), absl::FailedPreconditionError(path_error));
    // Times the pass while the streaming-store choice is being measured.
    const grad_reverse::StorePass stores(dy.data(), dx->data(), dy.NumElements() * sizeof(T));
    const grad_reverse::NegScaleFn kernel =
        grad_reverse::NegScaleCpuFunction(KernelDType<T>(), stores.streaming());
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
          kernel(in + first * sizeof(T), out + first * sizeof(T), last - first, scale);
        });
  }
};

#define REGISTER_CPU(T)                                                                      \
  REGISTER_KERNEL_BUILDER(Name("GradReverse").Device(DEVICE_CPU).TypeConstraint<T>("T"),     \
                          GradReverseOp);                                                    \
  REGISTER_KERNEL_BUILDER(Name("GradReverseGrad").Device(DEVICE_CPU).TypeConstraint<T>("T"), \
                          GradReverseGradOp<OnCpu, T>);

TF_CALL_half(REGISTER_CPU);
TF_CALL_bfloat16(REGISTER_CPU);
TF_CALL_float(REGISTER_CPU);
TF_CALL_double(REGISTER_CPU);
#undef REGISTER_CPU

// The forward on the GPU in every build, CUDA compiled or not: its kernel is
// host code (the output is the input's buffer; lambda is in host memory), so
// a GPU model never copies its activations to the CPU and back for it. The
// backward's GPU kernel needs CUDA (grad_reverse_kernels_gpu.cc); without it
// the package's Python gradient uses stock TensorFlow ops, which run on the
// GPU (ops.py).
#define REGISTER_GPU_FORWARD(T)                                                           \
  REGISTER_KERNEL_BUILDER(                                                                \
      Name("GradReverse").Device(DEVICE_GPU).HostMemory("lambda").TypeConstraint<T>("T"), \
      GradReverseOp);

TF_CALL_half(REGISTER_GPU_FORWARD);
TF_CALL_bfloat16(REGISTER_GPU_FORWARD);
TF_CALL_float(REGISTER_GPU_FORWARD);
TF_CALL_double(REGISTER_GPU_FORWARD);
#undef REGISTER_GPU_FORWARD

}  // namespace
}  // namespace grad_reverse_kernels
}  // namespace tensorflow
