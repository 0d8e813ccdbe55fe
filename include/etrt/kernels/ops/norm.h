// native_layer_norm, _native_batch_norm_legit (training with running-stat updates, or eval), its no_training and
// no_stats forms, native_group_norm.
//
// Statistics accumulate in double (two passes: mean, then squared deviations); the normalisation itself runs in the
// compute type. Batch norm walks any layout (the channel index rides along as a third strided operand); layer and
// group norm read the input in logical order (a non-contiguous input is copied once) and need contiguous outputs.
#pragma once

#include <cmath>
#include <vector>

#include "etrt/kernels/util/isa.h"
#include "etrt/kernels/util/pointwise_util.h"

namespace etrt::kernels {

namespace detail {

/// An optional per-feature parameter (weight or bias) of `n` elements, read into compute type C.
template <class C>
Result<std::vector<C>> param_vector(std::string_view op, std::string_view what, const Tensor* t, int64_t n,
                                    double dflt) {
  std::vector<C> v(static_cast<size_t>(n), static_cast<C>(dflt));
  if (!t) return v;
  if (t->numel() != n)
    return fail(Error::InvalidArgument, op, ": ", what, " must have ", n, " elements, got shape ",
                shape_str(t->sizes()));
  ETRT_TRY(InputAs<C> in, InputAs<C>::make(op, *t, /*force_contiguous=*/true));
  std::copy(in.data, in.data + n, v.begin());
  return v;
}

inline Status check_contiguous_out(std::string_view op, const Tensor& t, std::string_view what) {
  if (!t.is_contiguous_order())
    return fail(Error::InvalidArgument, op, ": ", what, " must have contiguous dim order");
  return {};
}

/// Resizes an unused statistics output to an empty shape of its rank (torch returns empty tensors there).
inline Status resize_empty(std::string_view op, KernelContext& ctx, Tensor& t) {
  if (t.dim() == 0 || t.numel() == 0) return {};
  std::array<int64_t, kMaxDims> zeros{};
  return ctx.resize(op, t, std::span<const int64_t>(zeros.data(), t.dim()));
}

/// Mean and 1/sqrt(var + eps) of n contiguous elements. Each sum runs in eight interleaved partial sums, added at
/// the end: one chain of n dependent double adds held a 768-wide row for thousands of cycles (vit_b_32's layer norms,
/// 70 us each), and eight independent lanes also vectorize. Always inlined, so a dispatched caller's copy is built
/// for its instruction set (Note [isa dispatch]).
template <class T>
[[gnu::always_inline]] inline std::pair<double, double> moments(const T* x, int64_t n, double eps) {
  if (n == 0) return {0.0, 1.0 / std::sqrt(eps)};
  constexpr int kLanes = 8;
  const auto at = [x](int64_t i) { return static_cast<double>(static_cast<compute_t<T>>(x[i])); };
  const auto sum = [n](auto&& term) {
    double part[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
      for (int l = 0; l < kLanes; ++l) part[l] += term(i + l);
    double s = 0;
    for (; i < n; ++i) s += term(i);
    for (double p : part) s += p;
    return s;
  };
  const double mean = sum(at) / static_cast<double>(n);
  const double ss = sum([&](int64_t i) {
    const double d = at(i) - mean;
    return d * d;
  });
  return {mean, 1.0 / std::sqrt(ss / static_cast<double>(n) + eps)};
}

}  // namespace detail

template <class Dtypes>
Status native_layer_norm_out(KernelContext& ctx, const Tensor& input, std::span<const int64_t> normalized_shape,
                             const Tensor* weight, const Tensor* bias, double eps, Tensor& out, Tensor& mean_out,
                             Tensor& rstd_out) {
  constexpr std::string_view op = "native_layer_norm.out";
  const int k = static_cast<int>(normalized_shape.size());
  if (k < 1 || k > input.dim())
    return fail(Error::InvalidArgument, op, ": normalized_shape ", shape_str(normalized_shape),
                " must have between 1 and ", input.dim(), " entries (the input's rank)");
  const int axis = input.dim() - k;
  for (int i = 0; i < k; ++i)
    if (input.size(axis + i) != normalized_shape[i])
      return fail(Error::InvalidArgument, op, ": normalized_shape ", shape_str(normalized_shape),
                  " does not match the trailing dims of input shape ", shape_str(input.sizes()));
  if (out.dtype() != input.dtype())
    return fail(Error::InvalidArgument, op, ": output dtype ", name(out.dtype()), " must equal input dtype ",
                name(input.dtype()));
  if (!is_floating(mean_out.dtype()) || !is_floating(rstd_out.dtype()))
    return fail(Error::InvalidArgument, op, ": mean and rstd outputs must be floating");
  Shape stat = shape_of(input.sizes());
  for (int i = axis; i < input.dim(); ++i) stat.sizes[i] = 1;
  ETRT_CHECK_OK(ctx.resize(op, out, input.sizes()));
  ETRT_CHECK_OK(ctx.resize(op, mean_out, stat.span()));
  ETRT_CHECK_OK(ctx.resize(op, rstd_out, stat.span()));
  ETRT_CHECK_OK(detail::check_contiguous_out(op, out, "output"));
  ETRT_CHECK_OK(detail::check_contiguous_out(op, mean_out, "mean output"));
  ETRT_CHECK_OK(detail::check_contiguous_out(op, rstd_out, "rstd output"));
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    using C = compute_t<T>;
    int64_t N = 1, M = 1;
    for (int i = axis; i < input.dim(); ++i) N *= input.size(i);
    for (int i = 0; i < axis; ++i) M *= input.size(i);
    ETRT_TRY(std::vector<C> w, detail::param_vector<C>(op, "weight", weight, N, 1.0));
    ETRT_TRY(std::vector<C> b, detail::param_vector<C>(op, "bias", bias, N, 0.0));
    if (input.numel() == 0 && M == 0) return {};
    ETRT_TRY(InputAs<T> in, InputAs<T>::make(op, input, /*force_contiguous=*/true));
    const StoreFn<double> store_mean = storer_for<double>(mean_out.dtype());
    const StoreFn<double> store_rstd = storer_for<double>(rstd_out.dtype());
    if (!store_mean || !store_rstd) return fail(Error::InvalidArgument, op, ": unsupported statistics dtype");
    T* y = out.data_as<T>();
    const C* wp = w.data();
    const C* bp = b.data();
    for (int64_t r = 0; r < M; ++r) {
      const T* x = in.data + r * N;
      T* yr = y + r * N;
      const auto row = [&]() ETRT_ISA_INLINE {
        const std::pair<double, double> st = detail::moments(x, N, eps);
        const C m = static_cast<C>(st.first), s = static_cast<C>(st.second);
        for (int64_t i = 0; i < N; ++i) yr[i] = static_cast<T>((static_cast<C>(x[i]) - m) * s * wp[i] + bp[i]);
        return st;
      };
      std::pair<double, double> st;
      if constexpr (std::is_same_v<T, float>) st = isa::dispatch_avx2(row);
      else st = row();
      const auto [mean, rstd] = st;
      store_mean(mean_out.data(), r, mean);
      store_rstd(rstd_out.data(), r, rstd);
    }
    return {};
  });
}

