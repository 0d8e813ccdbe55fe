// Note [xnnpack quantized values]: how the XNNPACK executor runs quantized graphs. Every value is held as float32
// carrying exactly the real number its quantized form represents ((q - zero_point) x scale). Quantized constants are dequantized once at init; after a
// node writes a quantized output, the output is rounded onto its quantization grid in place; quantized external
// values are converted at the graph's boundary. The float kernels then compute what XNNPACK's integer kernels
// compute, up to float rounding of the accumulation (the integer products are exact in both; only a value that
// falls within float error of a rounding midpoint can land on the neighbouring quantization step).
//
// Rounding follows XNNPACK: x x (1 / scale) rounded half to even, plus the zero point, saturated to the type's range.
// Dynamic (qdint8) values get per-row parameters from the row's range widened to include 0 (asymmetric int8).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>

#include "etrt/backends/xnnpack/quant_params.h"
#include "etrt/kernels/util/isa.h"
#include "etrt/kernels/util/vec.h"

namespace etrt::xnnpack::quant {

namespace detail {

using kernels::vec::clamped;
using kernels::vec::grid_point;

/// out[i] = step(in[i]) (in may be out), L lanes at a time (one register: Note [vector lanes per level]), then L / 2,
/// then the tail one by one; step takes a Vec of either width or a float. Spelled in vectors because the module's
/// -O2 leaves a loop of unknown trip count scalar (the rounding was 45% of a PT2E int8 mobilenet_v2's time).
///
/// Note [captured scalars]: a step captures its scalars by value. Captured by reference, they are the caller's
/// variables, whose addresses the compiler cannot tell from `out`'s: every store through out might change them, so
/// each iteration reloaded and re-broadcast all of them (six loads, four adds and eight broadcasts for eight
/// floats at AVX2). fake_quantize, one core: AVX2 0.32 -> 0.17 ns a float, AVX-512 0.21 -> 0.15, baseline 0.71 ->
/// 0.33; at AVX2 it was a sixth of an int8 mobilenet_v2's time, which the float path rounds layer by layer.
template <int L, class Step>
[[gnu::always_inline]] inline void map_floats(const float* in, float* out, int64_t n, Step step) {
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    kernels::vec::Vec<L> v;
    kernels::vec::load(v, in + i);
    kernels::vec::store(out + i, step(v));
  }
  if (i + L / 2 <= n) {
    kernels::vec::Vec<L / 2> v;
    kernels::vec::load(v, in + i);
    kernels::vec::store(out + i, step(v));
    i += L / 2;
  }
  for (; i < n; ++i) out[i] = step(in[i]);
}

}  // namespace detail

/// Clamps `in` to [lo, hi] (a node's output_min_max; infinite for none), then rounds it onto the grid of
/// (scale, zero point) within the type's range r, and writes the dequantized value to `out` (which may be `in`):
/// one pass for what a copy, a clamp and a requantize would do in three.
inline void fake_quantize(const float* in, float* out, int64_t n, float scale, int32_t zero_point, QRange r,
                          float lo = -std::numeric_limits<float>::infinity(),
                          float hi = std::numeric_limits<float>::infinity()) {
  const float inv = 1.f / scale;
  const float qlo = static_cast<float>(r.lo - zero_point), qhi = static_cast<float>(r.hi - zero_point);
  if (std::max(-qlo, qhi) > 4194304.f) {  // a 32-bit grid (a file may declare one): beyond round_small's 2^22
    for (int64_t i = 0; i < n; ++i)
      out[i] = std::min(std::max(std::nearbyint(std::min(std::max(in[i], lo), hi) * inv), qlo), qhi) * scale;
    return;
  }
  // All levels: the packed nodes' block finish runs this on blocks still in cache, where arithmetic bounds it.
  kernels::isa::dispatch_lanes([&]<int L>() ETRT_ISA_INLINE {
    detail::map_floats<L>(in, out, n, [=](auto v) ETRT_ISA_INLINE {
      return detail::grid_point(detail::clamped(v, lo, hi), inv, qlo, qhi, scale);
    });
  });
}
/// In place.
inline void fake_quantize(float* x, int64_t n, float scale, int32_t zero_point, QRange r) {
  fake_quantize(x, x, n, scale, zero_point, r);
}

