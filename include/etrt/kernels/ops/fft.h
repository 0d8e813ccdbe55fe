// aten::_fft_r2c.out and aten::_fft_c2r.out: the real-input FFT behind torch.fft.rfft / rfft2 / rfftn (and fft of a
// real tensor, onesided=False) and its inverse behind irfft / irfft2 / irfftn.
//
// Note [fft algorithm]: any length, not only powers of two. A power-of-two length runs an iterative radix-2 FFT;
// any other length runs Bluestein's chirp-z algorithm (the DFT as a convolution, done by radix-2 FFTs of a padded
// power-of-two length), so every length costs O(n log n). Everything computes in double (twiddles from exact
// integer angles), whatever the storage type, then rounds once into the output, so float results agree with
// upstream's pocketfft to float precision though not bit for bit.
//
// Multi-dim transforms (dim = [d0, ..., dk]): r2c runs the real transform along dk, then complex transforms along
// the other dims of the half spectrum; c2r runs the inverse complex transforms along the other dims first, then the
// Hermitian-to-real transform along dk, which reads the first last_dim_size / 2 + 1 entries (the imaginary parts of
// the zero-frequency and, for even lengths, Nyquist terms are ignored, as pocketfft does).
// normalization (upstream's codes): 0 none, 1 divide by sqrt(n), 2 divide by n, n being the product of the signal
// sizes (the input's over dim for r2c, the output's for c2r). Upstream refuses onesided=False; it is supported here.
#pragma once

#include <cmath>
#include <complex>
#include <numbers>
#include <vector>

#include "etrt/kernels/util/movement_util.h"

