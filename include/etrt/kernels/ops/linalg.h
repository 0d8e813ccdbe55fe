// Matrix products: mm, bmm, addmm, linear. float/double run the blocked GEMM (util/gemm.h) directly on the
// operands' strides; Half/BFloat16 convert to float buffers first; integer types use the generic loop (wrapping like
// torch's integer matmul).
#pragma once

#include <type_traits>
#include <vector>

#include "etrt/kernels/util/gemm.h"
#include "etrt/kernels/util/movement_util.h"

namespace etrt::kernels {

namespace linalg_detail {

template <class T>
using Mat = gemm::MatRef<T>;

/// C = alpha * A * B + beta * C for the stored type T.
template <class T>
inline void matmul(int64_t m, int64_t n, int64_t k, double alpha, Mat<T> A, Mat<T> B, double beta, T* c,
                   int64_t rsc, int64_t csc) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    gemm::gemm<T>(m, n, k, static_cast<T>(alpha), A, B, static_cast<T>(beta), c, rsc, csc);
  } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n)), cc(static_cast<size_t>(m * n));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = 0; p < k; ++p) a[i * k + p] = static_cast<float>(A.data[i * A.rs + p * A.cs]);
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j) b[p * n + j] = static_cast<float>(B.data[p * B.rs + j * B.cs]);
    if (beta != 0)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) cc[i * n + j] = static_cast<float>(c[i * rsc + j * csc]);
    gemm::gemm<float>(m, n, k, static_cast<float>(alpha), {a.data(), k, 1}, {b.data(), n, 1},
                      static_cast<float>(beta), cc.data(), n, 1);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * rsc + j * csc] = T(cc[i * n + j]);
  } else if constexpr (std::is_same_v<T, bool>) {
    gemm::gemm_generic<T, int64_t>(m, n, k, static_cast<int64_t>(alpha != 0), A, B, static_cast<int64_t>(beta != 0),
                                   c, rsc, csc);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * rsc + j * csc] = c[i * rsc + j * csc] != 0;
  } else {
    // Integers: accumulate in 64-bit; the narrowing store wraps like torch's integer matmul.
    gemm::gemm_generic<T, int64_t>(m, n, k, static_cast<int64_t>(alpha), A, B, static_cast<int64_t>(beta), c, rsc,
                                   csc);
  }
}

template <class T>
inline Mat<T> mat_of(const Tensor& t, int r, int c, int64_t offset = 0) {
  return {t.data_as<T>() + offset, t.stride(r), t.stride(c)};
}

inline Status check_same(std::string_view op, const Tensor& a, const Tensor& out, std::string_view what) {
  if (a.dtype() != out.dtype())
    return fail(Error::InvalidArgument, op, ": ", what, " dtype ", name(a.dtype()), " != output dtype ",
                name(out.dtype()));
  return {};
}

}  // namespace linalg_detail

template <class Dtypes>
Status mm_out(KernelContext& ctx, const Tensor& self, const Tensor& mat2, Tensor& out) {
  constexpr std::string_view op = "mm.out";
  ETRT_CHECK_OK(linalg_detail::check_same(op, self, out, "self"));
  ETRT_CHECK_OK(linalg_detail::check_same(op, mat2, out, "mat2"));
  if (self.dim() != 2 || mat2.dim() != 2 || self.size(1) != mat2.size(0))
    return fail(Error::InvalidArgument, op, ": cannot multiply ", self.describe(), " by ", mat2.describe(),
                ", expected [n, k] x [k, m]");
  const std::array<int64_t, 2> s{self.size(0), mat2.size(1)};
  ETRT_CHECK_OK(ctx.resize(op, out, s));
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    linalg_detail::matmul<T>(s[0], s[1], self.size(1), 1.0, linalg_detail::mat_of<T>(self, 0, 1),
                             linalg_detail::mat_of<T>(mat2, 0, 1), 0.0, out.data_as<T>(), out.stride(0), out.stride(1));
    return Status{};
  });
}

