// CPU OpKernels of GradReverse (identity, buffer forwarded) and GradReverseGrad
// (dx = -lambda * dy, in place when TensorFlow allows it), and the forward's
// GPU kernel; the backward's GPU kernel is in grad_reverse_kernels_gpu.cc.
#define EIGEN_USE_THREADS

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "cc/compute/cpu_paths.h"
#include "cc/compute/grad_reverse_launcher.h"
#include "cc/compute/parallel_for.h"
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
    float lambda = 0.0f;  // read only to validate it: a bad lambda fails here, as in the gradient
    OP_REQUIRES_OK(ctx, ReadLambda(ctx, &lambda));
    ctx->set_output(0, ctx->input(0));
  }
};

// The framework-free CPU kernel of the path cpu_paths.h chooses (vector
// registers for every type, conversions included), on the intra-op pool as
// the stable library shards it (parallel_for.h): passes under kMinShardBytes
// on the calling thread, larger ones in one shard per kMinShardBytes, at most
// one per thread. Eigen's cost model, which TensorFlow's element-wise ops use,
// split a 1 MiB pass in two and ran it slower than one thread.
struct OnCpu {
  template <typename T>
  static void Run(OpKernelContext* ctx, const Tensor& dy, float lambda, Tensor* dx) {
    const std::string path_error = grad_reverse::CpuPathError();
    OP_REQUIRES(ctx, path_error.empty(), absl::FailedPreconditionError(path_error));
    const int64_t n = dy.NumElements();
    const int64_t bytes = n * static_cast<int64_t>(sizeof(T));
    // Times the pass while the streaming-store choice is being measured.
    const grad_reverse::StorePass stores(dy.data(), dx->data(), bytes);
    const grad_reverse::NegScaleFn kernel =
        grad_reverse::NegScaleCpuFunction(KernelDType<T>(), stores.streaming());
    const float scale = -lambda;
    const char* in = static_cast<const char*>(dy.data());
    char* out = static_cast<char*>(dx->data());
    const CPUDevice& device = ctx->eigen_device<CPUDevice>();
    const int64_t shards = grad_reverse::ShardCount(bytes, device.numThreads());
    if (shards <= 1) {
      if (n > 0) kernel(in, out, n, scale);
      return;
    }
    // Equal shards, each starting on a 64-byte boundary of the buffer.
    constexpr int64_t kLine = 64 / sizeof(T);
    const int64_t shard = ((n + shards - 1) / shards + kLine - 1) / kLine * kLine;
    // One unit per shard, each costing a whole shard's bytes, so that Eigen
    // gives every shard a task of its own (the caller runs one).
    const double shard_bytes = static_cast<double>(shard * sizeof(T));
    device.parallelFor(shards, Eigen::TensorOpCost(shard_bytes, shard_bytes, shard_bytes),
                       [=](Eigen::Index first, Eigen::Index last) {
                         for (Eigen::Index s = first; s < last; ++s) {
                           const int64_t begin = s * shard;
                           const int64_t end = std::min(n, begin + shard);
                           if (begin < end) {
                             kernel(in + begin * sizeof(T), out + begin * sizeof(T), end - begin,
                                    scale);
                           }
                         }
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
