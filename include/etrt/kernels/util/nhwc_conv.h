// 2-D convolution on NHWC activations (the layout XNNPACK payloads use), float:
//   - a convolution with OHWI filters is a GEMM of the input windows (A: one row per output pixel, K = KH * KW * C
//     in the filter's (kh, kw, c) order) by the packed filter (util/packed_gemm.h); WindowRows packs A straight
//     from the input, padding taps as zeros, so no im2col buffer exists;
//   - a depthwise convolution (a [1, KH, KW, C * M] filter, M outputs per input channel) is a direct loop that runs
//     along the channels, which are contiguous in NHWC, compiled for AVX-512, AVX2 + FMA and the baseline and picked
//     at run time like the GEMM's micro-kernels; 3x3 and 5x5 windows keep their weights in registers over a row's
//     interior (Note [depthwise interior]).
//   - a convolution of a statically quantized input by an int8 filter is the int8 GEMM (util/qgemm.h) of the same
//     windows, gathered from the input turned back into bytes once per call (ByteWindowRows; ByteRows in place
//     for a pointwise convolution).
// All add the bias and clamp as they write the output. Geometry is checked by the caller (NhwcGeometry::valid).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "etrt/core/aligned_buffer.h"
#include "etrt/kernels/util/gemm.h"
#include "etrt/kernels/util/packed_gemm.h"
#include "etrt/kernels/util/parallel.h"
#include "etrt/kernels/util/qgemm.h"
#include "etrt/kernels/util/vec.h"

namespace etrt::kernels::nhwc {

struct Geometry {
  int64_t N = 0, H = 0, W = 0, C = 0;  // input [N, H, W, C]
  int64_t OH = 0, OW = 0, O = 0;       // output [N, OH, OW, O]
  int64_t KH = 1, KW = 1;
  int64_t sh = 1, sw = 1, dh = 1, dw = 1;
  int64_t pt = 0, pl = 0, pb = 0, pr = 0;

