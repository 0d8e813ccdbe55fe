// Pairwise p-norm distances: _cdist_forward (every row of x1 against every row of x2, batched with broadcasting)
// and _pdist_forward (the upper triangle of the row-by-row distances of one matrix).
//
// Distances accumulate in double and are computed directly (never through the |x|^2 + |y|^2 - 2xy matrix product
// torch may use for large p = 2 inputs), so every compute_mode gives the same, more accurate result.
#pragma once

#include <cmath>
#include <limits>

#include "etrt/kernels/util/movement_util.h"
#include "etrt/kernels/util/pointwise_util.h"

namespace etrt::kernels {

namespace dist_detail {

enum class Norm { Zero, One, Two, Inf, General };

inline Norm classify(double p) {
  if (p == 0.0) return Norm::Zero;
  if (p == 1.0) return Norm::One;
  if (p == 2.0) return Norm::Two;
  if (std::isinf(p)) return Norm::Inf;
  return Norm::General;
}

/// The distance between two strided rows of m elements. p = 0 counts differing entries (a NaN difference makes
/// it NaN); p = inf is the largest |difference|, where torch's cdist skips NaN differences and pdist propagates
/// them (`NanMax`).
template <Norm K, bool NanMax, class T>
inline double row_distance(const T* a, int64_t as, const T* b, int64_t bs, int64_t m, double p) {
  double acc = 0;
  for (int64_t i = 0; i < m; ++i) {
    const double d = std::fabs(static_cast<double>(a[i * as]) - static_cast<double>(b[i * bs]));
    if constexpr (K == Norm::Zero) {
      acc += std::isnan(d) ? d : (d != 0 ? 1.0 : 0.0);
    } else if constexpr (K == Norm::One) {
      acc += d;
    } else if constexpr (K == Norm::Two) {
      acc += d * d;
    } else if constexpr (K == Norm::Inf) {
      if constexpr (NanMax) acc = (std::isnan(d) || acc < d) ? d : acc;
      else acc = acc < d ? d : acc;
    } else {
      acc += std::pow(d, p);
    }
  }
  if constexpr (K == Norm::Two) return std::sqrt(acc);
  else if constexpr (K == Norm::General) return std::pow(acc, 1.0 / p);
  else return acc;
}

/// Calls body.template operator()<K>() with the Norm of p as a compile-time value.
template <class F>
inline auto with_norm(double p, F&& body) {
  switch (classify(p)) {
    case Norm::Zero: return body.template operator()<Norm::Zero>();
    case Norm::One: return body.template operator()<Norm::One>();
    case Norm::Two: return body.template operator()<Norm::Two>();
    case Norm::Inf: return body.template operator()<Norm::Inf>();
    default: return body.template operator()<Norm::General>();
  }
}

inline Status check_p(std::string_view op, double p) {
  if (!(p >= 0.0)) return fail(Error::InvalidArgument, op, ": p must be non-negative, got ", p);
  return {};
}

}  // namespace dist_detail

/// _cdist_forward.out: x1 [B..., P, M], x2 [B'..., R, M] -> out [broadcast(B, B')..., P, R].
template <class Dtypes>
Status cdist_forward_out(KernelContext& ctx, const Tensor& x1, const Tensor& x2, double p,
                         std::optional<int64_t> compute_mode, Tensor& out) {
  constexpr std::string_view op = "_cdist_forward.out";
  if (x1.dim() < 2 || x2.dim() < 2)
    return fail(Error::InvalidArgument, op, ": x1 and x2 must have at least 2 dims, got ", x1.describe(), " and ",
                x2.describe());
  const int64_t M = x1.size(x1.dim() - 1);
  if (x2.size(x2.dim() - 1) != M)
    return fail(Error::InvalidArgument, op, ": x1 and x2 must have the same number of columns, got ", x1.describe(),
                " and ", x2.describe());
  if (x1.dtype() != x2.dtype())
    return fail(Error::InvalidArgument, op, ": x1 and x2 must have the same dtype, got ", name(x1.dtype()), " and ",
                name(x2.dtype()));
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, x1, out));
  ETRT_CHECK_OK(dist_detail::check_p(op, p));
  if (compute_mode && (*compute_mode < 0 || *compute_mode > 2))
    return fail(Error::InvalidArgument, op, ": compute_mode must be 0, 1 or 2, got ", *compute_mode);
  ETRT_TRY(Shape batch, broadcast_shapes(op, x1.sizes().first(static_cast<size_t>(x1.dim() - 2)),
                                         x2.sizes().first(static_cast<size_t>(x2.dim() - 2))));
  const int64_t P = x1.size(x1.dim() - 2), R = x2.size(x2.dim() - 2);
  if (batch.rank + 2 > kMaxDims) return fail(Error::NotSupported, op, ": output rank exceeds ", kMaxDims);
  Shape os = batch;
  os.sizes[os.rank++] = P;
  os.sizes[os.rank++] = R;
  ETRT_CHECK_OK(ctx.resize(op, out, os.span()));
  if (out.numel() == 0) return {};
  // Batch strides of each operand over the broadcast batch shape (0 where an operand broadcasts).
  std::array<std::array<int64_t, kMaxDims>, 3> bst{};
  for (int k = 0; k < 2; ++k) {
    const Tensor& t = k == 0 ? x1 : x2;
    const int off = batch.rank - (t.dim() - 2);
    for (int d = 0; d < t.dim() - 2; ++d) bst[k][off + d] = t.size(d) == 1 ? 0 : t.stride(d);
  }
  for (int d = 0; d < batch.rank; ++d) bst[2][d] = out.stride(d);
  const int r1 = x1.dim(), r2 = x2.dim(), ro = out.dim();
  const int64_t s1p = x1.stride(r1 - 2), s1m = x1.stride(r1 - 1), s2r = x2.stride(r2 - 2), s2m = x2.stride(r2 - 1);
  const int64_t sop = out.stride(ro - 2), sor = out.stride(ro - 1);
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    const T* a = x1.data_as<const T>();
    const T* b = x2.data_as<const T>();
    T* o = out.data_as<T>();
    dist_detail::with_norm(p, [&]<dist_detail::Norm K>() {
      for_each_offset<3>(batch, bst, [&](const std::array<int64_t, 3>& off) {
        for (int64_t i = 0; i < P; ++i)
          for (int64_t j = 0; j < R; ++j)
            o[off[2] + i * sop + j * sor] = static_cast<T>(dist_detail::row_distance<K, false>(
                a + off[0] + i * s1p, s1m, b + off[1] + j * s2r, s2m, M, p));
      });
    });
    return {};
  });
}