/// out = fake_quantize(fake_quantize(in onto a), onto b, clamped to [lo, hi]) in one pass; `in` is not written (a
/// packed node's output and the Clamp or Convert that alone reads it, Note [xnnpack block finish]).
inline void fake_requantize(const float* in, float* out, int64_t n, const Grid& a, const Grid& b, float lo, float hi) {
  const float qlo_a = static_cast<float>(a.range.lo - a.zero_point);
  const float qhi_a = static_cast<float>(a.range.hi - a.zero_point);
  const float qlo_b = static_cast<float>(b.range.lo - b.zero_point);
  const float qhi_b = static_cast<float>(b.range.hi - b.zero_point);
  if (std::max({-qlo_a, qhi_a, -qlo_b, qhi_b}) > 4194304.f) {  // a 32-bit grid: the two exact passes, via out
    fake_quantize(in, out, n, a.scale, a.zero_point, a.range);
    fake_quantize(out, out, n, b.scale, b.zero_point, b.range, lo, hi);
    return;
  }
  const float inv_a = 1.f / a.scale, inv_b = 1.f / b.scale;
  kernels::isa::dispatch_lanes([&]<int L>() ETRT_ISA_INLINE {  // on blocks in cache, as fake_quantize
    detail::map_floats<L>(in, out, n, [=](auto v) ETRT_ISA_INLINE {
      const auto on_a = detail::grid_point(v, inv_a, qlo_a, qhi_a, a.scale);
      return detail::grid_point(detail::clamped(on_a, lo, hi), inv_b, qlo_b, qhi_b, b.scale);
    });
  });
}

/// Asymmetric int8 parameters of one row (its range widened to include 0), as XNNPACK's dynamic quantization
/// chooses them: the multiplier 255 / (max - min) and a zero point nudged to an integer within [-128, 127].
struct DynamicParams {
  float inv_scale;
  int32_t zero_point;
};
inline DynamicParams dynamic_params(float lo, float hi) {
  const float qmin = -128.f, qmax = 127.f;
  const float rmin = std::min(0.f, lo), rmax = std::max(0.f, hi);
  const float inv = rmin == rmax || !std::isfinite(rmax - rmin) ? 1.f : (qmax - qmin) / (rmax - rmin);
  const float rmin_s = rmin * inv, rmax_s = rmax * inv;
  float zp = (qmin + rmin_s) + (qmax + rmax_s) > 0 ? qmin - rmin_s : qmax - rmax_s;
  zp = std::min(std::max(zp, qmin), qmax);
  return {inv, static_cast<int32_t>(std::nearbyint(zp))};
}