template <class Dtypes>
Status bmm_out(KernelContext& ctx, const Tensor& self, const Tensor& mat2, Tensor& out) {
  constexpr std::string_view op = "bmm.out";
  ETRT_CHECK_OK(linalg_detail::check_same(op, self, out, "self"));
  ETRT_CHECK_OK(linalg_detail::check_same(op, mat2, out, "mat2"));
  if (self.dim() != 3 || mat2.dim() != 3 || self.size(0) != mat2.size(0) || self.size(2) != mat2.size(1))
    return fail(Error::InvalidArgument, op, ": cannot multiply ", self.describe(), " by ", mat2.describe(),
                ", expected [b, n, k] x [b, k, m]");
  const std::array<int64_t, 3> s{self.size(0), self.size(1), mat2.size(2)};
  ETRT_CHECK_OK(ctx.resize(op, out, s));
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    const auto products = [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b)
        linalg_detail::matmul<T>(s[1], s[2], self.size(2), 1.0,
                                 linalg_detail::mat_of<T>(self, 1, 2, b * self.stride(0)),
                                 linalg_detail::mat_of<T>(mat2, 1, 2, b * mat2.stride(0)), 0.0,
                                 out.data_as<T>() + b * out.stride(0), out.stride(1), out.stride(2));
    };
    // Products too small for the GEMM to split (an attention head's 50 x 64 x 50) are split by batch instead: one
    // thread ran vit_b_32's twelve heads in turn at a fifth of a core's rate.
    const int64_t work = s[1] * s[2] * self.size(2);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      if (s[0] > 1 && work < gemm::kParallelWork && work * s[0] >= min_parallel_work()) {
        parallel_for(s[0], 1, products);
        return Status{};
      }
    }
    products(0, s[0]);
    return Status{};
  });
}

namespace linalg_detail {
/// out (rows x cols, strides rso/cso) <- broadcast of `bias` (rank <= 2) converted to out's dtype.
template <class Dtypes>
inline Status broadcast_into(std::string_view op, const Tensor& bias, Tensor& out) {
  Shape os = shape_of(out.sizes());
  if (bias.dim() > out.dim()) return fail(Error::InvalidArgument, op, ": bias ", bias.describe(), " has too many dims");
  for (int i = 0; i < bias.dim(); ++i) {
    const int64_t b = bias.size(i), o = os.sizes[out.dim() - bias.dim() + i];
    if (b != o && b != 1)
      return fail(Error::InvalidArgument, op, ": ", bias.describe(), " cannot be broadcast to ", shape_str(out.sizes()));
  }
  const auto bs = broadcast_strides(bias, os);
  mv::View src;
  src.data = static_cast<char*>(bias.data());
  for (int i = 0; i < out.dim(); ++i) src.push(out.size(i), bs[i]);
  return mv::convert_views<Dtypes>(op, mv::view_of(out), out.dtype(), src, bias.dtype());
}
}  // namespace linalg_detail

template <class Dtypes>
Status addmm_out(KernelContext& ctx, const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta,
                 const Scalar& alpha, Tensor& out) {
  constexpr std::string_view op = "addmm.out";
  ETRT_CHECK_OK(linalg_detail::check_same(op, mat1, out, "mat1"));
  ETRT_CHECK_OK(linalg_detail::check_same(op, mat2, out, "mat2"));
  if (mat1.dim() != 2 || mat2.dim() != 2 || mat1.size(1) != mat2.size(0))
    return fail(Error::InvalidArgument, op, ": cannot multiply ", mat1.describe(), " by ", mat2.describe(),
                ", expected [n, k] x [k, m]");
  const std::array<int64_t, 2> s{mat1.size(0), mat2.size(1)};
  ETRT_CHECK_OK(ctx.resize(op, out, s));
  const double b = beta.to_double(), a = alpha.to_double();
  if (b != 0) {
    ETRT_CHECK_OK(linalg_detail::broadcast_into<Dtypes>(op, self, out));
  } else {  // still validate the shape of self
    auto bs = broadcast_shapes(op, self.sizes(), out.sizes());
    if (!bs || bs->rank != 2 || bs->sizes[0] != s[0] || bs->sizes[1] != s[1])
      return fail(Error::InvalidArgument, op, ": ", self.describe(), " cannot be broadcast to ", shape_str(s));
  }
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    linalg_detail::matmul<T>(s[0], s[1], mat1.size(1), a, linalg_detail::mat_of<T>(mat1, 0, 1),
                             linalg_detail::mat_of<T>(mat2, 0, 1), b, out.data_as<T>(), out.stride(0), out.stride(1));
    return Status{};
  });
}