/// _pdist_forward.out: self [N, M] -> out [N * (N - 1) / 2], the distances of rows (i, j), i < j, in row-major
/// order. Any dim order is read through strides (torch requires a contiguous input).
template <class Dtypes>
Status pdist_forward_out(KernelContext& ctx, const Tensor& self, double p, Tensor& out) {
  constexpr std::string_view op = "_pdist_forward.out";
  if (self.dim() != 2) return fail(Error::InvalidArgument, op, ": expected a 2-D input, got ", self.describe());
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  ETRT_CHECK_OK(dist_detail::check_p(op, p));
  const int64_t N = self.size(0), M = self.size(1);
  if (N > 1 && N - 1 > std::numeric_limits<int64_t>::max() / N)
    return fail(Error::InvalidArgument, op, ": ", N, " rows give more pairs than can be counted");
  const int64_t pairs[1] = {N <= 1 ? 0 : N * (N - 1) / 2};
  ETRT_CHECK_OK(ctx.resize(op, out, pairs));
  if (pairs[0] == 0) return {};
  const int64_t sn = self.stride(0), sm = self.stride(1), so = out.stride(0);
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    const T* x = self.data_as<const T>();
    T* o = out.data_as<T>();
    dist_detail::with_norm(p, [&]<dist_detail::Norm K>() {
      int64_t k = 0;
      for (int64_t i = 0; i < N; ++i)
        for (int64_t j = i + 1; j < N; ++j, ++k)
          o[k * so] = static_cast<T>(dist_detail::row_distance<K, true>(x + i * sn, sm, x + j * sn, sm, M, p));
    });
    return {};
  });
}

}  // namespace etrt::kernels
