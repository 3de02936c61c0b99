// CPU OpKernels of GradReverse (identity, buffer forwarded) and GradReverseGrad
// (dx = -lambda * dy, in place when TensorFlow allows it), and the forward's
// GPU kernel; the backward's GPU kernel is in grad_reverse_kernels_gpu.cc.
#define EIGEN_USE_THREADS

#include <atomic>
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
// registers for every type, conversions included), split as the stable
// library splits it (parallel_for.h): passes under 2 * kMinShardBytes on the
// calling thread, larger ones on one thread per kMinShardBytes, at most
// intra-op-parallelism many, which take blocks of kBlockBytes in turn.
// Eigen's cost model, which TensorFlow's element-wise ops use, split a 1 MiB
// pass in two and ran it slower than one thread.
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
    const int64_t threads = grad_reverse::ShardCount(bytes, device.numThreads());
    if (threads <= 1) {
      if (n > 0) kernel(in, out, n, scale);
      return;
    }
    // Every thread on the intra-op pool, the caller waiting, as TensorFlow's
    // own element-wise ops run a pass of many blocks: with the caller taking
    // blocks too, the 2M pass measured 0.94-1.06 of the pure-Python version
    // over six processes on a 2-vCPU VM, 0.98-1.15 like this.
    std::atomic<int64_t> next{0};
    Eigen::Barrier barrier(static_cast<unsigned int>(threads));
    const int64_t block = grad_reverse::kBlockBytes / static_cast<int64_t>(sizeof(T));
    for (int64_t t = 0; t < threads; ++t) {
      device.enqueue([&] {
        grad_reverse::TakeBlocks(next, n, block, [&](int64_t first, int64_t last) {
          kernel(in + first * sizeof(T), out + first * sizeof(T), last - first, scale);
        });
        barrier.Notify();
      });
    }
    barrier.Wait();
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
