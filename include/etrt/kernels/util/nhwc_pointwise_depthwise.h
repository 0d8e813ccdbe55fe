// A pointwise (1x1) convolution whose output only a depthwise convolution reads, run band by band of rows so that
// the wide tensor between them never leaves the cache: the expansion and depthwise layers of an inverted residual
// block (MobileNetV2, EfficientNet).
//
// Note [pointwise then depthwise]: an inverted residual block widens its input six-fold with a pointwise
// convolution, then runs a depthwise one over the wide tensor. Run one after the other, the wide tensor (mobilenet_v2's
// 112 x 112 x 96: 4.8 MB) is written out to memory by the first and read back by the second: on a 2-core Zen 4
// (1 MB of L2 a core) its 16 -> 96 expansion ran at 40% of the FMA peak and the stride-2 depthwise layer after it
// at a fifth of its in-cache speed. Here each thread takes a range of the depthwise layer's output rows and walks
// it a few rows at a time: the pointwise product writes the input rows those output rows' windows read into a band
// of the thread's own (kBandBytes, in L2), and the depthwise loop reads its windows from the band. Consecutive steps
// share the KH - sh window rows their windows overlap in: moved to the band's top, not computed twice; only the
// first step of each thread's range computes them afresh. Each element is the sum the two layers give run apart
// (the same micro-kernels over the same K order, the same taps in the same order), so the outputs are identical.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

#include "etrt/core/aligned_buffer.h"
#include "etrt/kernels/util/nhwc_conv.h"
#include "etrt/kernels/util/packed_gemm.h"
#include "etrt/kernels/util/parallel.h"

