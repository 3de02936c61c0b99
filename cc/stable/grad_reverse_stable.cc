// The stable-ABI op library: GradReverse and GradReverseGrad registered
// through TensorFlow's C API only (tensorflow/c/ops.h, kernels.h, tf_tensor.h).
//
// The C++ library (cc/ops/, cc/kernels/) is bound to the C++ ABI of the one TensorFlow
// release it was compiled against (its Abseil moves every release); this one
// calls nothing but the C functions those headers declare, so one build loads
// into every TensorFlow from the oldest supported release on, newer ones
// included. What the C API cannot give, it leaves out (docs/building.md):
//   - XLA kernels (C++ only): inside XLA the package runs its pure-Python
//     version, which XLA compiles to the same HLO;
//   - a GPU backward kernel (the C API gives no stream on TensorFlow's own GPU
//     device): on a GPU the package's stock-op backward runs;
//   - the intra-op thread pool: large CPU passes use the library's own few
//     threads (cc/compute/parallel_for.h).
// Same op definitions (names, inputs, attrs, shape function) and the same
// error messages as cc/ops/ and cc/kernels/, so a graph or SavedModel made
// with either runs with the other.
#include <cmath>
#include <cstdint>
#include <string>

#include "cc/kernels/c_export.h"
#include "cc/compute/cpu_paths.h"
#include "cc/compute/grad_reverse_launcher.h"
#include "cc/compute/parallel_for.h"
#include "tensorflow/c/kernels.h"
#include "tensorflow/c/ops.h"
#include "tensorflow/c/tf_status.h"
#include "tensorflow/c/tf_tensor.h"

namespace {

constexpr const char* kTypeAttr = "T: {half, bfloat16, float, double}";
constexpr TF_DataType kTypes[] = {TF_HALF, TF_BFLOAT16, TF_FLOAT, TF_DOUBLE};

// A TF_Status that deletes itself.
class Status {
 public:
  Status() : status_(TF_NewStatus()) {}
  ~Status() { TF_DeleteStatus(status_); }
  Status(const Status&) = delete;
  Status& operator=(const Status&) = delete;
  TF_Status* get() const { return status_; }
  bool ok() const { return TF_GetCode(status_) == TF_OK; }

