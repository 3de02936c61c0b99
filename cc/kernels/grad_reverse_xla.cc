// XLA lowerings of GradReverse and GradReverseGrad, for every XLA backend
// (tf.function(jit_compile=True), Keras jit_compile). This is the one file that
// uses the private tf2xla API: a TensorFlow release that changes it breaks here.
//
// Both lower to plain HLO (no custom call), so XLA fuses them with their
// neighbours. See the end of the file for loading after TensorFlow has
// already registered its XLA kernels.
#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include "cc/kernels/tf_compat.h"
#include "tensorflow/compiler/tf2xla/xla_op_kernel.h"
#include "tensorflow/core/framework/kernel_def_builder.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/compiler/tf2xla/xla_op_registry.h"
#include GRAD_REVERSE_XLA_BUILDER_HEADER  // moved in TensorFlow 2.19
#include "xla/shape_util.h"

namespace tensorflow {
namespace {

// Shape is static under XLA; the value is checked only when it is a
// compile-time constant (XLA has no run-time errors: a non-finite lambda held
// in a variable propagates as NaN/Inf instead).
absl::Status CheckLambda(XlaOpKernelContext* ctx) {
  TF_ASSIGN_OR_RETURN(const xla::Shape shape, ctx->InputXlaShape(1));
  if (!xla::ShapeUtil::IsScalar(shape)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "lambda_ must be a scalar (shape []), got shape ", xla::ShapeUtil::HumanString(shape)));
  }
  double value;
  if (ctx->ConstantInputAsFloatScalar(1, &value).ok() && !std::isfinite(value)) {
    return absl::InvalidArgumentError(absl::StrCat("lambda_ must be finite, got ", value));
  }
  return absl::OkStatus();
}

class GradReverseXlaOp : public XlaOpKernel {
 public:
  explicit GradReverseXlaOp(OpKernelConstruction* ctx) : XlaOpKernel(ctx) {}

  void Compile(XlaOpKernelContext* ctx) override {
    OP_REQUIRES_OK(ctx, CheckLambda(ctx));
    ctx->SetOutput(0, ctx->Input(0));
  }
};

// -lambda * dy with the same rounding as the CPU and CUDA kernels: float and
// double multiply by -lambda in their own type; half and bfloat16 multiply in
// float and round once.
class GradReverseGradXlaOp : public XlaOpKernel {
 public:
  explicit GradReverseGradXlaOp(OpKernelConstruction* ctx) : XlaOpKernel(ctx) {}

  void Compile(XlaOpKernelContext* ctx) override {
    OP_REQUIRES_OK(ctx, CheckLambda(ctx));
    const xla::PrimitiveType type = ctx->input_xla_type(0);
    const xla::PrimitiveType compute_type = type == xla::F64 ? xla::F64 : xla::F32;
    xla::XlaOp scale = xla::ConvertElementType(xla::Neg(ctx->Input(1)), compute_type);
    xla::XlaOp dy = xla::ConvertElementType(ctx->Input(0), compute_type);
    ctx->SetOutput(0, xla::ConvertElementType(xla::Mul(dy, scale), type));
  }
};

REGISTER_XLA_OP(Name("GradReverse"), GradReverseXlaOp);
REGISTER_XLA_OP(Name("GradReverseGrad"), GradReverseGradXlaOp);

// Late registration. REGISTER_XLA_OP only records the ops; TensorFlow turns
// the records into kernels on the XLA_*_JIT devices once per process, when it
// first creates its devices (the first op run, not only the first XLA
// compilation). A library loaded after that would have no XLA kernels. In that
// case we add the kernel definitions ourselves, as that step would have.
// Whether it already ran is read from the kernel registry: stock Identity has
// a kernel on each JIT device exactly when it did. The registry cannot be
// queried while the library is being loaded, so the Python loader calls
// GradReverseRegisterLateXlaKernels() right after tf.load_op_library.
bool JitKernelsRegistered(const std::string& device_type) {
  const KernelList kernels = GetRegisteredKernelsForOp("Identity");
  for (const KernelDef& kernel : kernels.kernel()) {
    if (kernel.device_type() == device_type) return true;
  }
  return false;
}

template <typename Kernel>
OpKernel* CreateXlaKernel(OpKernelConstruction* ctx) {
  return new Kernel(ctx);
}

int RegisterJitKernelsIfSealed() {
  int registered = 0;
  const DataType kTypes[] = {DT_HALF, DT_BFLOAT16, DT_FLOAT, DT_DOUBLE};
  struct Op {
    const char* name;
    OpKernel* (*create)(OpKernelConstruction*);
  };
  const Op kOps[] = {{"GradReverse", &CreateXlaKernel<GradReverseXlaOp>},
                     {"GradReverseGrad", &CreateXlaKernel<GradReverseGradXlaOp>}};
  for (const std::string& backend : XlaOpRegistry::BackendNames()) {
    if (!JitKernelsRegistered(backend)) continue;  // TensorFlow will do it
    for (const Op& op : kOps) {
      const KernelDef* def =
          KernelDefBuilder(op.name).Device(backend.c_str()).TypeConstraint("T", kTypes).Build();
      // Registrations live as long as the process, like TensorFlow's own.
      new kernel_factory::OpKernelRegistrar(def, "XlaJitOp", op.create);
      ++registered;
    }
  }
  return registered;
}

}  // namespace
}  // namespace tensorflow

// Returns how many kernels it registered (0 when TensorFlow had not yet
// registered its XLA kernels, which then include ours). Later calls do nothing.
extern "C" int GradReverseRegisterLateXlaKernels() {
  static const int registered = tensorflow::RegisterJitKernelsIfSealed();
  return registered;
}
