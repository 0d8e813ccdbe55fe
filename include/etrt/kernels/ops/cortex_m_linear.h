// cortex_m:: int8 matrix products: quantized_linear (CMSIS-NN arm_fully_connected_s8) and quantized_batch_matmul
// (arm_batch_matmul_s8).
//
// linear, input [..., K], weights [N, K], per-tensor requantization (requantize_multipliers[0], _shifts[0], as the
// wheel's reference uses them):
//   without kernel_sum: acc = bias[n] + sum_k (x + input_offset) (w + filter_offset)          (scalar / DSP path)
//   with kernel_sum:    acc = kernel_sum[n] + sum_k x w + filter_offset * sum_k x              (MVE path; bias unused)
// then requantize(acc) + output_offset, clamped to [activation_min, activation_max]. Accumulators are int32 with
// wrap-around (Note [cortex_m requantize]).
// batch_matmul, lhs [B, M, K], rhs_transposed [B, N, K]: acc = sum_k (l + lhs_zero_point) (r + rhs_zero_point) (the
// "zero points" are CMSIS offsets, i.e. negated zero points), requantize + output_zero_point, clamped to int8.
#pragma once

#include "etrt/kernels/ops/cortex_m_common.h"

namespace etrt::kernels::cortex_m {

namespace linear_detail {
inline Status check_vec(std::string_view op, std::string_view what, const Tensor& t, int64_t n) {
  ETRT_CHECK_OK(check_dtype(op, what, t, ScalarType::Int));
  if (t.numel() != n || t.dim() > 2)
    return fail(Error::InvalidArgument, op, ": ", what, " ", t.describe(), " must have ", n, " values");
  return {};
}
inline const int32_t* dense_i32(const Tensor* t) { return t ? t->data_as<const int32_t>() : nullptr; }
}  // namespace linear_detail

template <class Dtypes>
Status quantized_linear_out(KernelContext& ctx, const Tensor& input, const Tensor& weights, const Tensor* bias,
                            const Tensor* kernel_sum, int64_t input_offset, int64_t filter_offset,
                            int64_t output_offset, std::span<const int64_t> multipliers,
                            std::span<const int64_t> shifts, int64_t activation_max, int64_t activation_min,
                            Tensor& out) {
  constexpr std::string_view op = "cortex_m::quantized_linear.out";
  ETRT_CHECK_OK(check_dtype(op, "input", input, ScalarType::Char));
  ETRT_CHECK_OK(check_dtype(op, "weights", weights, ScalarType::Char));
  ETRT_CHECK_OK(check_dtype(op, "out", out, ScalarType::Char));
  ETRT_CHECK_OK(check_rank(op, "weights", weights, 2));
  if (input.dim() < 1) return fail(Error::InvalidArgument, op, ": input must have at least one dim");
  const int64_t K = input.size(input.dim() - 1), N = weights.size(0);
  if (weights.size(1) != K)
    return fail(Error::InvalidArgument, op, ": weights ", weights.describe(), " do not match input ", input.describe());
  if (multipliers.empty() || shifts.empty())
    return fail(Error::InvalidArgument, op, ": requantize_multipliers and requantize_shifts must not be empty");
  ETRT_CHECK_OK(check_requant(op, "requantize", multipliers[0], shifts[0]));
  ETRT_CHECK_OK(check_offset(op, "input_offset", input_offset));
  ETRT_CHECK_OK(check_offset(op, "filter_offset", filter_offset));
  ETRT_CHECK_OK(check_zero_point(op, "output_offset", output_offset));
  ETRT_CHECK_OK(check_activation(op, activation_min, activation_max));
  if (bias) ETRT_CHECK_OK(linear_detail::check_vec(op, "bias", *bias, N));
  if (kernel_sum) ETRT_CHECK_OK(linear_detail::check_vec(op, "kernel_sum", *kernel_sum, N));
  std::array<int64_t, kMaxDims> osz{};
  std::copy(input.sizes().begin(), input.sizes().end(), osz.begin());
  osz[input.dim() - 1] = N;
  ETRT_CHECK_OK(ctx.resize(op, out, std::span<const int64_t>(osz.data(), input.dim())));
  // Rows are walked through the leading dims' strides; the last dim of input and out must be their innermost.
  const int last = input.dim() - 1;
  const Shape rows = [&] {
    Shape s = shape_of(input.sizes().first(last));
    return s;
  }();
  std::array<std::array<int64_t, kMaxDims>, 2> st{};
  for (int d = 0; d < last; ++d) st[0][d] = input.stride(d), st[1][d] = out.stride(d);
  const int64_t xs = input.stride(last), ys = out.stride(last);
  const int8_t* x = input.data_as<const int8_t>();
  const int8_t* w = weights.data_as<const int8_t>();
  int8_t* y = out.data_as<int8_t>();
  const int32_t* b = linear_detail::dense_i32(bias);
  const int32_t* ks = linear_detail::dense_i32(kernel_sum);
  const int32_t m = static_cast<int32_t>(multipliers[0]);
  const int sh = static_cast<int>(shifts[0]);
  const int64_t ws0 = weights.stride(0), ws1 = weights.stride(1);
  auto row = [&](const std::array<int64_t, 2>& off) {
    const int8_t* xr = x + off[0];
    int64_t xsum = 0;
    if (ks)
      for (int64_t k = 0; k < K; ++k) xsum += xr[k * xs];
    for (int64_t n = 0; n < N; ++n) {
      int64_t acc = 0;
      if (ks) {
        acc = int64_t{ks[n]} + filter_offset * xsum;
        for (int64_t k = 0; k < K; ++k) acc += int64_t{xr[k * xs]} * w[n * ws0 + k * ws1];
      } else {
        acc = b ? b[n] : 0;
        for (int64_t k = 0; k < K; ++k)
          acc += (int64_t{xr[k * xs]} + input_offset) * (int64_t{w[n * ws0 + k * ws1]} + filter_offset);
      }
      const int64_t v = int64_t{requantize(wrap32(acc), m, sh)} + output_offset;
      y[off[1] + n * ys] = static_cast<int8_t>(clamp_to(v, activation_min, activation_max));
    }
  };
  if (last == 0) row({0, 0});
  else for_each_offset<2>(rows, st, row);
  return {};
}

template <class Dtypes>
Status quantized_batch_matmul_out(KernelContext& ctx, const Tensor& lhs, int64_t lhs_zero_point,
                                  const Tensor& rhs_transposed, int64_t rhs_zero_point, int64_t output_zero_point,
                                  int64_t output_multiplier, int64_t output_shift, const Tensor& /*scratch*/,
                                  Tensor& out) {
  constexpr std::string_view op = "cortex_m::quantized_batch_matmul.out";
  ETRT_CHECK_OK(check_dtype(op, "lhs", lhs, ScalarType::Char));
  ETRT_CHECK_OK(check_dtype(op, "rhs_transposed", rhs_transposed, ScalarType::Char));
  ETRT_CHECK_OK(check_dtype(op, "out", out, ScalarType::Char));
  ETRT_CHECK_OK(check_rank(op, "lhs", lhs, 3));
  ETRT_CHECK_OK(check_rank(op, "rhs_transposed", rhs_transposed, 3));
  const int64_t B = lhs.size(0), M = lhs.size(1), K = lhs.size(2), N = rhs_transposed.size(1);
  if (rhs_transposed.size(0) != B || rhs_transposed.size(2) != K)
    return fail(Error::InvalidArgument, op, ": rhs_transposed ", rhs_transposed.describe(), " does not match lhs ",
                lhs.describe());
  ETRT_CHECK_OK(check_offset(op, "lhs_zero_point", lhs_zero_point));
  ETRT_CHECK_OK(check_offset(op, "rhs_zero_point", rhs_zero_point));
  ETRT_CHECK_OK(check_zero_point(op, "output_zero_point", output_zero_point));
  ETRT_CHECK_OK(check_requant(op, "output", output_multiplier, output_shift));
  const std::array<int64_t, 3> osz{B, M, N};
  ETRT_CHECK_OK(ctx.resize(op, out, osz));
  const int8_t* l = lhs.data_as<const int8_t>();
  const int8_t* r = rhs_transposed.data_as<const int8_t>();
  int8_t* y = out.data_as<int8_t>();
  for (int64_t bi = 0; bi < B; ++bi)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        int64_t acc = 0;
        for (int64_t k = 0; k < K; ++k)
          acc += (int64_t{l[bi * lhs.stride(0) + i * lhs.stride(1) + k * lhs.stride(2)]} + lhs_zero_point) *
                 (int64_t{r[bi * rhs_transposed.stride(0) + j * rhs_transposed.stride(1) +
                            k * rhs_transposed.stride(2)]} +
                  rhs_zero_point);
        const int64_t v = int64_t{requantize(wrap32(acc), static_cast<int32_t>(output_multiplier),
                                             static_cast<int>(output_shift))} +
                          output_zero_point;
        y[bi * out.stride(0) + i * out.stride(1) + j * out.stride(2)] = static_cast<int8_t>(clamp_to(v, -128, 127));
      }
  return {};
}

}  // namespace etrt::kernels::cortex_m