  static int64_t out_size(int64_t in, int64_t pad_a, int64_t pad_b, int64_t k, int64_t s, int64_t d) {
    const int64_t span = d * (k - 1) + 1;
    return in + pad_a + pad_b < span ? 0 : (in + pad_a + pad_b - span) / s + 1;
  }
  /// Every size positive (the batch may be 0), strides and dilations >= 1, the output size what the input,
  /// padding and window give, and every product within int64.
  bool valid() const {
    constexpr int64_t kMax = int64_t{1} << 31;
    for (int64_t v : {H, W, C, OH, OW, O, KH, KW, sh, sw, dh, dw})
      if (v < 1 || v > kMax) return false;
    for (int64_t v : {N, pt, pl, pb, pr})
      if (v < 0 || v > kMax) return false;
    return OH == out_size(H, pt, pb, KH, sh, dh) && OW == out_size(W, pl, pr, KW, sw, dw);
  }
  /// Output columns [lo, hi) whose window lies wholly inside the input along W, for a window without dilation along
  /// W; hi >= lo (an empty range where no window fits).
  std::pair<int64_t, int64_t> inside_columns() const {
    const int64_t lo = std::min(OW, (pl + sw - 1) / sw);
    const int64_t last = W - KW + pl;  // the largest ow * sw a window inside the input may start at
    return {lo, last < 0 ? lo : std::max(lo, std::min(OW, last / sw + 1))};
  }
  bool pointwise() const {
    return KH == 1 && KW == 1 && sh == 1 && sw == 1 && pt == 0 && pl == 0 && pb == 0 && pr == 0 && OH == H && OW == W;
  }
};

/// f(tap, pixel) for each tap of output pixel (n, oh, ow)'s window that lies inside the input: tap = kh * KW + kw,
/// pixel the input's channels there (floats, or bytes). Padding taps are skipped.
template <class T, class F>
[[gnu::always_inline]] inline void for_each_tap(const Geometry& g, const T* in, int64_t n, int64_t oh, int64_t ow,
                                                F&& f) {
  for (int64_t kh = 0; kh < g.KH; ++kh) {
    const int64_t ih = oh * g.sh - g.pt + kh * g.dh;
    if (ih < 0 || ih >= g.H) continue;
    for (int64_t kw = 0; kw < g.KW; ++kw) {
      const int64_t iw = ow * g.sw - g.pl + kw * g.dw;
      if (iw < 0 || iw >= g.W) continue;
      f(kh * g.KW + kw, in + ((n * g.H + ih) * g.W + iw) * g.C);
    }
  }
}

/// The largest depthwise window the direct loop takes (its tap list lives on the stack); the caller checks it.
inline constexpr int64_t kMaxDepthwiseTaps = 64;

namespace detail {

/// dst[0, n) = src[0, n) for the short runs a window gather copies (a 3-channel stem's kernel row is 9 floats): fixed-
/// size, overlapping copies that compile to a few vector moves, where a library call per run cost more than the
/// copy (std::copy of a trivial type is one).
template <class T>
[[gnu::always_inline]] inline void copy_run(const T* src, T* dst, int64_t n) {
  const auto* s = reinterpret_cast<const unsigned char*>(src);
  auto* d = reinterpret_cast<unsigned char*>(dst);
  size_t b = static_cast<size_t>(n) * sizeof(T);
  if (b > 256) {
    std::memcpy(d, s, b);
    return;
  }
  for (; b > 32; b -= 32, s += 32, d += 32) std::memcpy(d, s, 32);
  // 0 < b <= 32 bytes left: two copies of a power-of-two size that overlap in the middle.
  if (b >= 16) {
    std::memcpy(d, s, 16);
    std::memcpy(d + b - 16, s + b - 16, 16);
  } else if (b >= 8) {
    std::memcpy(d, s, 8);
    std::memcpy(d + b - 8, s + b - 8, 8);
  } else if (b >= 4) {
    std::memcpy(d, s, 4);
    std::memcpy(d + b - 4, s + b - 4, 4);
  } else {
    for (size_t i = 0; i < b; ++i) d[i] = s[i];
  }
}

}  // namespace detail

/// Columns [pc, pc + kc) of the window row of output pixel `row` (= (n * OH + oh) * OW + ow), columns (kh, kw, c)
/// for input channels [c0, c0 + cg), into dst; a padding tap is `pad`. Where the taps of one kernel row are
/// neighbouring pixels holding only this group's channels (no groups, no dilation), they are one run: a 3x3
/// window is three copies, a 3-channel stem's 27 values three rather than nine.
template <class T>
inline void gather_window(const Geometry& g, const T* in, int64_t c0, int64_t cg, int64_t row, int64_t pc,
                          int64_t kc, T pad, T* dst) {
  const int64_t ow = row % g.OW, t = row / g.OW, oh = t % g.OH, n = t / g.OH;
  const int64_t ih0 = oh * g.sh - g.pt, iw0 = ow * g.sw - g.pl;
  const bool runs = cg == g.C && g.dw == 1;
  int64_t p = pc;
  while (p < pc + kc) {
    const int64_t tap = p / cg, c = p % cg, kw = tap % g.KW;
    const int64_t ih = ih0 + (tap / g.KW) * g.dh, iw = iw0 + kw * g.dw;
    T* out = dst + (p - pc);
    const bool inside = ih >= 0 && ih < g.H && iw >= 0 && iw < g.W;
    int64_t len = cg - c;
    if (inside && runs) {
      int64_t end = kw + 1;  // the following taps of this kernel row that are inside too
      while (end < g.KW && iw0 + end < g.W) ++end;
      len = (end - kw) * cg - c;
    }
    len = std::min(len, pc + kc - p);
    if (!inside) std::fill(out, out + len, pad);
    else detail::copy_run(in + ((n * g.H + ih) * g.W + iw) * g.C + c0 + c, dst + (p - pc), len);
    p += len;
  }
}

/// Whole window rows [row, row + rows) (all KH * KW * C columns, row r at dst + r * ld) where every kernel row's
/// inside taps are one run (no groups, no dilation along W): per kernel row, one copy between the padding fills,
/// and the output pixel steps along without a division. A convolution with K in one block packs all of A so.
template <class T>
inline void gather_whole_windows(const Geometry& g, const T* in, int64_t row, int64_t rows, T pad, T* dst,
                                 int64_t ld) {
  int64_t ow = row % g.OW, oh = row / g.OW % g.OH, n = row / g.OW / g.OH;
  const int64_t C = g.C, run = g.KW * C;
  for (int64_t r = 0; r < rows; ++r) {
    T* out = dst + r * ld;
    const int64_t ih0 = oh * g.sh - g.pt, iw0 = ow * g.sw - g.pl;
    // The taps [kw0, kw1) of a kernel row lie inside the input's width.
    const int64_t kw0 = std::clamp<int64_t>(-iw0, 0, g.KW), kw1 = std::clamp<int64_t>(g.W - iw0, kw0, g.KW);
    for (int64_t kh = 0; kh < g.KH; ++kh, out += run) {
      const int64_t ih = ih0 + kh * g.dh;
      if (ih < 0 || ih >= g.H || kw0 == kw1) {
        std::fill(out, out + run, pad);
        continue;
      }
      // The fills only at the edges: an empty std::fill of bytes is still a call to memset, and six of them per
      // window row took half the time of a 3-channel stem's int8 convolution.
      if (kw0 > 0) std::fill(out, out + kw0 * C, pad);
      detail::copy_run(in + ((n * g.H + ih) * g.W + iw0 + kw0) * C, out + kw0 * C, (kw1 - kw0) * C);
      if (kw1 < g.KW) std::fill(out + kw1 * C, out + run, pad);
    }
    if (++ow == g.OW) {
      ow = 0;
      if (++oh == g.OH) oh = 0, ++n;
    }
  }
}

/// gather_whole_windows for byte windows whose kernel rows are at most Move bytes (KW * C <= 16: a 3-channel stem's
/// 3 x 3 window is 9; <= 32: a 7 x 7 one is 21): a window inside the input copies each kernel row as one Move-byte
/// move, the bytes past the row landing where the next kernel row or the next window row is written after it.
/// Copying the 9 bytes exactly (two overlapping 8-byte moves and the edge checks per kernel row) took as long as the
/// stem's whole int8 GEMM, and copying resnet18's 21 exactly a quarter of its 7 x 7 stem's int8 convolution (with
/// the row tails zeroed without a memset call, qgemm::detail::block, one Zen 4 core: 820 -> 705-740 us). dst needs
/// Move writable bytes past the last row's KH * KW * C; in needs Move readable bytes past a window's last kernel row
/// (conv_input_bytes gives 64).
template <int Move>
inline void gather_short_windows(const Geometry& g, const uint8_t* in, int64_t row, int64_t rows, uint8_t pad,
                                 uint8_t* dst, int64_t ld) {
  int64_t ow = row % g.OW, oh = row / g.OW % g.OH, n = row / g.OW / g.OH;
  const int64_t run = g.KW * g.C, pixel_row = g.W * g.C;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t ih0 = oh * g.sh - g.pt, iw0 = ow * g.sw - g.pl;
    if (ih0 >= 0 && ih0 + (g.KH - 1) * g.dh < g.H && iw0 >= 0 && iw0 + g.KW <= g.W) {
      const uint8_t* src = in + ((n * g.H + ih0) * g.W + iw0) * g.C;
      uint8_t* out = dst + r * ld;
      for (int64_t kh = 0; kh < g.KH; ++kh) std::memcpy(out + kh * run, src + kh * g.dh * pixel_row, Move);
    } else {
      gather_whole_windows(g, in, row + r, 1, pad, dst + r * ld, ld);
    }
    if (++ow == g.OW) {
      ow = 0;
      if (++oh == g.OH) oh = 0, ++n;
    }
  }
}

/// Packs rows of A = the input windows for output pixels (row r = (n * OH + oh) * OW + ow), columns (kh, kw, c) for
/// input channels [c0, c0 + cg) (a group's channels), each row kc contiguous floats (gemm's kRowMajor packers).
struct WindowRows {
  const Geometry& g;
  const float* in;
  int64_t c0;
  int64_t cg;
  static constexpr bool kRowMajor = true;

