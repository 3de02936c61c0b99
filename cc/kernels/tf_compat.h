// Differences between the TensorFlow releases this library compiles against
// (2.15 to 2.21), decided by probing the headers, in this one place.
//
// A header that moved is chosen with __has_include, so the kernels include
// the names defined here and never test versions themselves. The CMake module
// cmake/TensorFlowFeatures.cmake compiles this header alone to decide which
// parts of the library to build; a feature that is absent from a release is
// left out of the build and recorded in the build record, not #if'd away in
// the kernels.
#ifndef GRAD_REVERSE_CC_KERNELS_TF_COMPAT_H_
#define GRAD_REVERSE_CC_KERNELS_TF_COMPAT_H_

// XLA's client builder: xla/hlo/builder/ since TensorFlow 2.19,
// xla/client/ in 2.15 to 2.18.
#if __has_include("xla/hlo/builder/xla_builder.h")
#define GRAD_REVERSE_XLA_BUILDER_HEADER "xla/hlo/builder/xla_builder.h"
#elif __has_include("xla/client/xla_builder.h")
#define GRAD_REVERSE_XLA_BUILDER_HEADER "xla/client/xla_builder.h"
#endif

// The XLA kernels need the tf2xla kernel API and the builder.
#if defined(GRAD_REVERSE_XLA_BUILDER_HEADER) && \
    __has_include("tensorflow/compiler/tf2xla/xla_op_kernel.h")
#define GRAD_REVERSE_TF_HAS_XLA_HEADERS 1
#else
#define GRAD_REVERSE_TF_HAS_XLA_HEADERS 0
#endif

// The GPU OpKernel reaches its CUDA stream through StreamExecutor's Stream.
#if __has_include("xla/stream_executor/stream.h")
#define GRAD_REVERSE_STREAM_HEADER "xla/stream_executor/stream.h"
#define GRAD_REVERSE_TF_HAS_STREAM_HEADER 1
#else
#define GRAD_REVERSE_TF_HAS_STREAM_HEADER 0
#endif

#endif  // GRAD_REVERSE_CC_KERNELS_TF_COMPAT_H_