 private:
  TF_Status* status_;
};

// ------------------------------------------------------ op definitions ----

// `x` passes through unchanged (unknown rank stays unknown); `lambda` must be
// a scalar, which graph construction can already reject.
void UnchangedShapeScalarLambda(TF_ShapeInferenceContext* ctx, TF_Status* status) {
  TF_ShapeHandle* lambda = TF_NewShapeHandle();
  TF_ShapeHandle* scalar = TF_NewShapeHandle();
  TF_ShapeInferenceContextGetInput(ctx, 1, lambda, status);
  if (TF_GetCode(status) == TF_OK) {
    TF_ShapeInferenceContextWithRank(ctx, lambda, 0, scalar, status);
  }
  TF_DeleteShapeHandle(scalar);
  TF_DeleteShapeHandle(lambda);
  if (TF_GetCode(status) != TF_OK) return;
  TF_ShapeHandle* x = TF_NewShapeHandle();
  TF_ShapeInferenceContextGetInput(ctx, 0, x, status);
  if (TF_GetCode(status) == TF_OK) {
    TF_ShapeInferenceContextSetOutput(ctx, 0, x, status);
  }
  TF_DeleteShapeHandle(x);
}

// Op definitions as in cc/ops/grad_reverse_ops.cc.
bool RegisterOp(const char* name, const char* input, const char* output) {
  TF_OpDefinitionBuilder* builder = TF_NewOpDefinitionBuilder(name);
  TF_OpDefinitionBuilderAddInput(builder, input);
  TF_OpDefinitionBuilderAddInput(builder, "lambda: float");
  TF_OpDefinitionBuilderAddOutput(builder, output);
  TF_OpDefinitionBuilderAddAttr(builder, kTypeAttr);
  TF_OpDefinitionBuilderSetShapeInferenceFunction(builder, &UnchangedShapeScalarLambda);
  Status status;
  TF_RegisterOpDefinition(builder, status.get());  // takes the builder
  return status.ok();
}

// -------------------------------------------------------------- kernels ----

void Fail(TF_OpKernelContext* ctx, TF_Code code, const std::string& message) {
  Status status;
  TF_SetStatus(status.get(), code, message.c_str());
  TF_OpKernelContext_Failure(ctx, status.get());
}

// Passes a failed status on to the context; true if it did.
bool Failed(TF_OpKernelContext* ctx, const Status& status) {
  if (status.ok()) return false;
  TF_OpKernelContext_Failure(ctx, status.get());
  return true;
}

std::string ShapeString(const TF_Tensor* tensor) {
  std::string text = "[";
  for (int i = 0; i < TF_NumDims(tensor); ++i) {
    if (i > 0) text += ",";
    text += std::to_string(TF_Dim(tensor, i));
  }
  return text + "]";
}

std::string FloatString(float value) {  // as absl::StrCat writes a non-finite float
  if (std::isnan(value)) return "nan";
  return value > 0 ? "inf" : "-inf";
}

// `lambda` (input 1), a host-memory float scalar on every device; false after
// failing the context, with the C++ library's messages. A NaN or Inf would
// silently poison every weight upstream of the layer, so it is rejected.
bool ReadLambda(TF_OpKernelContext* ctx, float* lambda) {
  Status status;
  TF_Tensor* tensor = nullptr;
  TF_GetInput(ctx, 1, &tensor, status.get());
  if (Failed(ctx, status)) return false;
  bool ok = false;
  if (TF_NumDims(tensor) != 0) {
    Fail(ctx, TF_INVALID_ARGUMENT,
         "lambda_ must be a scalar (shape []), got shape " + ShapeString(tensor));
  } else {
    *lambda = *static_cast<const float*>(TF_TensorData(tensor));
    ok = std::isfinite(*lambda);
    if (!ok) {
      Fail(ctx, TF_INVALID_ARGUMENT, "lambda_ must be finite, got " + FloatString(*lambda));
    }
  }
  TF_DeleteTensor(tensor);
  return ok;
}

// Forward: the identity. The output shares the input's buffer (TF_SetOutput
// of the input tensor), like Identity. Host code on every device.
void GradReverseCompute(void*, TF_OpKernelContext* ctx) {
  float lambda;
  if (!ReadLambda(ctx, &lambda)) return;
  Status status;
  TF_Tensor* x = nullptr;
  TF_GetInput(ctx, 0, &x, status.get());
  if (Failed(ctx, status)) return;
  TF_SetOutput(ctx, 0, x, status.get());
  TF_DeleteTensor(x);
  Failed(ctx, status);
}

// The compute kernel for `type`, or false. The kernels are registered for
// kTypes only, so false means a registration this switch does not know of
// (TF_DataType grows: TensorFlow 2.23 appends TF_FLOAT8_E8M0FNU): the caller
// fails the op, rather than scaling the bytes as if they were another type.
bool KernelDType(TF_DataType type, grad_reverse::DType* dtype) {
  switch (type) {
    case TF_HALF:
      *dtype = grad_reverse::DType::kHalf;
      return true;
    case TF_BFLOAT16:
      *dtype = grad_reverse::DType::kBFloat16;
      return true;
    case TF_FLOAT:
      *dtype = grad_reverse::DType::kFloat;
      return true;
    case TF_DOUBLE:
      *dtype = grad_reverse::DType::kDouble;
      return true;
    default:
      return false;
  }
}

// Backward: dx = -lambda * dy, in dy's buffer when TensorFlow allows it.
void GradReverseGradCpuCompute(void*, TF_OpKernelContext* ctx) {
  float lambda;
  if (!ReadLambda(ctx, &lambda)) return;
  const std::string path_error = grad_reverse::CpuPathError();
  if (!path_error.empty()) {
    Fail(ctx, TF_FAILED_PRECONDITION, path_error);
    return;
  }
  Status status;
  TF_Tensor* dy = nullptr;
  TF_GetInput(ctx, 0, &dy, status.get());
  if (Failed(ctx, status)) return;
  const int rank = TF_NumDims(dy);
  int64_t dims[64];  // TensorFlow's own limit on a tensor's rank (TensorShape)
  for (int i = 0; i < rank && i < 64; ++i) dims[i] = TF_Dim(dy, i);
  const int64_t n = TF_TensorElementCount(dy);
  const TF_DataType type = TF_TensorType(dy);
  const char* in = static_cast<const char*>(TF_TensorData(dy));
  // The context still holds dy, so `in` stays valid; but a TF_Tensor of ours
  // on its buffer is one reference too many to forward it.
  TF_DeleteTensor(dy);
  grad_reverse::DType dtype;
  if (!KernelDType(type, &dtype)) {
    Fail(ctx, TF_INTERNAL,
         "GradReverseGrad's stable-ABI CPU kernel has no code for TF_DataType " +
             std::to_string(static_cast<int>(type)) +
             "; it computes half, bfloat16, float and double only");
    return;
  }
  const int candidate = 0;
  TF_Tensor* dx =
      TF_ForwardInputOrAllocateOutput(ctx, &candidate, 1, 0, dims, rank, nullptr, status.get());
  if (Failed(ctx, status)) return;
  if (n > 0) {
    const int64_t size = TF_DataTypeSize(type);
    char* out = static_cast<char*>(TF_TensorData(dx));
    // Times the pass while the streaming-store choice is being measured.
    const grad_reverse::StorePass stores(in, out, n * size);
    const grad_reverse::NegScaleFn kernel =
        grad_reverse::NegScaleCpuFunction(dtype, stores.streaming());
    const float scale = -lambda;
    // Passes under 2 * kMinShardBytes stay on the caller (parallel_for.h);
    // larger ones are taken in blocks of kBlockBytes by the threads.
    grad_reverse::ParallelFor(n, grad_reverse::kBlockBytes / size,
                              grad_reverse::kMinShardBytes / size,
                              [=](int64_t first, int64_t last) {
                                kernel(in + first * size, out + first * size, last - first, scale);
                              });
  }
  TF_DeleteTensor(dx);
}

bool RegisterKernel(const char* op, const char* device, TF_DataType type,
                    void (*compute)(void*, TF_OpKernelContext*)) {
  const bool gpu = std::string(device) == "GPU";
  TF_KernelBuilder* builder = TF_NewKernelBuilder(op, device, nullptr, compute, nullptr);
  Status status;
  TF_KernelBuilder_TypeConstraint(builder, "T", type, status.get());
  if (!status.ok()) {
    TF_DeleteKernelBuilder(builder);
    return false;
  }
  // lambda is read on the host (on the CPU all memory is).
  if (gpu) TF_KernelBuilder_HostMemory(builder, "lambda");
  TF_RegisterKernelBuilder(op, builder, status.get());  // takes the builder
  return status.ok();
}

// What registration found wrong, for GradReverseStableRegistrationError().
const char* registration_error = nullptr;

// Registered when the library is loaded (tf.load_op_library), as the C++
// library's registration macros do (cc/ops/, cc/kernels/).
const bool registered = [] {
  if (!RegisterOp("GradReverse", "x: T", "y: T") ||
      !RegisterOp("GradReverseGrad", "dy: T", "dx: T")) {
    registration_error = "an op definition was refused";
    return false;
  }
  for (TF_DataType type : kTypes) {
    // The forward on the CPU and the GPU: host code that only passes the
    // buffer on. The backward on the CPU only (see the top of this file).
    if (!RegisterKernel("GradReverse", "CPU", type, &GradReverseCompute) ||
        !RegisterKernel("GradReverse", "GPU", type, &GradReverseCompute) ||
        !RegisterKernel("GradReverseGrad", "CPU", type, &GradReverseGradCpuCompute)) {
      registration_error = "a kernel was refused";
      return false;
    }
  }
  return true;
}();

}  // namespace

// For the loader, through ctypes: null when both ops and every kernel were
// registered, else what was refused.
GRAD_REVERSE_EXPORT const char* GradReverseStableRegistrationError() {
  return registered ? nullptr : registration_error;
}

// For the loader: at most this many threads work on one CPU backward pass
// (the package passes TensorFlow's intra-op parallelism when it is set).
GRAD_REVERSE_EXPORT void GradReverseSetMaxThreads(int threads) {
  grad_reverse::SetMaxThreads(threads);
}

GRAD_REVERSE_EXPORT int GradReverseMaxThreads() { return grad_reverse::MaxThreads(); }
