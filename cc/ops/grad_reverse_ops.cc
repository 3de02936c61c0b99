// Op registration for the gradient reversal layer (Ganin & Lempitsky, 2015).
// The OpKernels are in cc/kernels/ (CPU, GPU, XLA).
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tensorflow {
namespace {

// `x` passes through unchanged (unknown rank stays unknown); `lambda` must be
// a scalar, which graph construction can already reject.
absl::Status UnchangedShapeScalarLambda(shape_inference::InferenceContext* c) {
  shape_inference::ShapeHandle unused;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 0, &unused));
  return shape_inference::UnchangedShape(c);
}

}  // namespace

REGISTER_OP("GradReverse")
    .Input("x: T")
    .Input("lambda: float")
    .Output("y: T")
    .Attr("T: {half, bfloat16, float, double}")
    .SetShapeFn(UnchangedShapeScalarLambda)
    .Doc(R"doc(
Gradient reversal layer: the identity in the forward pass.

The gradient registered by the `grad_reverse` Python package is
`dx = -lambda * dy` (GradReverseGrad); `lambda` gets no gradient.

x: the features to pass through (and whose gradient is reversed).
lambda: scalar, finite; scales the reversed gradient.
y: `x`, sharing its buffer.
)doc");

REGISTER_OP("GradReverseGrad")
    .Input("dy: T")
    .Input("lambda: float")
    .Output("dx: T")
    .Attr("T: {half, bfloat16, float, double}")
    .SetShapeFn(UnchangedShapeScalarLambda)
    .Doc(R"doc(
Backward of GradReverse: `dx = -lambda * dy`.

half and bfloat16 are computed in float and rounded once. Its own gradient is
GradReverseGrad again, so second-order gradients work.

dy: the incoming gradient.
lambda: scalar, finite.
dx: `-lambda * dy`, written into `dy`'s buffer when TensorFlow allows it.
)doc");

}  // namespace tensorflow