namespace detail {
/// out = x * scale[c] + shift[c] over any layout; c is the index along dim 1.
template <class T>
void apply_channel_affine(const InputAs<T>& in, const Tensor& input, Tensor& out, const std::vector<compute_t<T>>& scale,
                          const std::vector<compute_t<T>>& shift) {
  using C = compute_t<T>;
  std::array<int64_t, kMaxDims> cs{};
  cs[1] = 1;
  const std::array<std::array<int64_t, kMaxDims>, 3> st{in.strides, strides_array(out), cs};
  T* y = out.data_as<T>();
  const C* sc = scale.data();
  const C* sh = shift.data();
  for_each_offset<3>(shape_of(input.sizes()), st, [&](const std::array<int64_t, 3>& off) {
    y[off[1]] = static_cast<T>(static_cast<C>(in.data[off[0]]) * sc[off[2]] + sh[off[2]]);
  });
}

inline Status check_batch_norm_input(std::string_view op, const Tensor& input, const Tensor& out) {
  if (input.dim() < 2)
    return fail(Error::InvalidArgument, op, ": input must have at least 2 dims (N, C, ...), got shape ",
                shape_str(input.sizes()));
  if (out.dtype() != input.dtype())
    return fail(Error::InvalidArgument, op, ": output dtype ", name(out.dtype()), " must equal input dtype ",
                name(input.dtype()));
  return {};
}
}  // namespace detail