namespace etrt::kernels {

namespace fft_detail {

using cd = std::complex<double>;

inline bool is_pow2(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

/// exp(sign * 2 pi i * k / n) with the angle reduced exactly first.
inline cd root(int64_t k, int64_t n, int sign) {
  k %= n;
  const double a = sign * 2.0 * std::numbers::pi * static_cast<double>(k) / static_cast<double>(n);
  return {std::cos(a), std::sin(a)};
}

/// An in-place radix-2 FFT of a power-of-two length with precomputed roots.
class Pow2 {
 public:
  Pow2(int64_t n, int sign) : n_(n), roots_(static_cast<size_t>(n / 2 + 1)) {
    for (int64_t k = 0; k <= n / 2; ++k) roots_[k] = root(k, n, sign);
  }
  void run(cd* a) const {
    for (int64_t i = 1, j = 0; i < n_; ++i) {  // bit-reversal permutation
      int64_t bit = n_ >> 1;
      for (; j & bit; bit >>= 1) j ^= bit;
      j |= bit;
      if (i < j) std::swap(a[i], a[j]);
    }
    for (int64_t len = 2; len <= n_; len <<= 1) {
      const int64_t step = n_ / len, half = len / 2;
      for (int64_t s = 0; s < n_; s += len)
        for (int64_t k = 0; k < half; ++k) {
          const cd t = roots_[k * step] * a[s + k + half];
          a[s + k + half] = a[s + k] - t;
          a[s + k] += t;
        }
    }
  }

 private:
  int64_t n_;
  std::vector<cd> roots_;
};

/// An unnormalized DFT of length n: sign -1 forward, +1 backward. Note [fft algorithm].
class Dft {
 public:
  Dft(int64_t n, int sign) : n_(n) {
    if (is_pow2(n)) {
      direct_.emplace_back(n, sign);
      return;
    }
    m_ = 1;
    while (m_ < 2 * n - 1) m_ <<= 1;
    fwd_.emplace_back(m_, -1);
    bwd_.emplace_back(m_, +1);
    chirp_.resize(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) chirp_[k] = root((k * k) % (2 * n), 2 * n, sign);  // exp(sign pi i k^2 / n)
    kernel_.assign(static_cast<size_t>(m_), cd{});
    for (int64_t k = 0; k < n; ++k) {
      kernel_[k] = std::conj(chirp_[k]);
      if (k > 0) kernel_[m_ - k] = std::conj(chirp_[k]);
    }
    fwd_[0].run(kernel_.data());
    work_.resize(static_cast<size_t>(m_));
  }
  void run(cd* a) {
    if (!direct_.empty()) return direct_[0].run(a);
    std::fill(work_.begin(), work_.end(), cd{});
    for (int64_t k = 0; k < n_; ++k) work_[k] = a[k] * chirp_[k];
    fwd_[0].run(work_.data());
    for (int64_t k = 0; k < m_; ++k) work_[k] *= kernel_[k];
    bwd_[0].run(work_.data());
    const double inv_m = 1.0 / static_cast<double>(m_);
    for (int64_t k = 0; k < n_; ++k) a[k] = work_[k] * inv_m * chirp_[k];
  }

 private:
  int64_t n_, m_ = 0;
  std::vector<Pow2> direct_, fwd_, bwd_;
  std::vector<cd> chirp_, kernel_, work_;
};

/// The element offsets of every line along `axis` of a tensor of `sizes` with `strides`, in logical order.
inline std::vector<int64_t> line_starts(std::span<const int64_t> sizes, std::span<const int64_t> strides, int axis) {
  mv::View v;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (static_cast<int>(d) != axis) v.push(sizes[d], strides[d]);
  std::vector<int64_t> out;
  mv::for_each_view_offset(v, [&](int64_t o) { out.push_back(o); });
  return out;
}

inline void contiguous_strides(std::span<const int64_t> sizes, std::span<int64_t> strides) {
  int64_t s = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = s;
    s *= std::max<int64_t>(sizes[d], 1);
  }
}

/// In-place complex transforms of `buf` (contiguous `sizes`) along each dim of `dims`.
inline void c2c_dims(std::vector<cd>& buf, std::span<const int64_t> sizes, std::span<const int> dims, int sign) {
  std::array<int64_t, kMaxDims> st{};
  contiguous_strides(sizes, std::span<int64_t>(st.data(), sizes.size()));
  std::vector<cd> line;
  for (int d : dims) {
    const int64_t n = sizes[d];
    Dft dft(n, sign);
    line.resize(static_cast<size_t>(n));
    for (int64_t s : line_starts(sizes, std::span<const int64_t>(st.data(), sizes.size()), d)) {
      for (int64_t k = 0; k < n; ++k) line[k] = buf[s + k * st[d]];
      dft.run(line.data());
      for (int64_t k = 0; k < n; ++k) buf[s + k * st[d]] = line[k];
    }
  }
}

/// Wraps and checks `dim` (non-empty, in range, no repeats) for a tensor of rank `rank`.
inline Result<std::vector<int>> check_dims(std::string_view op, std::span<const int64_t> dim, int rank) {
  if (dim.empty()) return fail(Error::InvalidArgument, op, ": dim must not be empty");
  std::vector<int> out;
  for (int64_t d : dim) {
    ETRT_TRY(int w, mv::wrap_dim(op, d, rank));
    if (rank == 0) return fail(Error::InvalidArgument, op, ": a 0-d tensor has no dim to transform");
    for (int o : out)
      if (o == w) return fail(Error::InvalidArgument, op, ": dim ", d, " is repeated");
    out.push_back(w);
  }
  return out;
}

/// The scale `normalization` asks for; the signal is the product of the transformed dims' sizes (none may be 0).
inline Result<double> norm_factor(std::string_view op, int64_t normalization, std::span<const int64_t> sizes,
                                  const std::vector<int>& dims) {
  int64_t n = 1;
  for (int d : dims) {
    if (sizes[d] == 0) return fail(Error::InvalidArgument, op, ": cannot transform dim ", d, " of size 0");
    n *= sizes[d];
  }
  switch (normalization) {
    case 0: return 1.0;
    case 1: return 1.0 / std::sqrt(static_cast<double>(n));
    case 2: return 1.0 / static_cast<double>(n);
    default: return fail(Error::InvalidArgument, op, ": unsupported normalization ", normalization, " (0, 1 or 2)");
  }
}

/// How r2c and c2r start: self is `in32` or `in64` and out the matching `out32` or `out64`; returns the checked dims.
inline Result<std::vector<int>> check_args(std::string_view op, const Tensor& self, const Tensor& out,
                                           std::span<const int64_t> dim, ScalarType in32, ScalarType in64,
                                           ScalarType out32, ScalarType out64) {
  if (self.dtype() != in32 && self.dtype() != in64)
    return fail(Error::InvalidArgument, op, ": input must be ", numpy_name(in32), " or ", numpy_name(in64), ", got ",
                self.describe());
  const ScalarType want = self.dtype() == in32 ? out32 : out64;
  if (out.dtype() != want)
    return fail(Error::InvalidArgument, op, ": out must be ", name(want), " for a ", name(self.dtype()), " input, got ",
                name(out.dtype()));
  return check_dims(op, dim, self.dim());
}

}  // namespace fft_detail

template <class Dtypes>
Status fft_r2c_out(KernelContext& ctx, const Tensor& self, std::span<const int64_t> dim, int64_t normalization,
                   bool onesided, Tensor& out) {
  using namespace fft_detail;
  constexpr std::string_view op = "_fft_r2c.out";
  ETRT_TRY(std::vector<int> dims, check_args(op, self, out, dim, ScalarType::Float, ScalarType::Double,
                                             ScalarType::ComplexFloat, ScalarType::ComplexDouble));
  const int last = dims.back();
  ETRT_TRY(double fct, norm_factor(op, normalization, self.sizes(), dims));
  Shape os = shape_of(self.sizes());
  const int64_t n = self.size(last), half = onesided ? n / 2 + 1 : n;
  os.sizes[last] = half;
  ETRT_CHECK_OK(ctx.resize(op, out, os.span()));
  if (out.numel() == 0) return {};
  // The real transform along the last dim into a contiguous complex buffer of out's shape.
  std::vector<cd> buf(static_cast<size_t>(out.numel()));
  std::array<int64_t, kMaxDims> bst{};
  contiguous_strides(os.span(), std::span<int64_t>(bst.data(), os.rank));
  const auto in_lines = line_starts(self.sizes(), self.strides(), last);
  const auto buf_lines = line_starts(os.span(), std::span<const int64_t>(bst.data(), os.rank), last);
  const LoadFn<double> load = loader_for<double>(self.dtype());
  Dft dft(n, -1);
  std::vector<cd> line(static_cast<size_t>(n));
  for (size_t l = 0; l < in_lines.size(); ++l) {
    for (int64_t k = 0; k < n; ++k) line[k] = load(self.data(), in_lines[l] + k * self.stride(last));
    dft.run(line.data());
    for (int64_t k = 0; k < half; ++k) buf[buf_lines[l] + k * bst[last]] = line[k];
  }
  const std::vector<int> rest(dims.begin(), dims.end() - 1);
  c2c_dims(buf, os.span(), rest, -1);
  return visit(out.dtype(), Dtypes{}, op, [&]<class C>() -> Status {
    if constexpr (std::is_same_v<C, std::complex<float>> || std::is_same_v<C, std::complex<double>>) {
      C* o = out.data_as<C>();
      size_t k = 0;
      mv::for_each_view_offset(mv::view_of(out), [&](int64_t off) { o[off] = C(buf[k++] * fct); });
      return Status{};
    } else {
      return fail(Error::InvalidArgument, op, ": unsupported output dtype ", name(out.dtype()));
    }
  });
}

template <class Dtypes>
Status fft_c2r_out(KernelContext& ctx, const Tensor& self, std::span<const int64_t> dim, int64_t normalization,
                   int64_t last_dim_size, Tensor& out) {
  using namespace fft_detail;
  constexpr std::string_view op = "_fft_c2r.out";
  ETRT_TRY(std::vector<int> dims, check_args(op, self, out, dim, ScalarType::ComplexFloat, ScalarType::ComplexDouble,
                                             ScalarType::Float, ScalarType::Double));
  const int last = dims.back();
  const int64_t n = last_dim_size, half = n / 2 + 1;
  if (n < 1) return fail(Error::InvalidArgument, op, ": last_dim_size ", n, " must be at least 1");
  if (self.size(last) < half)
    return fail(Error::InvalidArgument, op, ": dim ", last, " of the input has ", self.size(last),
                " entries, a real output of ", n, " needs ", half);
  Shape os = shape_of(self.sizes());
  os.sizes[last] = n;
  ETRT_TRY(double fct, norm_factor(op, normalization, os.span(), dims));
  ETRT_CHECK_OK(ctx.resize(op, out, os.span()));
  if (out.numel() == 0) return {};
  // The half spectrum the transform reads, as a contiguous double buffer; inverse transforms along the other dims.
  Shape hs = shape_of(self.sizes());
  hs.sizes[last] = half;
  const int64_t hn = checked_numel(hs.span());
  std::vector<cd> buf(static_cast<size_t>(hn));
  {
    mv::View src = mv::view_of(self);
    src.sizes[last] = half;
    const LoadFn<std::complex<double>> load = loader_for<std::complex<double>>(self.dtype());
    size_t k = 0;
    mv::for_each_view_offset(src, [&](int64_t off) { buf[k++] = load(self.data(), off); });
  }
  const std::vector<int> rest(dims.begin(), dims.end() - 1);
  c2c_dims(buf, hs.span(), rest, +1);
  std::array<int64_t, kMaxDims> hst{};
  contiguous_strides(hs.span(), std::span<int64_t>(hst.data(), hs.rank));
  const auto buf_lines = line_starts(hs.span(), std::span<const int64_t>(hst.data(), hs.rank), last);
  const auto out_lines = line_starts(out.sizes(), out.strides(), last);
  Dft dft(n, +1);
  std::vector<cd> line(static_cast<size_t>(n));
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      T* o = out.data_as<T>();
      const int64_t os_last = out.stride(last);
      for (size_t l = 0; l < buf_lines.size(); ++l) {
        const cd* h = buf.data() + buf_lines[l];
        const int64_t hs_last = hst[last];
        line[0] = h[0].real();
        for (int64_t k = 1; k < half; ++k) {
          line[k] = h[k * hs_last];
          line[n - k] = std::conj(h[k * hs_last]);
        }
        if (n % 2 == 0) line[n / 2] = h[(n / 2) * hs_last].real();
        dft.run(line.data());
        for (int64_t k = 0; k < n; ++k) o[out_lines[l] + k * os_last] = static_cast<T>(line[k].real() * fct);
      }
      return Status{};
    } else {
      return fail(Error::InvalidArgument, op, ": unsupported output dtype ", name(out.dtype()));
    }
  });
}

}  // namespace etrt::kernels