  const float* direct(int64_t, int64_t, int64_t&) const { return nullptr; }  // windows are always gathered

  void operator()(int64_t i, int64_t rows, int64_t pc, int64_t kc, int /*mr*/, float* dst) const {
    if (pc == 0 && kc == g.KH * g.KW * cg && cg == g.C && g.dw == 1) return gather_whole_windows(g, in, i, rows, 0.f, dst, kc);
    for (int64_t r = 0; r < rows; ++r) gather_window(g, in, c0, cg, i + r, pc, kc, 0.f, dst + r * kc);
  }
};

/// The quantization of a float activation held on its grid back to the bytes the int8 GEMM reads (Note [int8
/// gemm]): byte = round(x / scale) + zero, where zero = zero_point + offset.
struct ToBytes {
  float inv_scale = 1.f;
  int32_t zero = 0;
};

/// WindowRows for the int8 GEMM, over the input already turned into bytes (ToBytes): a row of A is the window's
/// taps' bytes, a padding tap `pad` (the byte of the real number 0).
struct ByteWindowRows {
  const Geometry& g;
  const uint8_t* in;
  int64_t c0;
  int64_t cg;
  uint8_t pad;

  const uint8_t* direct(int64_t, int64_t&) const { return nullptr; }  // windows are always gathered

  void operator()(int64_t i, int64_t rows, uint8_t* dst, int64_t lda) const {
    const int64_t k = g.KH * g.KW * cg;
    if (cg == g.C && g.dw == 1 && g.KW * g.C <= 16) return gather_short_windows<16>(g, in, i, rows, pad, dst, lda);
    if (cg == g.C && g.dw == 1 && g.KW * g.C <= 32) return gather_short_windows<32>(g, in, i, rows, pad, dst, lda);
    if (cg == g.C && g.dw == 1) return gather_whole_windows(g, in, i, rows, pad, dst, lda);
    for (int64_t r = 0; r < rows; ++r) gather_window(g, in, c0, cg, i + r, int64_t{0}, k, pad, dst + r * lda);
  }
};

/// A row-major byte matrix read in place (row stride lda bytes), as a pointwise convolution's input is.
struct ByteRows {
  const uint8_t* a;
  int64_t lda;
  const uint8_t* direct(int64_t i, int64_t& row_stride) const {
    row_stride = lda;
    return a + i * lda;
  }
  void operator()(int64_t, int64_t, uint8_t*, int64_t) const {}  // never asked: direct() always answers
};

/// Rows of a row-major float matrix (row stride lda floats, k columns) turned into bytes as they are packed.
struct QuantizedRows {
  const float* a;
  int64_t lda;
  int64_t k;
  ToBytes q;

  const uint8_t* direct(int64_t, int64_t&) const { return nullptr; }
  void operator()(int64_t i, int64_t rows, uint8_t* dst, int64_t ldd) const {
    for (int64_t r = 0; r < rows; ++r) qgemm::quantize_row(a + (i + r) * lda, k, q.inv_scale, q.zero, dst + r * ldd);
  }
};

/// Bytes the int8 convolution's input takes (qconv_group's `bytes`): the input and the few bytes past its end that
/// the kernels may read of a pointwise convolution's last row (ByteRows).
inline int64_t conv_input_bytes(const Geometry& g) { return g.N * g.H * g.W * g.C + 64; }

/// The int8 form of conv_group (Note [int8 gemm]): `bytes` holds the input turned into bytes (qgemm::quantize),
/// with conv_input_bytes(g) readable; B the group's int8 filter; `rq` the requantization of output channels
/// [o0, o0 + B.n); `pad` the byte of the real number 0.
inline void qconv_group(const Geometry& g, const uint8_t* bytes, uint8_t pad, int64_t c0, int64_t cg,
                        const qgemm::PackedQB& B, const qgemm::Requant& rq, const gemm::Epilogue& ep, float* out,
                        int64_t o0) {
  const int64_t m = g.N * g.OH * g.OW;
  if (g.pointwise() && cg == g.C)
    qgemm::qgemm(m, B, rq, ep, out + o0, g.O, ByteRows{bytes, g.C});
  else
    qgemm::qgemm(m, B, rq, ep, out + o0, g.O, ByteWindowRows{g, bytes, c0, cg, pad});
}

namespace detail {

/// Note [conv rows in place]: for a convolution whose whole filter is one K block of the packed GEMM (K = KH * KW *
/// C <= kPackedKc: a network's stem, 3 input channels) and whose kernel rows read contiguous input (no groups, no
/// dilation along W), the windows of MR output pixels side by side in one output row need no gather: for kernel
/// row kh, the KW * C values pixel i reads start at input pixel (ih, ow_i * sw - pl), sw * C floats after pixel
/// i - 1's, so the micro-kernel reads them in place with that row stride against the KW * C rows of B for kh. The
/// kernel rows inside the input are one micro-kernel call's runs (gemm::detail::Tile::segments), summed in
/// registers: as one call each, adding into C, the calls and C's loads and stores cost a 16 x 16 x 3 -> 8 stem (N 2)
/// a sixth of its time (one core: 7.0 -> 6.1 us; mobilenet_v2's stem 258 -> 236 us, resnet18's 7x7 one 2.28 ->
/// 2.11 ms). Pixels whose window leaves the input along W (the row's ends) take the gathered path. The gather cost as
/// much as the multiply for a 3-channel stem (K = 27); a strided 1x1 convolution (a ResNet's downsample) reads its
/// pixels so too.
inline bool rows_in_place_fit(const Geometry& g, int64_t cg, const gemm::PackedB& B) {
  return cg == g.C && g.dw == 1 && B.k == g.KH * g.KW * g.C && B.k <= gemm::kPackedKc;
}

/// The output pixels of conv_rows_in_place whose window leaves the input along W (each row's ends), mr at a time:
/// their windows gathered side by side, one tile per panel, each pixel's row stored with the bias and clamp. One at a
/// time, each pixel's product was one chain of K dependent multiply-adds.
class EdgePixels {
 public:
  EdgePixels(const Geometry& g, const float* in, const gemm::PackedB& B, const gemm::Epilogue& ep, float* out)
      : gather_{g, in, 0, g.C}, mk_(gemm::detail::micro_c_kernels(B.level)), B_(B), ep_(ep), out_(out), O_(g.O) {}
  void add(int64_t px) {
    gather_(px, 1, 0, B_.k, 1, windows_ + count_ * B_.k);
    pixels_[count_++] = px;
    if (count_ == mk_.mr) flush();
  }
  void flush() {
    if (count_ == 0) return;
    const int nr = mk_.nr;
    for (int64_t panel = 0; panel < B_.panels(); ++panel) {
      const int64_t j = panel * nr, cols = std::min<int64_t>(nr, B_.n - j);
      mk_.kernel(count_, cols)(B_.k, windows_, 1, B_.k, B_.block(0, panel, B_.k),
               gemm::detail::TileOut{tile_, nr, nullptr, false, false, 0.f, 0.f});
      for (int64_t r = 0; r < count_; ++r)
        gemm::detail::store_tile(tile_ + r * nr, nr, 1, cols, out_ + pixels_[r] * O_, O_, j, ep_, true, true);
    }
    for (int64_t r = 0; r < count_; ++r) ep_.finish_block(out_ + pixels_[r] * O_, 1, O_, O_);
    count_ = 0;
  }