namespace detail {
/// Eval-mode batch norm: normalise with the running statistics; the two statistics outputs become empty.
template <class Dtypes>
Status batch_norm_eval(std::string_view op, KernelContext& ctx, const Tensor& input, const Tensor* weight,
                       const Tensor* bias, const Tensor& running_mean, const Tensor& running_var, double eps,
                       Tensor& out, Tensor& out1, Tensor& out2) {
  ETRT_CHECK_OK(check_batch_norm_input(op, input, out));
  const int64_t C_ = input.size(1);
  ETRT_CHECK_OK(ctx.resize(op, out, input.sizes()));
  ETRT_CHECK_OK(resize_empty(op, ctx, out1));
  ETRT_CHECK_OK(resize_empty(op, ctx, out2));
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    using C = compute_t<T>;
    ETRT_TRY(std::vector<C> w, param_vector<C>(op, "weight", weight, C_, 1.0));
    ETRT_TRY(std::vector<C> b, param_vector<C>(op, "bias", bias, C_, 0.0));
    ETRT_TRY(std::vector<double> rm, param_vector<double>(op, "running_mean", &running_mean, C_, 0.0));
    ETRT_TRY(std::vector<double> rv, param_vector<double>(op, "running_var", &running_var, C_, 1.0));
    std::vector<C> scale(static_cast<size_t>(C_)), shift(static_cast<size_t>(C_));
    for (int64_t c = 0; c < C_; ++c) {
      const double s = static_cast<double>(w[c]) / std::sqrt(rv[c] + eps);
      scale[c] = static_cast<C>(s);
      shift[c] = static_cast<C>(static_cast<double>(b[c]) - rm[c] * s);
    }
    if (input.numel() == 0) return {};
    ETRT_TRY(InputAs<T> in, InputAs<T>::make(op, input));
    apply_channel_affine<T>(in, input, out, scale, shift);
    return {};
  });
}

/// Per-channel batch statistics over every dim but 1, in double: the mean and the sum of squared deviations.
struct ChannelStats {
  std::vector<double> mean, sq_dev;
  int64_t per = 0;  // elements per channel
};

template <class T>
ChannelStats channel_stats(const InputAs<T>& in, const Tensor& input) {
  using C = compute_t<T>;
  const int64_t C_ = input.size(1);
  ChannelStats st;
  st.per = C_ == 0 ? 0 : input.numel() / C_;
  st.mean.assign(static_cast<size_t>(C_), 0.0);
  st.sq_dev.assign(static_cast<size_t>(C_), 0.0);
  std::array<int64_t, kMaxDims> cs{};
  cs[1] = 1;
  const std::array<std::array<int64_t, kMaxDims>, 2> strides{in.strides, cs};
  const Shape shape = shape_of(input.sizes());
  for_each_offset<2>(shape, strides, [&](const std::array<int64_t, 2>& off) {
    st.mean[off[1]] += static_cast<double>(static_cast<C>(in.data[off[0]]));
  });
  for (int64_t c = 0; c < C_; ++c) st.mean[c] = st.per ? st.mean[c] / static_cast<double>(st.per) : 0.0;
  for_each_offset<2>(shape, strides, [&](const std::array<int64_t, 2>& off) {
    const double d = static_cast<double>(static_cast<C>(in.data[off[0]])) - st.mean[off[1]];
    st.sq_dev[off[1]] += d * d;
  });
  return st;
}

/// Training-mode batch norm: normalise with the batch statistics (biased variance) and write them to save_mean /
/// save_invstd.
template <class Dtypes>
Status batch_norm_train(std::string_view op, KernelContext& ctx, const Tensor& input, const Tensor* weight,
                        const Tensor* bias, double eps, Tensor& out, Tensor& save_mean, Tensor& save_invstd,
                        ChannelStats& stats) {
  const int64_t C_ = input.size(1);
  const int64_t stat_size[1] = {C_};
  ETRT_CHECK_OK(ctx.resize(op, out, input.sizes()));
  ETRT_CHECK_OK(ctx.resize(op, save_mean, stat_size));
  ETRT_CHECK_OK(ctx.resize(op, save_invstd, stat_size));
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    using C = compute_t<T>;
    const StoreFn<double> store_mean = storer_for<double>(save_mean.dtype());
    const StoreFn<double> store_invstd = storer_for<double>(save_invstd.dtype());
    if (!store_mean || !store_invstd) return fail(Error::InvalidArgument, op, ": unsupported statistics dtype");
    ETRT_TRY(std::vector<C> w, param_vector<C>(op, "weight", weight, C_, 1.0));
    ETRT_TRY(std::vector<C> b, param_vector<C>(op, "bias", bias, C_, 0.0));
    ETRT_TRY(InputAs<T> in, InputAs<T>::make(op, input));
    stats = channel_stats<T>(in, input);
    const double per = static_cast<double>(stats.per);
    std::vector<C> scale(static_cast<size_t>(C_)), shift(static_cast<size_t>(C_));
    for (int64_t c = 0; c < C_; ++c) {
      const double invstd = 1.0 / std::sqrt((stats.per ? stats.sq_dev[c] / per : 0.0) + eps);
      store_mean(save_mean.data(), c * save_mean.stride(0), stats.mean[c]);
      store_invstd(save_invstd.data(), c * save_invstd.stride(0), invstd);
      const double s = static_cast<double>(w[c]) * invstd;
      scale[c] = static_cast<C>(s);
      shift[c] = static_cast<C>(static_cast<double>(b[c]) - stats.mean[c] * s);
    }
    apply_channel_affine<T>(in, input, out, scale, shift);
    return {};
  });
}

