// A fully-connected node on a weight that stays quantized (4-bit blockwise, 4-bit or 8-bit per channel) when the
// activation has few rows: an LLM's decode step multiplies one token's row by every weight. Each weight row is
// decoded into a k-float buffer that stays in L1 and dotted with the activation rows while it is there, so the
// weight is read once, as bytes, and no GEMM packing (which pads the single row to a full register tile) runs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>

#include "etrt/backends/xnnpack/quantization.h"
#include "etrt/kernels/util/fast_math.h"
#include "etrt/kernels/util/isa.h"
#include "etrt/kernels/util/parallel.h"
#include "etrt/kernels/util/vec.h"

namespace etrt::xnnpack::quant {

/// Activations with at most this many rows take the row-at-a-time path (a decode step, or a short prompt); more
/// rows amortize the GEMM's packing.
inline constexpr int64_t kGemvMaxRows = 16;
/// The widest weight row the path decodes (its buffer lives on the stack: 32 KiB, about one L1 data cache).
inline constexpr int64_t kGemvMaxCols = 8192;

namespace detail {

/// How a weight row is decoded: 4-bit rows with one scale per block of whole bytes (blockwise, or per output
/// channel, where the block is the row) split into even and odd columns; 8-bit rows with one scale per output
/// channel directly; any other layout through dequantize_rows.
enum class RowLayout { Nibbles, Bytes, Other };
struct RowDecoder {
  RowLayout layout = RowLayout::Other;
  int64_t group = 0;  // Nibbles: columns per scale
};
inline RowDecoder row_decoder(Datatype d, const Quant& q, int64_t cols) {
  const bool four_bit = d == Datatype::QCInt4 || d == Datatype::QBInt4;
  if (four_bit && cols % 2 == 0 && q.kind == QuantKind::PerChannelGroup && q.group_size % 2 == 0)
    return {RowLayout::Nibbles, q.group_size};
  if (four_bit && cols % 2 == 0 && q.kind == QuantKind::PerChannel && q.channel_dim == 0)
    return {RowLayout::Nibbles, cols};
  if (!four_bit && q.kind == QuantKind::PerChannel && q.channel_dim == 0 && d == Datatype::QCInt8)
    return {RowLayout::Bytes, cols};
  return {};
}

typedef uint8_t Bytes8 __attribute__((vector_size(8)));  // 8 weight bytes, widened into vec::IVec<8>

/// Weight row `r` of a 4-bit [rows, cols] constant (two values per byte, low nibble first, each stored as value +
/// 8) as floats (value x its block's scale), de-interleaved: even columns into `we`, odd ones into `wo` (cols / 2
/// each). Two contiguous streams from one byte stream vectorize without shuffles; the activation rows are split
/// the same way once per call.
[[gnu::always_inline]] inline void decode_nibbles(const Quant& q, int64_t cols, int64_t group, const uint8_t* data,
                                                  int64_t r, float* we, float* wo) {
  const int64_t groups = cols / group, half = group / 2;
  const uint8_t* src = data + r * (cols / 2);
  const float* scales = q.scales.data() + r * groups;
  for (int64_t g = 0; g < groups; ++g) {
    const float s = scales[g];
    const uint8_t* b = src + g * half;
    float* e = we + g * half;
    float* o = wo + g * half;
    int64_t j = 0;
    for (; j + 8 <= half; j += 8) {  // 8 bytes -> 8 even and 8 odd values (the vectorizer leaves this loop scalar)
      Bytes8 raw;
      std::memcpy(&raw, b + j, sizeof raw);
      const kernels::vec::IVec<8> v = __builtin_convertvector(raw, kernels::vec::IVec<8>);
      const kernels::vec::Vec<8> lo = __builtin_convertvector((v & 0xF) - 8, kernels::vec::Vec<8>) * s;
      const kernels::vec::Vec<8> hi = __builtin_convertvector((v >> 4) - 8, kernels::vec::Vec<8>) * s;
      std::memcpy(e + j, &lo, sizeof lo);
      std::memcpy(o + j, &hi, sizeof hi);
    }
    for (; j < half; ++j) {
      e[j] = static_cast<float>(static_cast<int32_t>(b[j] & 0xF) - 8) * s;
      o[j] = static_cast<float>(static_cast<int32_t>(b[j] >> 4) - 8) * s;
    }
  }
}

/// Weight row `r` of an 8-bit per-output-channel [rows, cols] constant as floats.
[[gnu::always_inline]] inline void decode_bytes(const Quant& q, int64_t cols, const uint8_t* data, int64_t r, float* w) {
  const int8_t* row = reinterpret_cast<const int8_t*>(data) + r * cols;
  const float s = q.scales[r];
  for (int64_t c = 0; c < cols; ++c) w[c] = static_cast<float>(row[c]) * s;
}

}  // namespace detail

/// out[i, n] = sum_k x[i, k] * W(n, k) + bias[n] for i < m (m <= kGemvMaxRows), W the [N, K] quantized weight
/// (K <= kGemvMaxCols); `out` rows are `N` apart. `scratch` holds m x K floats (the activation rows, split into even
/// and odd columns for the 4-bit layout). Output rows split across the worker pool when the product is large.
inline void quantized_gemv(Datatype d, const Quant& q, std::span<const int64_t> dims, const uint8_t* data,
                           const float* x, int64_t m, const float* bias, float* out, float* scratch) {
  const int64_t rows = dims[0], k = dims[1], h = k / 2;
  const detail::RowDecoder dec = detail::row_decoder(d, q, k);
  const bool split = dec.layout == detail::RowLayout::Nibbles;
  if (split)  // row i: its even columns at scratch[i * k], its odd ones at scratch[i * k + h]
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < h; ++j) {
        scratch[i * k + j] = x[i * k + 2 * j];
        scratch[i * k + h + j] = x[i * k + 2 * j + 1];
      }
  auto run = [&](int64_t n0, int64_t n1) {
    alignas(64) float w[kGemvMaxCols];
    kernels::isa::dispatch([&]() ETRT_ISA_INLINE {
      for (int64_t n = n0; n < n1; ++n) {
        const float b = bias ? bias[n] : 0.f;
        if (split) {
          detail::decode_nibbles(q, k, dec.group, data, n, w, w + h);
          for (int64_t i = 0; i < m; ++i)
            out[i * rows + n] =
                kernels::dot_lanes(scratch + i * k, w, h) + kernels::dot_lanes(scratch + i * k + h, w + h, h) + b;
          continue;
        }
        if (dec.layout == detail::RowLayout::Bytes) detail::decode_bytes(q, k, data, n, w);
        else dequantize_rows(d, q, dims, data, n, 1, w);
        for (int64_t i = 0; i < m; ++i) out[i * rows + n] = kernels::dot_lanes(x + i * k, w, k) + b;
      }
    });
  };
  if (m * rows * k < kernels::min_parallel_work() || rows < 16) run(0, rows);
  else kernels::parallel_for(rows, 8, run);
}

}  // namespace etrt::xnnpack::quant