namespace linalg_detail {
/// Whether dims [0, rank-1) of t collapse into one with a single stride; sets rows and that stride.
inline bool collapse_rows(const Tensor& t, int64_t& rows, int64_t& rs) {
  rows = 1;
  rs = 0;
  int64_t expect = -1;
  for (int i = t.dim() - 2; i >= 0; --i) {
    if (t.size(i) == 1) continue;
    if (expect >= 0 && t.stride(i) != expect) return false;
    if (expect < 0) rs = t.stride(i);
    expect = t.stride(i) * t.size(i);
    rows *= t.size(i);
  }
  if (rows == 1 && t.dim() >= 2) rs = t.stride(t.dim() - 2);
  return true;
}
}  // namespace linalg_detail

template <class Dtypes>
Status linear_out(KernelContext& ctx, const Tensor& input, const Tensor& weight, const Tensor* bias, Tensor& out) {
  constexpr std::string_view op = "linear.out";
  ETRT_CHECK_OK(linalg_detail::check_same(op, input, out, "input"));
  ETRT_CHECK_OK(linalg_detail::check_same(op, weight, out, "weight"));
  if (input.dim() < 1 || weight.dim() < 1 || weight.dim() > 2 || input.size(input.dim() - 1) != weight.size(weight.dim() - 1))
    return fail(Error::InvalidArgument, op, ": input ", input.describe(), " and weight ", weight.describe(),
                " do not match, expected [..., in] and [out, in]");
  const int64_t K = input.size(input.dim() - 1);
  const int64_t N = weight.dim() == 2 ? weight.size(0) : 1;
  Shape s = shape_of(input.sizes());
  if (weight.dim() == 2) s.sizes[s.rank - 1] = N;
  else s.rank -= 1;
  ETRT_CHECK_OK(ctx.resize(op, out, s.span()));
  if (out.numel() == 0 && K >= 0) return {};
  double beta = 0;
  if (bias) {
    ETRT_CHECK_OK(linalg_detail::broadcast_into<Dtypes>(op, *bias, out));
    beta = 1;
  }
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    // weight^T as a K x N matrix.
    const linalg_detail::Mat<T> B = weight.dim() == 2 ? linalg_detail::Mat<T>{weight.data_as<T>(), weight.stride(1), weight.stride(0)}
                                                      : linalg_detail::Mat<T>{weight.data_as<T>(), weight.stride(0), 0};
    const int64_t ics = input.stride(input.dim() - 1);
    int64_t rows, irs, orows, ors;
    // out viewed as rows x N: with a 1-D weight out has the input's leading dims.
    const bool in_ok = linalg_detail::collapse_rows(input, rows, irs);
    bool out_ok;
    int64_t ocs;
    if (weight.dim() == 2) {
      out_ok = linalg_detail::collapse_rows(out, orows, ors);
      ocs = out.stride(out.dim() - 1);
    } else {
      ocs = 0;
      if (out.dim() == 0) { orows = 1; ors = 0; out_ok = true; }
      else {
        // every leading dim of input is a dim of out; collapse all of out's dims as rows
        orows = 1; ors = 0; out_ok = true; int64_t expect = -1;
        for (int i = out.dim() - 1; i >= 0; --i) {
          if (out.size(i) == 1) continue;
          if (expect >= 0 && out.stride(i) != expect) { out_ok = false; break; }
          if (expect < 0) ors = out.stride(i);
          expect = out.stride(i) * out.size(i);
          orows *= out.size(i);
        }
      }
    }
    if (in_ok && out_ok) {
      linalg_detail::matmul<T>(rows, N, K, 1.0, {input.data_as<T>(), irs, ics}, B, beta, out.data_as<T>(), ors, ocs);
      return Status{};
    }
    // Layouts whose leading dims do not collapse: go through row-major copies.
    const int64_t M = input.numel() / std::max<int64_t>(K, 1);
    std::vector<T> in_c(static_cast<size_t>(input.numel())), out_c(static_cast<size_t>(out.numel()));
    mv::copy_views(sizeof(T), mv::contiguous_view(in_c.data(), input.sizes()), mv::view_of(input));
    if (beta != 0) mv::copy_views(sizeof(T), mv::contiguous_view(out_c.data(), out.sizes()), mv::view_of(out));
    linalg_detail::matmul<T>(M, N, K, 1.0, {in_c.data(), K, 1}, B, beta, out_c.data(), N, 1);
    mv::copy_views(sizeof(T), mv::view_of(out), mv::contiguous_view(out_c.data(), out.sizes()));
    return Status{};
  });
}

}  // namespace etrt::kernels