/// A running statistic updated in place: a floating 1-D tensor of C elements.
inline Status check_running_stat(std::string_view op, std::string_view what, const Tensor& t, int64_t channels) {
  if (t.dim() != 1 || t.size(0) != channels)
    return fail(Error::InvalidArgument, op, ": ", what, " must have shape [", channels,
                "] (the input's channels), got ", shape_str(t.sizes()));
  if (!is_floating(t.dtype()))
    return fail(Error::InvalidArgument, op, ": ", what, " must be floating, got ", name(t.dtype()));
  return {};
}
}  // namespace detail

template <class Dtypes>
Status native_batch_norm_legit_no_training_out(KernelContext& ctx, const Tensor& input, const Tensor* weight,
                                               const Tensor* bias, const Tensor& running_mean,
                                               const Tensor& running_var, double /*momentum*/, double eps, Tensor& out,
                                               Tensor& out1, Tensor& out2) {
  return detail::batch_norm_eval<Dtypes>("_native_batch_norm_legit_no_training.out", ctx, input, weight, bias,
                                         running_mean, running_var, eps, out, out1, out2);
}

/// _native_batch_norm_legit.out. Training: normalise with the batch statistics, return them (mean and
/// 1/sqrt(biased var + eps)), and move the running statistics toward them in place: running = (1 - momentum) *
/// running + momentum * batch, with the unbiased (n - 1) variance, as torch does (one element per channel makes
/// that variance NaN, as in torch). Eval: normalise with the running statistics; the statistics outputs are empty.
template <class Dtypes>
Status native_batch_norm_legit_out(KernelContext& ctx, const Tensor& input, const Tensor* weight, const Tensor* bias,
                                   Tensor& running_mean, Tensor& running_var, bool training, double momentum,
                                   double eps, Tensor& out, Tensor& save_mean, Tensor& save_invstd) {
  constexpr std::string_view op = "_native_batch_norm_legit.out";
  ETRT_CHECK_OK(detail::check_batch_norm_input(op, input, out));
  const int64_t C_ = input.size(1);
  ETRT_CHECK_OK(detail::check_running_stat(op, "running_mean", running_mean, C_));
  ETRT_CHECK_OK(detail::check_running_stat(op, "running_var", running_var, C_));
  if (!training)
    return detail::batch_norm_eval<Dtypes>(op, ctx, input, weight, bias, running_mean, running_var, eps, out,
                                           save_mean, save_invstd);
  if (input.numel() == 0)
    return fail(Error::InvalidArgument, op, ": input tensor must have at least one element, got shape ",
                shape_str(input.sizes()));
  detail::ChannelStats stats;
  ETRT_CHECK_OK(detail::batch_norm_train<Dtypes>(op, ctx, input, weight, bias, eps, out, save_mean, save_invstd,
                                                 stats));
  const LoadFn<double> load_m = loader_for<double>(running_mean.dtype());
  const LoadFn<double> load_v = loader_for<double>(running_var.dtype());
  const StoreFn<double> store_m = storer_for<double>(running_mean.dtype());
  const StoreFn<double> store_v = storer_for<double>(running_var.dtype());
  const double per = static_cast<double>(stats.per);
  for (int64_t c = 0; c < C_; ++c) {
    const int64_t om = c * running_mean.stride(0), ov = c * running_var.stride(0);
    const double unbiased = stats.sq_dev[c] / (per - 1.0);
    store_m(running_mean.data(), om, momentum * stats.mean[c] + (1.0 - momentum) * load_m(running_mean.data(), om));
    store_v(running_var.data(), ov, momentum * unbiased + (1.0 - momentum) * load_v(running_var.data(), ov));
  }
  return {};
}

