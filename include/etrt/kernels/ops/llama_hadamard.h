// llama::fast_hadamard_transform.out: the normalized Walsh-Hadamard transform of every row (last dim) of `mat`, as
// SpinQuant rotations use it.
//
// For a row length n = 2^k the transform is the Sylvester-Hadamard butterfly followed by a scale of 1 / sqrt(n)
// (computed as 1 / (2^(k/2) * (sqrt 2 if k is odd)), as upstream does). For n = 28 * 2^k the row is read as a
// 28 x 2^k matrix: each of its 28 rows gets the 2^k transform, then every column is multiplied by a fixed,
// unnormalized 28 x 28 Hadamard matrix (so the overall scale is 1 / sqrt(2^k), not 1 / sqrt(n), like upstream's).
// The signs of that matrix are upstream's (observed from its kernel on the unit vectors); any other order-28
// Hadamard matrix would give a different, equally orthogonal rotation and so different numbers.
//
// Float, double, Half and BFloat16 rows are transformed in float (double in double); upstream rounds Half after
// every butterfly stage, so Half results can differ from its in the last bit. Other lengths are refused; a 0-d
// tensor is copied (the transform of one value is itself).
#pragma once

#include <cmath>
#include <cstring>
#include <vector>

#include "etrt/kernels/ops/llama_common.h"

namespace etrt::kernels {

namespace llama::hadamard {

/// Row r of the 28 x 28 matrix: bit c set means entry (r, c) is -1, clear means +1.
inline constexpr uint32_t kHad28Negative[28] = {
    0xcd69e7e, 0x9ad7c7d, 0x37ab8fb, 0x6d571f7, 0xd8ae3ef, 0xb3587df, 0x66b4f3f, 0xb467f43, 0x6acbe87, 0xd593d8e,
    0xab27b9c, 0x564f7b8, 0xac9aff0, 0x5b31fe1, 0x87fb325, 0x0ff66ca, 0x1decd95, 0x39ddb2a, 0x71bf654, 0xe17eca9,
    0xc2fd9d2, 0xfcf1299, 0xfbe2532, 0xf7c4ae4, 0xef8d549, 0xdf1ea13, 0xbe3d4a6, 0x7e7a94c};

/// In-place unnormalized butterfly over x[0, 2^log2n).
template <class A>
inline void butterfly(A* x, int log2n) {
  const int64_t n = int64_t{1} << log2n;
  for (int64_t h = 1; h < n; h *= 2)
    for (int64_t i = 0; i < n; i += 2 * h)
      for (int64_t j = i; j < i + h; ++j) {
        const A a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
}

template <class A>
inline A inv_sqrt_pow2(int log2n) {
  const A root = A(int64_t{1} << (log2n / 2)) * ((log2n % 2) ? A(std::sqrt(2.0)) : A(1));
  return A(1) / root;
}

/// Transforms one row of length n = mult * 2^log2n (mult 1 or 28) held in `x`.
template <class A>
inline void transform_row(A* x, int log2n, bool has28, A* tmp) {
  const int64_t m = int64_t{1} << log2n;
  const int parts = has28 ? 28 : 1;
  if (log2n > 0) {
    const A s = inv_sqrt_pow2<A>(log2n);
    for (int p = 0; p < parts; ++p) {
      A* seg = x + p * m;
      butterfly(seg, log2n);
      for (int64_t i = 0; i < m; ++i) seg[i] *= s;
    }
  }
  if (!has28) return;
  for (int64_t c = 0; c < m; ++c) {
    for (int r = 0; r < 28; ++r) tmp[r] = x[r * m + c];
    for (int r = 0; r < 28; ++r) {
      A acc = A(0);
      const uint32_t neg = kHad28Negative[r];
      for (int k = 0; k < 28; ++k) acc += ((neg >> k) & 1u) ? -tmp[k] : tmp[k];
      x[r * m + c] = acc;
    }
  }
}

}  // namespace llama::hadamard

template <class Dtypes>
Status fast_hadamard_transform_out(KernelContext& ctx, const Tensor& mat, Tensor& out) {
  constexpr std::string_view op = "llama::fast_hadamard_transform.out";
  ETRT_CHECK_OK(llama::check_same_dtype(op, out, mat, "out", "mat"));
  ETRT_CHECK_OK(ctx.resize(op, out, mat.sizes()));
  if (mat.dim() == 0) {  // one value: the length-1 transform is the identity
    std::memcpy(out.data(), mat.data(), element_size(mat.dtype()));
    return {};
  }
  ETRT_CHECK_OK(llama::check_contiguous(op, mat, "mat"));
  ETRT_CHECK_OK(llama::check_contiguous(op, out, "out"));
  const int64_t n = mat.size(mat.dim() - 1);
  const bool has28 = n > 0 && n % 28 == 0;
  const int64_t m = has28 ? n / 28 : n;
  if (m <= 0 || (m & (m - 1)) != 0)
    return fail(Error::InvalidArgument, op, ": the last dim (", n, ") must be a power of 2 or 28 times one");
  if (mat.numel() == 0) return {};
  int log2n = 0;
  while ((int64_t{1} << log2n) < m) ++log2n;
  const int64_t rows = mat.numel() / n;
  return visit(mat.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
    const T* src = mat.data_as<const T>();
    T* dst = out.data_as<T>();
    std::vector<A> row(static_cast<size_t>(n));
    A tmp[28];
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < n; ++i) row[static_cast<size_t>(i)] = static_cast<A>(src[r * n + i]);
      llama::hadamard::transform_row(row.data(), log2n, has28, tmp);
      for (int64_t i = 0; i < n; ++i) dst[r * n + i] = static_cast<T>(row[static_cast<size_t>(i)]);
    }
    return Status{};
  });
}

}  // namespace etrt::kernels