 private:
  WindowRows gather_;
  const gemm::detail::Micro<float>& mk_;
  const gemm::PackedB& B_;
  const gemm::Epilogue& ep_;
  float* out_;
  int64_t O_;
  int64_t count_ = 0;
  int64_t pixels_[gemm::detail::kMaxMr];
  alignas(64) float windows_[gemm::detail::kMaxMr * gemm::kPackedKc];
  alignas(64) float tile_[gemm::detail::kMaxMr * 32];
};

/// Note [padded stem rows]: on the path of Note [conv rows in place], the pixels whose window leaves the input along
/// W go through a gather and tiles of their own (EdgePixels). Where they are an eighth of a row or more (a small
/// image's stem: 2 of 16 pixels), an output row's kernel rows are first copied, zero-padded, into a buffer of the
/// thread's ((OW - 1) * sw + KW pixels each), and every pixel of the row reads its window there in place: one run of
/// tiles over the whole row. One core, xnn_cnn's 2 x 16 x 16 x 3 -> 8 stem 6.1-6.7 -> 4.3-4.8 us with tall half
/// tiles (Note [tall half tiles]); 32 output channels 11.1 -> 9.9 us. A wide image's copy costs more than its few
/// edge pixels: resnet18's 7 x 7 stem (3 edge pixels of 112) copied 19 KB an output row and ran 5-10% slower.
struct PaddedRowsScratch;  // the tag of the calling thread's padded kernel rows (core/aligned_buffer.h)

/// Floats of conv_rows_in_place's padded copy of one output row's kernel rows: KH input rows, each as wide as the
/// row's windows span ((OW - 1) * sw + KW pixels, the padding included).
inline int64_t padded_rows_floats(const Geometry& g) { return g.KH * ((g.OW - 1) * g.sw + g.KW) * g.C; }

/// Output rows [r0, r1) (row = n * OH + oh) of conv_group on the path of Note [conv rows in place].
inline void conv_rows_in_place(const Geometry& g, const float* in, const gemm::PackedB& B, const gemm::Epilogue& ep,
                               float* out, int64_t r0, int64_t r1) {
  const gemm::detail::Micro<float>& mk = gemm::detail::micro_c_kernels(B.level);
  const gemm::detail::Micro<float>& mk_runs = gemm::detail::micro_tiles<true>(B.level);  // same shapes, K in runs
  const int64_t C = g.C, O = g.O, run = g.KW * C, panels = B.panels();
  const int nr = mk.nr;
  // Note [tall half tiles]
  const bool tall = panels == 1 && mk.tall_for(B.n);
  const int mr = tall ? gemm::detail::kMaxMr : mk.mr;
  const auto [ow_lo, ow_hi] = g.inside_columns();
  const int64_t span = (g.OW - 1) * g.sw + g.KW;  // the pixels one output row's windows cover, padding included
  // Note [padded stem rows]
  float* padded = (ow_lo + g.OW - ow_hi) * 8 >= g.OW
                      ? thread_scratch<float, PaddedRowsScratch>(static_cast<size_t>(padded_rows_floats(g)))
                      : nullptr;
  alignas(64) float tile[gemm::detail::kMaxMr * 32];
  EdgePixels edges(g, in, B, ep, out);
  for (int64_t row = r0; row < r1; ++row) {
    const int64_t oh = row % g.OH, n = row / g.OH, ih0 = oh * g.sh - g.pt;
    const int64_t px0 = row * g.OW;  // the output pixel index of column 0
    int64_t kh0 = 0, kh1 = g.KH;  // kernel rows inside the input
    while (kh0 < g.KH && ih0 + kh0 * g.dh < 0) ++kh0;
    while (kh1 > kh0 && ih0 + (kh1 - 1) * g.dh >= g.H) --kh1;
    // Pixel ow's kernel row kh starts at base + (kh - kh0) * a_ss + ow * sw * C: in the input, or in the padded copy
    // of the kernel rows, where every pixel of the row is inside.
    const float* base = in;
    int64_t first = ow_lo, last = ow_hi, a0 = ((n * g.H + ih0 + kh0 * g.dh) * g.W - g.pl) * C, a_ss = g.dh * g.W * C;
    if (padded && kh0 < kh1) {
      const int64_t copied = std::min(g.W, span - g.pl), right = span - g.pl - copied;  // in columns
      for (int64_t kh = kh0; kh < kh1; ++kh) {
        float* dst = padded + (kh - kh0) * span * C;
        const float* src = in + (n * g.H + ih0 + kh * g.dh) * g.W * C;
        // The padding as 16 zeros at each end where that fits (the copy then overwrites the inner ones): the
        // library calls for 3 floats took a tenth of xnn_cnn's stem.
        if (span * C >= 16 && g.pl * C <= 16 && right * C <= 16) {
          std::fill_n(dst + span * C - 16, 16, 0.f);
          std::fill_n(dst, 16, 0.f);
        } else {
          std::fill_n(dst, g.pl * C, 0.f);
          std::fill_n(dst + (g.pl + copied) * C, right * C, 0.f);
        }
        copy_run(src, dst + g.pl * C, copied * C);
      }
      base = padded;
      first = 0, last = g.OW, a0 = 0, a_ss = span * C;
    } else {
      for (int64_t ow = 0; ow < ow_lo; ++ow) edges.add(px0 + ow);
      for (int64_t ow = ow_hi; ow < g.OW; ++ow) edges.add(px0 + ow);
    }
    // Tall half tiles of even heights, the first `taller` one row taller (their K is a latency-bound chain: 14
    // pixels take as long as 7 + 7 as 8 + 6); elsewhere whole tiles then the rest.
    const int64_t tiles = (last - first + mr - 1) / mr, height = tiles ? (last - first) / tiles : 0;
    const int64_t taller = tiles ? (last - first) % tiles : 0;
    for (int64_t ow = first, t = 0; ow < last; ++t) {
      const int64_t rows = tall ? height + (t < taller ? 1 : 0) : std::min<int64_t>(mr, last - ow);
      float* c = out + (px0 + ow) * O;
      for (int64_t panel = 0; panel < panels; ++panel) {
        const int64_t j = panel * nr, cols = std::min<int64_t>(nr, B.n - j);
        const int64_t width = mk.width(cols);  // a panel of fewer columns: the narrowest tile that holds them
        const float* bp = B.block(0, panel, B.k);
        if (kh0 == kh1) {  // every kernel row in the padding: the bias, clamped
          std::fill(tile, tile + rows * nr, 0.f);
          gemm::detail::store_tile(tile, nr, rows, cols, c, O, j, ep, true, true);
          continue;
        }
        // The kernel rows inside the input, kh0 .. kh1 - 1, are runs of KW * C steps (a_ss floats apart,
        // consecutive rows of B). One call takes them all where the runs are short (the call and C's round trip
        // cost more than a run) or the tile is whole (every accumulator register: throughput-bound); otherwise one
        // run a call, since a tile of few accumulators is a latency-bound chain that the next call's overlaps (one
        // core, N 2, 8 x 8 x 8 -> 12 at stride 2, 3 pixels a row: 1.05 us, 1.16 in one call).
        const bool one_call = run < 16 || (rows == mr && (width == nr || tall));
        const int64_t per_call = one_call ? kh1 - kh0 : 1;
        const gemm::detail::MicroC fn = (one_call ? mk_runs : mk).kernel(rows, cols, tall);
        for (int64_t kh = kh0; kh < kh1; kh += per_call) {
          const bool first_run = kh == kh0, last_run = kh + per_call == kh1;
          const float* a = base + (a0 + (kh - kh0) * a_ss + ow * g.sw * C);
          const float* b = bp + kh * run * nr;
          if (cols == width) {
            fn(run, a, 1, g.sw * C, b,
               gemm::detail::TileOut{c + j, O, first_run && ep.bias ? ep.bias + j : nullptr, !first_run,
                                     last_run && ep.clamps(), ep.lo, ep.hi, per_call, a_ss});
          } else {  // the last, narrower panel: through the tile buffer, bias and clamp as it is stored
            fn(run, a, 1, g.sw * C, b,
               gemm::detail::TileOut{tile, nr, nullptr, !first_run, false, 0.f, 0.f, per_call, a_ss});
            if (last_run) gemm::detail::store_tile(tile, nr, rows, cols, c, O, j, ep, true, true);
          }
        }
      }
      ep.finish_block(c, rows, O, O);
      ow += rows;
    }
  }
  edges.flush();
}

}  // namespace detail

