// The portable kernels a delegate calls on float buffers (the XNNPACK delegate's run functions,
// backends/xnnpack/node_run.h), each instantiated for Dtypes = types<float> once.
//
// Why a list: those calls pass types<float>, not the operator's dtype list, so every one is an instantiation of its
// own. Compiled inside the delegate they made its translation unit parse twelve kernel families and optimise some
// thirty kernels again, about a third of its compile. In the project's split builds (ETRT_GENERATED_KERNELS_SPLIT
// defined, the kernels coming from the compiled kernel library) this header only declares them, and each operator
// family's generated translation unit (kernels_<family>.cpp) instantiates its own list below, at that family's
// optimisation level. Without the macro (header-only use) it includes the families, and the calls instantiate as
// any template does.
//
// An entry is X(kernel, parameters after the KernelContext&), under the name of the gen/ops/<family>.toml whose
// translation unit instantiates it. A signature that differs from the kernel template's fails that translation unit
// ("explicit instantiation of undefined function template"); an entry under a family with no such file fails the
// link of whatever calls it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "etrt/kernels/kernel.h"

#define ETRT_FLOAT_KERNELS_activation(X)                                                               \
  X(gelu_out, const Tensor&, std::string_view, Tensor&)                                                \
  X(hardswish_out, const Tensor&, Tensor&)                                                             \
  X(leaky_relu_out, const Tensor&, const Scalar&, Tensor&)                                             \
  X(elu_out, const Tensor&, const Scalar&, const Scalar&, const Scalar&, Tensor&)

#define ETRT_FLOAT_KERNELS_arithmetic(X)                                                               \
  X(add_out, const Tensor&, const Tensor&, const Scalar&, Tensor&)                                     \
  X(sub_out, const Tensor&, const Tensor&, const Scalar&, Tensor&)                                     \
  X(mul_out, const Tensor&, const Tensor&, Tensor&)                                                    \
  X(div_out, const Tensor&, const Tensor&, Tensor&)

#define ETRT_FLOAT_KERNELS_conv(X)                                                                     \
  X(convolution_out, const Tensor&, const Tensor&, const Tensor*, std::span<const int64_t>,            \
    std::span<const int64_t>, std::span<const int64_t>, bool, std::span<const int64_t>, int64_t, Tensor&)

#define ETRT_FLOAT_KERNELS_linalg(X)                                                                   \
  X(linear_out, const Tensor&, const Tensor&, const Tensor*, Tensor&)                                  \
  X(bmm_out, const Tensor&, const Tensor&, Tensor&)

#define ETRT_FLOAT_KERNELS_pad(X) X(constant_pad_nd_out, const Tensor&, std::span<const int64_t>, const Scalar&, Tensor&)

#define ETRT_FLOAT_KERNELS_pool(X)                                                                     \
  X(avg_pool2d_out, const Tensor&, std::span<const int64_t>, std::span<const int64_t>,                 \
    std::span<const int64_t>, bool, bool, std::optional<int64_t>, Tensor&)                             \
  X(max_pool2d_with_indices_out, const Tensor&, std::span<const int64_t>, std::span<const int64_t>,    \
    std::span<const int64_t>, std::span<const int64_t>, bool, Tensor&, Tensor&)

#define ETRT_FLOAT_KERNELS_reduce(X)                                                                   \
  X(mean_out, const Tensor&, std::optional<std::span<const int64_t>>, bool, std::optional<ScalarType>, Tensor&)

#define ETRT_FLOAT_KERNELS_shape(X)                                                                    \
  X(cat_out, std::span<Tensor* const>, int64_t, Tensor&)                                               \
  X(permute_copy_out, const Tensor&, std::span<const int64_t>, Tensor&)                                \
  X(slice_copy_tensor_out, const Tensor&, int64_t, std::optional<int64_t>, std::optional<int64_t>,     \
    int64_t, Tensor&)

#define ETRT_FLOAT_KERNELS_softmax(X) X(softmax_out, const Tensor&, int64_t, bool, Tensor&)

#define ETRT_FLOAT_KERNELS_unary(X)                                                                    \
  X(abs_out, const Tensor&, Tensor&)                                                                   \
  X(neg_out, const Tensor&, Tensor&)                                                                   \
  X(floor_out, const Tensor&, Tensor&)                                                                 \
  X(ceil_out, const Tensor&, Tensor&)                                                                  \
  X(sqrt_out, const Tensor&, Tensor&)                                                                  \
  X(rsqrt_out, const Tensor&, Tensor&)                                                                 \
  X(exp_out, const Tensor&, Tensor&)                                                                   \
  X(log_out, const Tensor&, Tensor&)                                                                   \
  X(sin_out, const Tensor&, Tensor&)                                                                   \
  X(cos_out, const Tensor&, Tensor&)                                                                   \
  X(tanh_out, const Tensor&, Tensor&)                                                                  \
  X(minimum_out, const Tensor&, const Tensor&, Tensor&)                                                \
  X(maximum_out, const Tensor&, const Tensor&, Tensor&)                                                \
  X(clamp_out, const Tensor&, const std::optional<Scalar>&, const std::optional<Scalar>&, Tensor&)

#define ETRT_FLOAT_KERNELS_upsample(X)                                                                 \
  X(upsample_bilinear2d_vec_out, const Tensor&, std::optional<std::span<const int64_t>>, bool,         \
    std::optional<std::span<const double>>, Tensor&)

/// Every list, for the declarations.
#define ETRT_FLOAT_KERNELS(X)                                                                          \
  ETRT_FLOAT_KERNELS_activation(X) ETRT_FLOAT_KERNELS_arithmetic(X) ETRT_FLOAT_KERNELS_conv(X)         \
  ETRT_FLOAT_KERNELS_linalg(X) ETRT_FLOAT_KERNELS_pad(X) ETRT_FLOAT_KERNELS_pool(X)                    \
  ETRT_FLOAT_KERNELS_reduce(X) ETRT_FLOAT_KERNELS_shape(X) ETRT_FLOAT_KERNELS_softmax(X)               \
  ETRT_FLOAT_KERNELS_unary(X) ETRT_FLOAT_KERNELS_upsample(X)

/// The explicit instantiation a family's translation unit writes for each entry of its list.
#define ETRT_FLOAT_KERNEL_INSTANTIATE(kernel, ...) template Status kernel<types<float>>(KernelContext&, __VA_ARGS__);

#ifdef ETRT_GENERATED_KERNELS_SPLIT
namespace etrt::kernels {
#define ETRT_FLOAT_KERNEL_DECLARE(kernel, ...)              \
  template <class Dtypes>                                   \
  Status kernel(KernelContext&, __VA_ARGS__);               \
  extern template Status kernel<types<float>>(KernelContext&, __VA_ARGS__);
ETRT_FLOAT_KERNELS(ETRT_FLOAT_KERNEL_DECLARE)
#undef ETRT_FLOAT_KERNEL_DECLARE
}  // namespace etrt::kernels
#else
#include "etrt/kernels/ops/activation.h"
#include "etrt/kernels/ops/arithmetic.h"
#include "etrt/kernels/ops/conv.h"
#include "etrt/kernels/ops/linalg.h"
#include "etrt/kernels/ops/pad.h"
#include "etrt/kernels/ops/pool.h"
#include "etrt/kernels/ops/reduce.h"
#include "etrt/kernels/ops/rearrange.h"
#include "etrt/kernels/ops/shape.h"
#include "etrt/kernels/ops/softmax.h"
#include "etrt/kernels/ops/unary.h"
#include "etrt/kernels/ops/upsample.h"
#endif