/// _native_batch_norm_legit.no_stats_out: normalises with the batch statistics (training mode, no running stats).
template <class Dtypes>
Status native_batch_norm_legit_no_stats_out(KernelContext& ctx, const Tensor& input, const Tensor* weight,
                                            const Tensor* bias, bool training, double /*momentum*/, double eps,
                                            Tensor& out, Tensor& save_mean, Tensor& save_invstd) {
  constexpr std::string_view op = "_native_batch_norm_legit.no_stats_out";
  ETRT_CHECK_OK(detail::check_batch_norm_input(op, input, out));
  if (!training)
    return fail(Error::InvalidArgument, op, ": training=False needs running statistics, which this overload lacks");
  detail::ChannelStats stats;
  return detail::batch_norm_train<Dtypes>(op, ctx, input, weight, bias, eps, out, save_mean, save_invstd, stats);
}

template <class Dtypes>
Status native_group_norm_out(KernelContext& ctx, const Tensor& input, const Tensor* weight, const Tensor* bias,
                             int64_t N, int64_t C_, int64_t HxW, int64_t group, double eps, Tensor& out,
                             Tensor& mean_out, Tensor& rstd_out) {
  constexpr std::string_view op = "native_group_norm.out";
  if (N < 0 || C_ < 0 || HxW < 0 || group <= 0)
    return fail(Error::InvalidArgument, op, ": invalid N=", N, ", C=", C_, ", HxW=", HxW, ", group=", group);
  if (C_ % group != 0)
    return fail(Error::InvalidArgument, op, ": C (", C_, ") must be divisible by group (", group, ")");
  if (input.dim() < 2 || input.size(0) != N || input.size(1) != C_ || (C_ > 0 && N > 0 && input.numel() != N * C_ * HxW))
    return fail(Error::InvalidArgument, op, ": input shape ", shape_str(input.sizes()), " does not match N=", N,
                ", C=", C_, ", HxW=", HxW);
  if (out.dtype() != input.dtype())
    return fail(Error::InvalidArgument, op, ": output dtype ", name(out.dtype()), " must equal input dtype ",
                name(input.dtype()));
  const int64_t stat_size[2] = {N, group};
  ETRT_CHECK_OK(ctx.resize(op, out, input.sizes()));
  ETRT_CHECK_OK(ctx.resize(op, mean_out, stat_size));
  ETRT_CHECK_OK(ctx.resize(op, rstd_out, stat_size));
  ETRT_CHECK_OK(detail::check_contiguous_out(op, out, "output"));
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    using C = compute_t<T>;
    const StoreFn<double> store_mean = storer_for<double>(mean_out.dtype());
    const StoreFn<double> store_rstd = storer_for<double>(rstd_out.dtype());
    if (!store_mean || !store_rstd) return fail(Error::InvalidArgument, op, ": unsupported statistics dtype");
    ETRT_TRY(std::vector<C> w, detail::param_vector<C>(op, "weight", weight, C_, 1.0));
    ETRT_TRY(std::vector<C> b, detail::param_vector<C>(op, "bias", bias, C_, 0.0));
    if (input.numel() == 0) return {};
    ETRT_TRY(InputAs<T> in, InputAs<T>::make(op, input, /*force_contiguous=*/true));
    T* y = out.data_as<T>();
    const int64_t D = C_ / group, block = D * HxW;
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t g = 0; g < group; ++g) {
        const int64_t base = (n * C_ + g * D) * HxW;
        const auto [mean, rstd] = detail::moments(in.data + base, block, eps);
        store_mean(mean_out.data(), n * mean_out.stride(0) + g * mean_out.stride(1), mean);
        store_rstd(rstd_out.data(), n * rstd_out.stride(0) + g * rstd_out.stride(1), rstd);
        for (int64_t c = g * D; c < (g + 1) * D; ++c) {
          const C s = static_cast<C>(rstd) * w[c];
          const C sh = b[c] - static_cast<C>(mean) * s;
          const T* x = in.data + (n * C_ + c) * HxW;
          T* yr = y + (n * C_ + c) * HxW;
          for (int64_t i = 0; i < HxW; ++i) yr[i] = static_cast<T>(static_cast<C>(x[i]) * s + sh);
        }
      }
    }
    return {};
  });
}

}  // namespace etrt::kernels