/// out = clamp(conv(in, filter) + bias) for one group: filter packed as B (K = KH * KW * cg rows, the group's output
/// channels as columns), writing output channels [o0, o0 + B.n).
inline void conv_group(const Geometry& g, const float* in, int64_t c0, int64_t cg, const gemm::PackedB& B,
                       const gemm::Epilogue& ep, float* out, int64_t o0) {
  const int64_t m = g.N * g.OH * g.OW;
  if (g.pointwise() && cg == g.C) return gemm::packed_gemm(m, B, ep, out + o0, g.O, gemm::MatrixRows{in, g.C});
  if (detail::rows_in_place_fit(g, cg, B) && o0 == 0 && B.n == g.O) {
    const int64_t rows = g.N * g.OH;
    const auto run = [&](int64_t r0, int64_t r1) { detail::conv_rows_in_place(g, in, B, ep, out, r0, r1); };
    if (m * B.n * B.k < min_parallel_work() || rows < 2) run(0, rows);
    else parallel_for(rows, 1, run);
    return;
  }
  gemm::packed_gemm(m, B, ep, out + o0, g.O, WindowRows{g, in, c0, cg});
}

namespace detail {

/// Output pixel (n, oh, ow)'s channels [c0, O) of a depthwise convolution with `mult` outputs per input channel. The
/// taps inside the input are listed first. With one output per channel, two registers of channels at a time then
/// accumulate over every tap (two independent chains), starting from the bias, and are clamped before the one store;
/// with two, a register of outputs reads half a register of inputs, each twice; with more, each output channel
/// reads its input channel c / mult. Every form adds the taps in the same order as the scalar loop.
template <int Lanes>
[[gnu::always_inline]] inline void depthwise_pixel(const Geometry& g, int64_t mult, const float* in,
                                                   const float* filter, const gemm::Epilogue& ep, float* o, int64_t n,
                                                   int64_t oh, int64_t ow, int64_t c0) {
  using V = vec::Vec<Lanes>;
  using vec::load, vec::store;
  const bool clamp = ep.clamps();
  const float lo = ep.lo, hi = ep.hi;
  const int64_t O = g.O;
  const float* xs[kMaxDepthwiseTaps];
  const float* ws[kMaxDepthwiseTaps];
  int64_t taps = 0;
  for_each_tap(g, in, n, oh, ow, [&](int64_t tap, const float* x) ETRT_ISA_INLINE {
    xs[taps] = x;
    ws[taps] = filter + tap * O;
    ++taps;
  });
  int64_t c = c0;
  if (mult == 1) {
    for (; c + 2 * Lanes <= O; c += 2 * Lanes) {
      V a0{}, a1{}, x0, x1, w0, w1;
      if (ep.bias) {
        load(a0, ep.bias + c);
        load(a1, ep.bias + c + Lanes);
      }
      for (int64_t t = 0; t < taps; ++t) {
        load(x0, xs[t] + c);
        load(x1, xs[t] + c + Lanes);
        load(w0, ws[t] + c);
        load(w1, ws[t] + c + Lanes);
        a0 += x0 * w0;
        a1 += x1 * w1;
      }
      if (clamp) {
        a0 = a0 < lo ? lo : a0;  // a NaN compares false and stays
        a0 = a0 > hi ? hi : a0;
        a1 = a1 < lo ? lo : a1;
        a1 = a1 > hi ? hi : a1;
      }
      store(o + c, a0);
      store(o + c + Lanes, a1);
    }
    if (c + Lanes <= O) {  // one register left (O = 16 mod 32 at AVX-512: 16, 48, 80, 112, 144 channels)
      V a{}, x, w;
      if (ep.bias) load(a, ep.bias + c);
      for (int64_t t = 0; t < taps; ++t) {
        load(x, xs[t] + c);
        load(w, ws[t] + c);
        a += x * w;
      }
      if (clamp) {
        a = a < lo ? lo : a;
        a = a > hi ? hi : a;
      }
      store(o + c, a);
      c += Lanes;
    }
  }
  if (mult == 2) {  // output channels c, c + 1 read input channel c / 2: half a register of inputs, each lane twice
    for (; c + Lanes <= O; c += Lanes) {
      V a{}, w;
      if (ep.bias) load(a, ep.bias + c);
      for (int64_t t = 0; t < taps; ++t) {
        vec::Vec<Lanes / 2> half;
        std::memcpy(&half, xs[t] + c / 2, sizeof half);
        load(w, ws[t] + c);
        a += [&]<size_t... L>(std::index_sequence<L...>) {
          return V(__builtin_shufflevector(half, half, static_cast<int>(L / 2)...));
        }(std::make_index_sequence<Lanes>{}) * w;
      }
      if (clamp) {
        a = a < lo ? lo : a;
        a = a > hi ? hi : a;
      }
      store(o + c, a);
    }
  }
  for (; c < O; ++c) {
    const int64_t ic = c / mult;
    float acc = ep.bias ? ep.bias[c] : 0.f;
    for (int64_t t = 0; t < taps; ++t) acc += xs[t][ic] * ws[t][c];
    o[c] = clamp ? std::min(std::max(acc, lo), hi) : acc;
  }
}

/// Output rows [r0, r1) (row = n * OH + oh) of a depthwise convolution, pixel by pixel.
template <int Lanes>
[[gnu::always_inline]] inline void depthwise_body(const Geometry& g, int64_t mult, const float* in,
                                                  const float* filter, const gemm::Epilogue& ep, float* out,
                                                  int64_t r0, int64_t r1) {
  for (int64_t row = r0; row < r1; ++row)
    for (int64_t ow = 0; ow < g.OW; ++ow)
      depthwise_pixel<Lanes>(g, mult, in, filter, ep, out + (row * g.OW + ow) * g.O, row / g.OH, row % g.OH, ow, 0);
}

/// Output pixels a register of channels walks with its weights in registers (depthwise_window_body).
inline constexpr int64_t kDepthwisePixelChunk = 8;

#ifdef ETRT_ISA_X86
#pragma GCC diagnostic push  // GCC bug 105593: the AVX-512 intrinsics' self-initialised "undefined" vectors
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
[[ETRT_TARGET_AVX512]] [[gnu::always_inline]] inline void store_clamped_avx512(float* o, __m512 a, bool clamp,
                                                                             __m512 lo, __m512 hi) {
  if (clamp) a = _mm512_min_ps(hi, _mm512_max_ps(lo, a));  // a NaN is the second operand: it stays NaN
  _mm512_storeu_ps(o, a);
}
/// Note [depthwise pixel groups]: the interior walk of depthwise_window_body on AVX-512 at stride S (1 or 2), output
/// pixels [ow_a, ow_b) of one row, channels [0, vec_end). The one-pixel loop adds a pixel's KH x KW taps into one
/// sum, a chain of dependent FMAs (9 x 4 cycles for 3x3 on Zen 4) that overlapped with about one other pixel's: it
/// ran at 16-22 cycles a pixel and register of channels where the FMAs alone need 9. Here P neighbouring pixels are
/// summed at once, P independent chains, and each input of a window row, loaded once, is multiplied into every one
/// of the windows that holds it (KW + (P - 1) S loads for P x KW FMAs). At stride 1, P = 4: 5x5 keeps its 25
/// weights, 4 sums and the input in 30 of the 32 registers, and measured faster with 4 pixels than with 2 or 3 (3x3
/// too). At stride 2, P = 2: four 5x5 windows measured slower than the one-pixel loop, pairs faster (one Zen 4 core:
/// efficientnet_b0's 56 x 56 x 144 layer 126 -> 103 us, its 14 x 14 x 672 one 37.6 -> 34.6), and 3x3 pairs 4% faster
/// than fours (112 x 112 x 96: 129 -> 124 us). Each pixel's taps still add in the order kh,
/// kw from its bias, in FMAs as the one-pixel loop's contracted `a += v * w`: the same sums. The empty asm
/// statements keep GCC from folding each use's load into its FMA (a load per use) and from precomputing every tap's
/// address (registers spilled): without them the groups ran no faster than single pixels.
template <int KH, int KW, int S, int P = 4>
[[ETRT_TARGET_AVX512]] inline void depthwise_groups_avx512(const float* corner0, int64_t line_stride, int64_t C,
                                                          const float* filter, int64_t O, const float* bias,
                                                          bool clamp, float lo, float hi, float* orow,
                                                          int64_t ow_a, int64_t ow_b, int64_t vec_end,
                                                          int64_t chunk) {
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  for (int64_t ow0 = ow_a; ow0 < ow_b; ow0 += chunk) {
    const int64_t ow1 = std::min(ow_b, ow0 + chunk);
    for (int64_t c = 0; c < vec_end; c += 16) {
      __m512 w[KH * KW];
#pragma GCC unroll 25
      for (int t = 0; t < KH * KW; ++t) w[t] = _mm512_loadu_ps(filter + t * O + c);
      const __m512 b = bias ? _mm512_loadu_ps(bias + c) : _mm512_setzero_ps();
      int64_t ow = ow0;
      for (; ow + P <= ow1; ow += P) {
        const float* line = corner0 + ow * S * C + c;
        __m512 a[P];
#pragma GCC unroll 4
        for (int p = 0; p < P; ++p) a[p] = b;
#pragma GCC unroll 5
        for (int kh = 0; kh < KH; ++kh) {
          const float* q = line;
#pragma GCC unroll 8
          for (int x = 0; x < KW + (P - 1) * S; ++x) {
            __m512 v = _mm512_loadu_ps(q);
            asm("" : "+v"(v));
            q += C;
            asm("" : "+r"(q));
#pragma GCC unroll 4
            for (int p = 0; p < P; ++p)
              if (x - p * S >= 0 && x - p * S < KW) a[p] = _mm512_fmadd_ps(v, w[kh * KW + x - p * S], a[p]);
          }
          line += line_stride;
        }
#pragma GCC unroll 4
        for (int p = 0; p < P; ++p) store_clamped_avx512(orow + (ow + p) * O + c, a[p], clamp, vlo, vhi);
      }
      for (; ow < ow1; ++ow) {
        const float* corner = corner0 + ow * S * C + c;
        __m512 a = b;
#pragma GCC unroll 5
        for (int kh = 0; kh < KH; ++kh)
#pragma GCC unroll 5
          for (int kw = 0; kw < KW; ++kw)
            a = _mm512_fmadd_ps(_mm512_loadu_ps(corner + kh * line_stride + kw * C), w[kh * KW + kw], a);
        store_clamped_avx512(orow + ow * O + c, a, clamp, vlo, vhi);
      }
    }
  }
}
#pragma GCC diagnostic pop
#endif

/// Note [depthwise interior]: a KH x KW depthwise window with one output per channel and no dilation, on the output
/// pixels of a row whose whole window lies inside the input: per register of channels the taps' weights and the
/// bias are loaded once and stay in registers while the loop walks those pixels, so a pixel costs one load and one
/// FMA per tap (the pixel loop loads a weight per tap per pixel, which made it bound by loads). The row's border
/// pixels, and the channels past the last whole register, take depthwise_pixel.
template <int Lanes, int KH, int KW>
[[gnu::always_inline]] inline void depthwise_window_body(const Geometry& g, const float* in, const float* filter,
                                                         const gemm::Epilogue& ep, float* out, int64_t r0,
                                                         int64_t r1) {
  using V = vec::Vec<Lanes>;
  const int64_t O = g.O, C = g.C, vec_end = O / Lanes * Lanes;
  // Output columns whose window is inside the input: iw0 = ow * sw - pl >= 0 and iw0 + KW - 1 < W.
  const auto [ow_lo, ow_hi] = g.inside_columns();  // KW == g.KW
  const bool clamp = ep.clamps();
  const float lo = ep.lo, hi = ep.hi;
  // Locals, not the geometry's fields: the output stores could alias those as far as the compiler knows, which
  // reloaded them, and redid the products, at every pixel.
  const int64_t H = g.H, W = g.W, sw = g.sw, pl = g.pl;
  for (int64_t row = r0; row < r1; ++row) {
    const int64_t oh = row % g.OH, n = row / g.OH, ih0 = oh * g.sh - g.pt;
    float* orow = out + row * g.OW * O;
    const bool inside_rows = ih0 >= 0 && ih0 + KH <= H;
    const int64_t row0 = (n * H + ih0) * W * C;  // the offset of input row ih0 (which may lie outside)
    // Pixels [ow_a, ow_b) in chunks whose windows' input lines stay in L1 while each register of channels walks
    // them, its weights in registers; the channels past the last whole register take the pixel loop. Checked:
    // the windows may leave the input, and each tap is checked against its edges (the unrolled checks keep the
    // weights in registers). A 5x5 window over 7x7 pixels has 40 of its 49 on the border, where the pixel loop's
    // four loads a tap had made it the slowest of efficientnet_b0's depthwise layers.
    const auto walk = [&]<bool Checked>(int64_t ow_a, int64_t ow_b) ETRT_ISA_INLINE {
#ifdef ETRT_ISA_X86
      if constexpr (Lanes == 16 && !Checked) {
        if (sw == 1 || sw == 2) {  // Note [depthwise pixel groups]
          const auto groups = sw == 1 ? &depthwise_groups_avx512<KH, KW, 1> : &depthwise_groups_avx512<KH, KW, 2, 2>;
          groups(in + row0 - pl * C, W * C, C, filter, O, ep.bias, clamp, lo, hi, orow, ow_a, ow_b, vec_end,
                 kDepthwisePixelChunk);
          if (vec_end < O)
            for (int64_t ow = ow_a; ow < ow_b; ++ow)
              depthwise_pixel<Lanes>(g, 1, in, filter, ep, orow + ow * O, n, oh, ow, vec_end);
          return;
        }
      }
#endif
      for (int64_t ow0 = ow_a; ow0 < ow_b; ow0 += kDepthwisePixelChunk)
      for (int64_t c = 0; c < vec_end; c += Lanes) {
        V w[KH * KW], bias{};
#pragma GCC unroll 25
        for (int t = 0; t < KH * KW; ++t) vec::load(w[t], filter + t * O + c);
        if (ep.bias) vec::load(bias, ep.bias + c);
        for (int64_t ow = ow0, ow1 = std::min(ow_b, ow0 + kDepthwisePixelChunk); ow < ow1; ++ow) {
          const int64_t iw0 = ow * sw - pl;
          // The window's corner as an offset (it may lie outside the input; only the taps inside are formed).
          const int64_t corner = row0 + iw0 * C + c;
          V a = bias, v;
#pragma GCC unroll 5
          for (int kh = 0; kh < KH; ++kh) {
            if (Checked && (ih0 + kh < 0 || ih0 + kh >= H)) continue;
#pragma GCC unroll 5
            for (int kw = 0; kw < KW; ++kw) {
              if (Checked && (iw0 + kw < 0 || iw0 + kw >= W)) continue;
              vec::load(v, in + (corner + (kh * W + kw) * C));
              a += v * w[kh * KW + kw];
            }
          }
          if (clamp) {
            a = a < lo ? lo : a;  // a NaN compares false and stays
            a = a > hi ? hi : a;
          }
          vec::store(orow + ow * O + c, a);
        }
      }
      if (vec_end < O)
        for (int64_t ow = ow_a; ow < ow_b; ++ow)
          depthwise_pixel<Lanes>(g, 1, in, filter, ep, orow + ow * O, n, oh, ow, vec_end);
    };
    // A 3x3 window's border is one pixel a side, too few to repay loading the weights: the pixel loop takes it.
    const auto border = [&](int64_t ow_a, int64_t ow_b) ETRT_ISA_INLINE {
      if constexpr (KH * KW < 25) {
        for (int64_t ow = ow_a; ow < ow_b; ++ow)
          depthwise_pixel<Lanes>(g, 1, in, filter, ep, orow + ow * O, n, oh, ow, 0);
      } else {
        walk.template operator()<true>(ow_a, ow_b);
      }
    };
    if (!inside_rows || ow_lo >= ow_hi) {
      border(0, g.OW);
      continue;
    }
    border(0, ow_lo);
    walk.template operator()<false>(ow_lo, ow_hi);
    border(ow_hi, g.OW);
  }
}

using DepthwiseFn = void (*)(const Geometry&, int64_t, const float*, const float*, const gemm::Epilogue&, float*,
                             int64_t, int64_t);

/// Whether the window body takes this convolution (Note [depthwise interior]): KHxKW of 3x3 or 5x5.
inline bool window_body_fits(const Geometry& g, int64_t mult, int64_t k) {
  return mult == 1 && g.dh == 1 && g.dw == 1 && g.KH == k && g.KW == k;
}

#ifdef ETRT_ISA_X86
[[ETRT_TARGET_AVX512]] inline void depthwise_avx512(const Geometry& g, int64_t m, const float* in, const float* f,
                                                        const gemm::Epilogue& ep, float* out, int64_t r0, int64_t r1) {
  if (window_body_fits(g, m, 3)) return depthwise_window_body<16, 3, 3>(g, in, f, ep, out, r0, r1);
  if (window_body_fits(g, m, 5)) return depthwise_window_body<16, 5, 5>(g, in, f, ep, out, r0, r1);
  depthwise_body<16>(g, m, in, f, ep, out, r0, r1);
}
[[ETRT_TARGET_AVX2]] inline void depthwise_avx2(const Geometry& g, int64_t m, const float* in, const float* f,
                                                       const gemm::Epilogue& ep, float* out, int64_t r0, int64_t r1) {
  // Sixteen registers: the 3x3 window's nine weights fit beside the accumulator. A 5x5 one's 25 do not, and the
  // compiler keeps most of them on the stack, a load a tap from L1; that is still one load fewer a tap than the
  // pixel loop's, and the border pixels take the window walk too.
  if (window_body_fits(g, m, 3)) return depthwise_window_body<8, 3, 3>(g, in, f, ep, out, r0, r1);
  if (window_body_fits(g, m, 5)) return depthwise_window_body<8, 5, 5>(g, in, f, ep, out, r0, r1);
  depthwise_body<8>(g, m, in, f, ep, out, r0, r1);
}
#endif
inline void depthwise_base(const Geometry& g, int64_t m, const float* in, const float* f, const gemm::Epilogue& ep,
                           float* out, int64_t r0, int64_t r1) {
  depthwise_body<4>(g, m, in, f, ep, out, r0, r1);
}

inline DepthwiseFn pick_depthwise() {
#ifdef ETRT_ISA_X86
  const int level = isa::level();
  if (level >= isa::kAvx512) return &depthwise_avx512;
  if (level == 1) return &depthwise_avx2;
#endif
  return &depthwise_base;
}

}  // namespace detail

/// out [N, OH, OW, C * mult] = clamp(depthwise conv(in [N, H, W, C], filter [KH, KW, C * mult]) + bias), then
/// ep.finish on each output row; false
/// (nothing written) for a window of more than kMaxDepthwiseTaps taps or channels that are not C * mult.
inline bool depthwise(const Geometry& g, int64_t mult, const float* in, const float* filter, const gemm::Epilogue& ep,
                      float* out) {
  if (g.KH * g.KW > kMaxDepthwiseTaps || mult < 1 || g.O != g.C * mult) return false;
  const detail::DepthwiseFn fn = detail::pick_depthwise();
  const int64_t rows = g.N * g.OH;
  const int64_t work = rows * g.OW * g.O * g.KH * g.KW;
  const int64_t row_floats = g.OW * g.O;
  // One output row at a time, so ep.finish reads the row while it is in cache.
  const auto run_rows = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      fn(g, mult, in, filter, ep, out, r, r + 1);
      ep.finish_block(out + r * row_floats, g.OW, g.O, g.O);
    }
  };
  if (work < min_parallel_work() || rows < 2) run_rows(0, rows);
  else parallel_for(rows, 1, run_rows);
  return true;
}

}  // namespace etrt::kernels::nhwc