namespace etrt::kernels::nhwc {

/// The band a thread keeps the pointwise layer's rows in (Note [pointwise then depthwise]): within a quarter of a
/// Zen 4 core's L2, beside the rows the depthwise layer writes and the filters.
inline constexpr int64_t kBandBytes = 256 * 1024;

/// The smallest tensor between the two layers worth the bands: one that may not stay in a core's L2 (1 MB on Zen 4)
/// between them. A smaller one is read back from cache, and each thread's range would only add the rows it shares
/// with the range before.
inline constexpr int64_t kPointwiseDepthwiseMinBytes = 2 << 20;

/// Whether pointwise_depthwise takes these layers: `pw` a pointwise convolution whose output [N, H, W, C] is
/// `dw`'s input, `dw` a depthwise one with one output per channel, no dilation along H and a window within
/// kMaxDepthwiseTaps.
inline bool pointwise_depthwise_fits(const Geometry& pw, const Geometry& dw) {
  return pw.valid() && dw.valid() && pw.pointwise() && dw.N == pw.N && dw.H == pw.OH && dw.W == pw.OW &&
         dw.C == pw.O && dw.O == dw.C && dw.dh == 1 && dw.KH * dw.KW <= kMaxDepthwiseTaps;
}

namespace detail {

/// Depthwise output rows a band step makes: as many as keep the band's input rows, (rows - 1) x sh + KH, within
/// kBandBytes, at least one.
inline int64_t band_step_rows(const Geometry& dw) {
  const int64_t row_bytes = dw.W * dw.C * static_cast<int64_t>(sizeof(float));
  const int64_t rows = std::max<int64_t>(kBandBytes / std::max<int64_t>(row_bytes, 1), dw.KH);
  return std::max<int64_t>(1, (rows - dw.KH) / dw.sh + 1);
}
inline int64_t band_floats(const Geometry& dw) { return ((band_step_rows(dw) - 1) * dw.sh + dw.KH) * dw.W * dw.C; }

struct BandScratch;  // the tag of the calling thread's band (core/aligned_buffer.h's thread_scratch)

/// Depthwise output rows [r0, r1) (row = n * OH + oh) on one thread (Note [pointwise then depthwise]).
inline void pointwise_depthwise_rows(const Geometry& pw, const float* in, const gemm::PackedB& B,
                                     const gemm::Epilogue& pw_ep, const Geometry& dw, const float* filter,
                                     const gemm::Epilogue& dw_ep, float* out, int64_t r0, int64_t r1, float* band,
                                     DepthwiseFn depthwise_rows) {
  const int64_t step = band_step_rows(dw), row_floats = dw.W * dw.C, out_row = dw.OW * dw.O;
  int64_t held_n = -1, held_a = 0, held_b = 0;  // the band holds input rows [held_a, held_b) of image held_n
  for (int64_t r = r0; r < r1;) {
    const int64_t n = r / dw.OH, oa = r % dw.OH, ob = std::min({dw.OH, oa + step, oa + (r1 - r)});
    // The input rows the windows of output rows [oa, ob) read, within the input.
    const int64_t ia = std::clamp<int64_t>(oa * dw.sh - dw.pt, 0, dw.H);
    const int64_t ib = std::clamp<int64_t>((ob - 1) * dw.sh - dw.pt + dw.KH, ia, dw.H);
    int64_t from = ia;  // the first row not already in the band
    if (held_n == n && held_a <= ia && ia < held_b) {
      std::memmove(band, band + (ia - held_a) * row_floats,
                   static_cast<size_t>((held_b - ia) * row_floats) * sizeof(float));
      from = held_b;
    }
    if (ib > from)
      gemm::packed_gemm_here((ib - from) * pw.W, B, pw_ep, band + (from - ia) * row_floats, pw.O,
                             gemm::MatrixRows{in + (n * pw.H + from) * pw.W * pw.C, pw.C});
    held_n = n, held_a = ia, held_b = std::max(ib, from);
    // The band as an image of its rows alone: output row oa's window starts at band row oa x sh - pt - ia.
    Geometry g = dw;
    g.N = 1;
    g.H = ib - ia;
    g.OH = ob - oa;
    g.pt = dw.pt + ia - oa * dw.sh;
    float* o = out + (n * dw.OH + oa) * out_row;
    depthwise_rows(g, 1, band, filter, dw_ep, o, 0, ob - oa);
    for (int64_t k = 0; k < ob - oa; ++k) dw_ep.finish_block(o + k * out_row, dw.OW, dw.O, dw.O);
    r += ob - oa;
  }
}

}  // namespace detail

/// out [N, OH, OW, C] = the depthwise convolution (filter [KH, KW, C], dw_ep) of the pointwise convolution (B, pw_ep)
/// of in [N, H, W, Cin], without storing the latter (Note [pointwise then depthwise]). pw_ep's finish runs on the
/// band's blocks: it must work in place. False (nothing written) where pointwise_depthwise_fits does not hold or a
/// thread's band cannot be allocated.
inline bool pointwise_depthwise(const Geometry& pw, const float* in, const gemm::PackedB& B,
                                const gemm::Epilogue& pw_ep, const Geometry& dw, const float* filter,
                                const gemm::Epilogue& dw_ep, float* out) {
  if (!pointwise_depthwise_fits(pw, dw) || B.k != pw.C || B.n != pw.O) return false;
  const detail::DepthwiseFn fn = detail::pick_depthwise();
  const int64_t rows = dw.N * dw.OH, floats = detail::band_floats(dw);
  std::atomic<bool> failed{false};
  const auto run = [&](int64_t r0, int64_t r1) {
    float* band = thread_scratch<float, detail::BandScratch>(static_cast<size_t>(floats));
    if (!band) {
      failed = true;
      return;
    }
    detail::pointwise_depthwise_rows(pw, in, B, pw_ep, dw, filter, dw_ep, out, r0, r1, band, fn);
  };
  // One range a thread: each range's first step computes the rows its windows share with the range before.
  const int64_t work = pw.N * pw.H * pw.W * pw.C * pw.O;
  if (work < min_parallel_work() || rows < 2) run(0, rows);
  else parallel_for(rows, 1, run);
  return !failed;
}

}  // namespace etrt::kernels::nhwc