namespace detail {

/// The smallest and largest of x[0, n), n >= 1, exactly as a std::min / std::max chain from x[0] finds them (a NaN
/// after the first element is passed over), Lanes at a time.
template <int Lanes>
[[gnu::always_inline]] inline void row_range(const float* x, int64_t n, float& lo, float& hi) {
  using V = kernels::vec::Vec<Lanes>;
  lo = hi = x[0];
  int64_t i = 0;
  if (n >= Lanes) {
    V vlo = V{} + x[0], vhi = vlo, v;
    for (; i + Lanes <= n; i += Lanes) {
      kernels::vec::load(v, x + i);
      vlo = v < vlo ? v : vlo;
      vhi = v > vhi ? v : vhi;
    }
    for (int l = 0; l < Lanes; ++l) {
      lo = vlo[l] < lo ? vlo[l] : lo;
      hi = vhi[l] > hi ? vhi[l] : hi;
    }
  }
  for (; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
}

}  // namespace detail

/// Dynamic per-token quantization of `x` (rows of `row` elements), in place; each row's parameters go to
/// `params[row]` when `params` is given (the integer kernels read them: qd8_gemm.h). With `round_values` false only
/// the parameters are computed: for a value only the integer kernels read, which derive the same bytes from the
/// unrounded floats (Note [qd8 inputs left unrounded]).
inline void fake_quantize_dynamic(float* x, int64_t n, int64_t row, DynamicParams* params = nullptr,
                                  bool round_values = true) {
  if (row <= 0) return;
  for (int64_t at = 0; at + row <= n; at += row) {
    float lo, hi;
    kernels::isa::dispatch_lanes<8>([&]<int L>() ETRT_ISA_INLINE { detail::row_range<L>(x + at, row, lo, hi); });
    const DynamicParams p = dynamic_params(lo, hi);
    if (params) params[at / row] = p;
    if (!round_values) continue;
    const float scale = 1.f / p.inv_scale;
    const float qlo = static_cast<float>(-128 - p.zero_point), qhi = static_cast<float>(127 - p.zero_point);
    kernels::isa::dispatch_lanes<8>([&]<int L>() ETRT_ISA_INLINE {
      detail::map_floats<L>(x + at, x + at, row, [=](auto v) ETRT_ISA_INLINE {
        return detail::grid_point(v, p.inv_scale, qlo, qhi, scale);
      });
    });
  }
}

namespace detail {

/// The stored integer of element (row, col) of a 2-D 4-bit constant: two per byte along the row, low nibble first,
/// each stored as value + 8.
inline int32_t nibble(const uint8_t* data, int64_t row, int64_t col, int64_t cols) {
  const uint8_t b = data[row * ((cols + 1) / 2) + col / 2];
  return static_cast<int32_t>((col % 2 ? b >> 4 : b & 0xF)) - 8;
}

inline int32_t load_int(Datatype d, const uint8_t* p, int64_t i) {
  switch (d) {
    case Datatype::QUInt8: return p[i];
    case Datatype::QInt8: case Datatype::QCInt8: return static_cast<int8_t>(p[i]);
    default: {
      int32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
  }
}

}  // namespace detail

/// Dequantizes rows [row0, row0 + rows) of a 2-D per-channel or blockwise weight [out, in] into `out`
/// (rows x in floats): what a fully-connected node reads, a block at a time, so the weight stays quantized in memory.
inline void dequantize_rows(Datatype d, const Quant& q, std::span<const int64_t> dims, const uint8_t* data,
                            int64_t row0, int64_t rows, float* out) {
  const int64_t cols = dims[1];
  const bool four_bit = d == Datatype::QCInt4 || d == Datatype::QBInt4;
  for (int64_t r = row0; r < row0 + rows; ++r) {
    float* o = out + (r - row0) * cols;
    if (q.kind == QuantKind::PerChannelGroup) {
      const int64_t groups = cols / q.group_size;
      for (int64_t c = 0; c < cols; ++c)
        o[c] = static_cast<float>(detail::nibble(data, r, c, cols)) * q.scales[r * groups + c / q.group_size];
    } else if (four_bit) {
      for (int64_t c = 0; c < cols; ++c)
        o[c] = static_cast<float>(detail::nibble(data, r, c, cols)) * q.scales[q.channel_dim == 0 ? r : c];
    } else {
      const int8_t* row = reinterpret_cast<const int8_t*>(data) + r * cols;
      for (int64_t c = 0; c < cols; ++c) o[c] = static_cast<float>(row[c]) * q.scales[q.channel_dim == 0 ? r : c];
    }
  }
}

/// Dequantizes a quantized constant (validated by parse_quant / parse_value) into `out` (numel floats).
inline void dequantize_constant(Datatype d, const Quant& q, std::span<const int64_t> dims, int64_t numel,
                                const uint8_t* data, float* out) {
  if ((d == Datatype::QCInt4 || d == Datatype::QBInt4) && dims.size() == 2) {
    dequantize_rows(d, q, dims, data, 0, dims[0], out);
    return;
  }
  if (q.kind == QuantKind::PerTensor) {
    for (int64_t i = 0; i < numel; ++i)
      out[i] = static_cast<float>(static_cast<int64_t>(detail::load_int(d, data, i)) - q.zero_point) * q.scale;
    return;
  }
  // Per channel: channel of flat index i = (i / inner) % dims[channel_dim].
  int64_t inner = 1;
  for (size_t k = q.channel_dim + 1; k < dims.size(); ++k) inner *= dims[k];
  const int64_t channels = dims[q.channel_dim];
  for (int64_t i = 0; i < numel; ++i)
    out[i] = static_cast<float>(detail::load_int(d, data, i)) * q.scales[(i / inner) % channels];
}

/// Boundary conversions of a quantized (per-tensor) external value.
inline void dequantize_external(Datatype d, const Quant& q, const void* in, float* out, int64_t n) {
  dequantize_constant(d, q, {}, n, static_cast<const uint8_t*>(in), out);
}
inline void quantize_external(Datatype d, const Quant& q, const float* in, void* out, int64_t n) {
  const float inv = 1.f / q.scale;
  const QRange r = qrange(d);
  for (int64_t i = 0; i < n; ++i) {
    float v = std::nearbyint(in[i] * inv) + static_cast<float>(q.zero_point);
    if (std::isnan(v)) v = static_cast<float>(q.zero_point);  // an integer conversion of NaN is undefined
    v = std::min(std::max(v, static_cast<float>(r.lo)), static_cast<float>(r.hi));
    if (d == Datatype::QUInt8) static_cast<uint8_t*>(out)[i] = static_cast<uint8_t>(v);
    else static_cast<int8_t*>(out)[i] = static_cast<int8_t>(v);
  }
}

}  // namespace etrt::xnnpack::quant
