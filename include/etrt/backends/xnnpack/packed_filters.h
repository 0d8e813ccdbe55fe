// Filters prepared once, when the delegate loads, for the nodes that run on the packed kernels: fully-connected and
// convolution nodes multiply by their filter packed into GEMM panels (kernels/util/packed_gemm.h), depthwise
// convolutions run the direct NHWC loop (kernels/util/nhwc_conv.h). Each applies its bias and output clamp as it
// writes, so the executor skips its separate clamp pass for them.
//
// Note [xnnpack packed filters]: a node takes the packed path only when everything its kernel assumes holds at
// load: a constant float filter (quantized filters are dequantized at load first; those a fully-connected node
// reads in blocks are not), a bias of the right length or none, and a geometry in which the output size is what
// the input, padding, window, stride and dilation give. Otherwise the node keeps running on the portable kernels,
// whose errors name what is wrong. Packed filters count against the graph's memory limit (executor.h) before
// they are allocated; a packed matrix is the filter rounded up to the micro-kernel's panel width.
//
// Note [xnnpack int8 filters]: on a CPU with AVX-512 VNNI, a convolution or fully-connected node whose input is
// quantized per tensor (qint8 or quint8) and whose filter is int8 with zero point 0 (qcint8 per output channel, or
// qint8 per tensor) keeps its filter as bytes, packed for the int8 GEMM (kernels/util/qgemm.h, Note [int8 gemm]),
// and runs in integers as XNNPACK's qs8 kernels do: its input, on its grid, is turned back into bytes as it is
// packed, and the exact int32 sums are scaled into the float output, then rounded onto the output's grid by the
// block finish. Other CPUs, and ETRT_ISA=avx512 or below, multiply the dequantized filter in float.
//
// Note [xnnpack winograd]: a float 3x3, stride-1, undilated, ungrouped convolution that kernels::winograd::plan
// finds worth it (large enough, enough channels: Note [winograd plan]) keeps its filter as the transform's packed
// matrices instead of the GEMM's, and runs the Winograd convolution (kernels/util/winograd.h) with the scratch
// conv_scratch reserved for its plan. The plan is made from the payload's shapes, at load, by the one function both
// the scratch and the preparation call, so they agree. ETRT_WINOGRAD=0 turns the transform off, =2 keeps to
// F(2x2, 3x3), whose results are closest to the direct product's.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>  // getenv: ETRT_WINOGRAD
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "etrt/backends/xnnpack/graph.h"
#include "etrt/backends/xnnpack/graph_checks.h"
#include "etrt/backends/xnnpack/qd8_gemm.h"
#include "etrt/backends/xnnpack/quantization.h"
#include "etrt/backends/xnnpack/shape_inference.h"
#include "etrt/core/result.h"
#include "etrt/kernels/util/nhwc_byte_depthwise.h"
#include "etrt/kernels/util/nhwc_pointwise_depthwise.h"
#include "etrt/kernels/util/nhwc_conv.h"
#include "etrt/kernels/util/packed_gemm.h"
#include "etrt/kernels/util/qgemm.h"
#include "etrt/kernels/util/sigmoid.h"
#include "etrt/kernels/util/vec.h"
#include "etrt/kernels/util/winograd.h"

namespace etrt::xnnpack {

/// Note [xnnpack block finish]: what a node on the packed kernels does to each block of its output as it finishes
/// it, while the block is in cache and on the thread that computed it, instead of in passes of the executor's own
/// over the whole output: the rounding onto a per-tensor quantized output's grid, and the whole of a
/// Clamp/Convert/Copy/StaticReshape node onto a quantized grid (`next`) that is the output's only reader, written
/// at the same flat position of that node's output (the output itself is then not stored rounded: nothing else
/// reads it). The results are those of the passes it replaces, in the same order; the executor then skips them.
/// `ptr` is the executor's per-call value buffers, read at each block.
struct BlockFinish {
  bool round = false;  // round the output onto `grid` (in place, unless `next` takes it on)
  Grid grid;
  bool next = false;   // then run the reading node: clamp to [lo, hi], round onto next_grid, into value `dst`
  Grid next_grid;
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  bool silu = false;    // or: the Sigmoid and Multiply of x * sigmoid(x), clamped to [lo, hi], into value `dst`
  float byte_zero = 0.f;  // Note [byte activations]: the stored value's byte of 0, where it is held as bytes
  const std::vector<float*>* ptr = nullptr;
  uint32_t src = 0, dst = 0;
  bool any() const { return round || next || silu; }
};

/// Note [xnnpack requantization]: XNNPACK's int8 kernels add the int32 bias into the exact sum and scale the result
/// once, by input scale x filter scale / output scale computed in float, straight into the output's steps; they clamp
/// to the node's output range quantized to whole steps (lrintf(min / scale + zero point), within the type's range).
/// The float path scaled the sum into real units, added the bias dequantized, then divided by the output's scale:
/// the same value up to two more roundings, which put about one output in a thousand on the neighbouring step. Where
/// a node's output is quantized per tensor (8-bit) and its bias is an int32 constant (or absent), its int8 kernels
/// take these constants instead, so its steps are XNNPACK's, bit for bit.
struct ExactRequant {
  std::vector<int32_t> zero_sum;  // the float path's zero_sum minus the int32 bias
  std::vector<float> scale;       // (input scale x filter scale) / output scale
  std::vector<float> bias;        // the int32 bias as floats (the byte depthwise kernel's sums start from it)
  float lo = 0.f, hi = 0.f;       // the output's steps (quantized value minus zero point) after the node's clamp
  float out_scale = 1.f;
  bool active() const { return !scale.empty(); }
};

/// The constants of Note [xnnpack requantization] for node n, whose per-channel `scale` (input x filter) and
/// `zero_sum` the float path uses; inactive where its output or bias does not fit, or `small_bias` is asked and a
/// bias reaches 2^23 (the byte depthwise kernel sums in float).
inline ExactRequant exact_requant(const Graph& g, const Node& n, std::span<const float> scale,
                                  std::span<const int32_t> zero_sum, bool small_bias = false) {
  ExactRequant e;
  const Value& o = g.values[n.output];
  if ((o.datatype != Datatype::QInt8 && o.datatype != Datatype::QUInt8) || o.quant.kind != QuantKind::PerTensor)
    return e;
  const float so = o.quant.scale;
  if (!(so > 0.f) || !std::isfinite(so) || !std::isfinite(1.f / so)) return e;
  const size_t rows = scale.size();
  std::vector<int32_t> bias(rows, 0);
  if (n.inputs.size() > 2 && n.inputs[2] != kNoValue) {
    const Value& b = g.values[n.inputs[2]];
    if ((b.datatype != Datatype::QCInt32 && b.datatype != Datatype::QInt32) || b.constant.size() != rows * 4) return e;
    std::memcpy(bias.data(), b.constant.data(), rows * 4);
  }
  const QRange range = qrange(o.datatype);
  // XNNPACK's xnn_qs8_quantize / xnn_qu8_quantize of the node's output range, less the zero point.
  const auto bound = [&](float v) {
    const float q = std::min(std::max(v / so + static_cast<float>(o.quant.zero_point), static_cast<float>(range.lo)),
                             static_cast<float>(range.hi));
    return std::nearbyint(q) - static_cast<float>(o.quant.zero_point);
  };
  e.lo = bound(n.has_min_max ? n.out_min : -std::numeric_limits<float>::infinity());
  e.hi = bound(n.has_min_max ? n.out_max : std::numeric_limits<float>::infinity());
  if (!(e.lo <= e.hi)) return ExactRequant{};
  for (size_t j = 0; j < rows; ++j) {
    const int64_t zs = int64_t{zero_sum.empty() ? 0 : zero_sum[j]} - bias[j];
    const float s = scale[j] / so;
    if (zs != static_cast<int32_t>(zs) || !std::isfinite(s) || (small_bias && std::abs(int64_t{bias[j]}) >= (1 << 23)))
      return ExactRequant{};
    e.zero_sum.push_back(static_cast<int32_t>(zs));
    e.scale.push_back(s);
    e.bias.push_back(static_cast<float>(bias[j]));
  }
  e.out_scale = so;
  return e;
}

/// A filter kept as bytes for the int8 GEMM (Note [xnnpack int8 filters]): one packed matrix per group, and per
/// output channel the requantization of its sums.
struct Int8Filter {
  std::vector<kernels::qgemm::PackedQB> packed;
  std::vector<int32_t> zero_sum;
  std::vector<float> scale;
  kernels::nhwc::ToBytes to_bytes;  // the input's grid
  ExactRequant exact;               // Note [xnnpack requantization]; inactive where it does not apply

  bool active() const { return !packed.empty(); }
  kernels::qgemm::Requant requant(int64_t o0) const { return {zero_sum.data() + o0, scale.data() + o0}; }
};

/// A depthwise filter for the byte kernel (Note [byte depthwise]): the int8 filter's integers as floats, and per
/// channel the input's scale times the filter's and the bias, each padded to whole blocks of channels with zeros.
struct ByteDepthwiseFilter {
  std::vector<float> weights, scale, bias;
  float in_zero = 0.f;
  ExactRequant exact;  // Note [xnnpack requantization], its scale and bias padded as the others
  bool active() const { return !scale.empty(); }
};

/// What a node prepared at load (Note [xnnpack packed filters]).
struct PreparedNode {
  bool packed_path = false;                      // the node runs on the packed kernels and applies its own clamp
  BlockFinish finish;                            // set by the executor for a packed path (Note [xnnpack block finish])
  std::vector<kernels::gemm::PackedB> packed;    // the filter, one matrix per group (none for depthwise)
  // A fully-connected node of a dynamically quantized activation and a weight kept quantized: what the integer
  // kernels need (qd8_gemm.h); weight None when the node takes the float path.
  quant::Qd8Plan qd8;
  Int8Filter int8;  // Note [xnnpack int8 filters]; empty when the filter is multiplied in float
  kernels::winograd::Filter winograd;  // Note [xnnpack winograd]; inactive for the GEMM
  ByteDepthwiseFilter byte_dw;         // Note [byte depthwise]; inactive where the byte kernel does not apply
  // Note [byte activations] (byte_values.h), set by the executor: bit k set when input k is held as bytes, and
  // whether the value the node stores is.
  uint8_t bytes_in = 0;
  bool bytes_out = false;
  // Note [xnnpack gated filter], set by the executor: the input channels' gate (value `gate` of *gate_ptr) scales
  // the filter's rows into `gated` each call, and the node reads the ungated activation.
  const std::vector<float*>* gate_ptr = nullptr;
  uint32_t gate = 0;
  kernels::gemm::PackedB gated;

  /// Whether the node's filter is read only in its prepared form (its float copy may be released).
  bool filter_prepared() const { return !packed.empty() || int8.active() || winograd.active(); }
};

/// A node kind's preparation; `budget` is the bytes the graph may still allocate, lowered by what it takes.
using PrepareFn = Result<PreparedNode> (*)(const Graph&, const Node&, std::span<float* const> ptr, uint64_t& budget);

namespace packed {

inline void finish_block(const void* state, float* c, int64_t rows, int64_t cols, int64_t ldc) {
  const auto& f = *static_cast<const BlockFinish*>(state);
  if (ldc == cols) {  // contiguous rows: one run
    cols *= rows;
    rows = 1;
  }
  for (int64_t r = 0; r < rows; ++r) {
    float* row = c + r * ldc;
    if (f.silu) {  // Note [xnnpack silu]
      kernels::silu_clamped(row, (*f.ptr)[f.dst] + (row - (*f.ptr)[f.src]), cols, f.lo, f.hi);
      continue;
    }
    if (!f.next) {
      quant::fake_quantize(row, cols, f.grid.scale, f.grid.zero_point, f.grid.range);
      continue;
    }
    // The reading node is the output's only reader: its input need not be stored rounded.
    float* out = (*f.ptr)[f.dst] + (row - (*f.ptr)[f.src]);
    if (f.round) quant::fake_requantize(row, out, cols, f.grid, f.next_grid, f.lo, f.hi);
    else quant::fake_quantize(row, out, cols, f.next_grid.scale, f.next_grid.zero_point, f.next_grid.range, f.lo, f.hi);
  }
}

inline kernels::gemm::Epilogue epilogue(const PreparedNode& p, const Node& n, const float* bias) {
  kernels::gemm::Epilogue ep;
  ep.bias = bias;
  if (n.has_min_max) {
    ep.lo = n.out_min;
    ep.hi = n.out_max;
  }
  if (p.finish.any()) {
    ep.finish = &finish_block;
    ep.finish_state = &p.finish;
  }
  return ep;
}

/// A grid as the int8 kernels round onto it, or nullopt for one beyond their rounding's range (a 32-bit grid).
inline std::optional<kernels::qgemm::GridStep> grid_step(const Grid& g) {
  const float qlo = static_cast<float>(g.range.lo - g.zero_point), qhi = static_cast<float>(g.range.hi - g.zero_point);
  if (std::max(-qlo, qhi) > 4194304.f) return std::nullopt;  // vec::round_small's 2^22
  return kernels::qgemm::GridStep{1.f / g.scale, qlo, qhi, g.scale};
}

/// The int8 path's requantization of output channels [o0, ...) and the epilogue, with the block finish (Note
/// [xnnpack block finish]) done on the registers (Note [int8 gemm output grid]) rather than by the epilogue's
/// callback over each finished block; `out` is the node's output buffer this call.
inline std::pair<kernels::qgemm::Requant, kernels::gemm::Epilogue> int8_requant(const PreparedNode& p, const Node& n,
                                                                                 const float* bias, int64_t o0,
                                                                                 const float* out) {
  kernels::qgemm::Requant rq = p.int8.requant(o0);
  kernels::gemm::Epilogue ep = epilogue(p, n, bias);
  const BlockFinish& f = p.finish;
  const auto a = grid_step(f.grid), b = grid_step(f.next_grid);
  if (!f.any() || (f.round && !a) || (f.next && !b)) return {rq, ep};  // the callback keeps the exact 32-bit path
  kernels::qgemm::OutputGrid& g = rq.out;
  if (const ExactRequant& x = p.int8.exact; x.active() && f.round && !f.next) {  // Note [xnnpack requantization]
    rq = {x.zero_sum.data() + o0, x.scale.data() + o0};
    ep.bias = nullptr;  // in the sums
    ep.lo = -std::numeric_limits<float>::infinity(), ep.hi = std::numeric_limits<float>::infinity();  // in the steps
    ep.finish = nullptr;
    g.round = true;
    g.grid = kernels::qgemm::GridStep{1.f, x.lo, x.hi, x.out_scale};  // the sums arrive in steps
    if (p.bytes_out) {
      g.out = out;
      g.bytes = reinterpret_cast<uint8_t*>(const_cast<float*>(out));
      g.byte_zero = f.byte_zero;
    }
    return {rq, ep};
  }
  if (p.bytes_out) {  // Note [byte activations]: byte_values admits only 8-bit grids, which grid_step takes
    g.out = out;
    g.bytes = reinterpret_cast<uint8_t*>(f.next ? (*f.ptr)[f.dst] : const_cast<float*>(out));
    g.byte_zero = f.byte_zero;
  }
  if (f.round) {
    g.round = true;
    g.grid = *a;
  }
  if (f.next) {
    g.next = true;
    g.lo = f.lo;
    g.hi = f.hi;
    g.next_grid = *b;
    g.out = out;
    g.next_out = (*f.ptr)[f.dst];
  }
  ep.finish = nullptr;
  return {rq, ep};
}

/// A constant float filter the kernels can read in place (a quantized one was dequantized at load).
inline bool float_constant(const Graph& g, std::span<float* const> ptr, uint32_t id) {
  return id != kNoValue && !g.values[id].constant.empty() && ptr[id] != nullptr;
}

/// No bias, or one with one value per output channel.
inline bool bias_fits(const Graph& g, const Node& n, int64_t channels) {
  return n.inputs[2] == kNoValue || g.values[n.inputs[2]].numel == channels;
}

/// The convolution geometry of a node for these input and output shapes (NHWC) and filter dims.
inline kernels::nhwc::Geometry geometry(const Node& n, const ValueShape& in, const ValueShape& out,
                                        std::span<const int64_t> filter) {
  kernels::nhwc::Geometry geo;
  if (in.rank != 4 || out.rank != 4 || filter.size() != 4) return geo;  // not valid()
  geo.N = in.d[0], geo.H = in.d[1], geo.W = in.d[2], geo.C = in.d[3];
  geo.OH = out.d[1], geo.OW = out.d[2], geo.O = out.d[3];
  geo.KH = filter[1], geo.KW = filter[2];
  geo.sh = n.conv[6], geo.sw = n.conv[7];
  geo.dh = std::max<uint32_t>(n.conv[8], 1), geo.dw = std::max<uint32_t>(n.conv[9], 1);
  geo.pt = n.conv[0], geo.pr = n.conv[1], geo.pb = n.conv[2], geo.pl = n.conv[3];
  return geo;
}

/// The largest Winograd output tile ETRT_WINOGRAD allows (Note [xnnpack winograd]): 4 unless it says 0 or 2.
inline int winograd_max_tile() {
  static const int m = [] {
    const char* v = std::getenv("ETRT_WINOGRAD");
    return v && (std::strcmp(v, "0") == 0 || std::strcmp(v, "off") == 0) ? 0 : v && std::strcmp(v, "2") == 0 ? 2 : 4;
  }();
  return m;
}

/// The Winograd plan of a Conv2d node for the payload's shapes (inactive where it does not apply): the one both
/// conv_scratch and prepare::conv use (Note [xnnpack winograd]). Float input and filter only: a quantized layer run
/// in float (a CPU without VNNI) rounds its output onto a grid, where the transform's different rounding could move
/// a value across a step.
inline kernels::winograd::Plan winograd_plan(const Graph& g, const Node& n) {
  if (n.conv[12] != 1 || n.inputs[1] == kNoValue || g.values[n.inputs[1]].dims.size() != 4) return {};
  if (g.values[n.inputs[0]].datatype != Datatype::Fp32 || g.values[n.inputs[1]].datatype != Datatype::Fp32) return {};
  const auto geo = geometry(n, ValueShape::of(g.values[n.inputs[0]].dims), ValueShape::of(g.values[n.output].dims),
                            g.values[n.inputs[1]].dims);
  if (g.values[n.inputs[1]].dims[3] != geo.C) return {};
  return kernels::winograd::plan(geo, winograd_max_tile());
}

/// Conv2d's scratch: scratch::conv's, or one Winograd pass's V and M matrices, whichever is larger.
inline Result<uint64_t> conv_scratch(const Graph& g, const Node& n) {
  ETRT_TRY(uint64_t need, scratch::conv(g, n));
  const kernels::winograd::Plan p = winograd_plan(g, n);
  if (p.active()) need = std::max(need, kernels::winograd::chunk_floats(p, g.values[n.inputs[0]].dims[3], g.values[n.output].dims[3]));
  return need;
}

inline Status take(uint64_t& budget, uint64_t floats, const Node& n) {
  const uint64_t bytes = floats * sizeof(float);
  if (bytes > budget)
    return fail(Error::MemoryAllocationFailed, n.where(), ": its packed filter needs ", bytes,
                " bytes, over what is left of the graph's memory limit (", budget, " bytes)");
  budget -= bytes;
  return {};
}

/// The int8 form of a constant filter of `rows` output channels (groups of rows / groups), each row k bytes, or an
/// empty one when the CPU, the input's quantization or the filter's does not fit (Note [xnnpack int8 filters]).
inline Result<Int8Filter> int8_filter(const Graph& g, const Node& n, int64_t rows, int64_t k, int64_t groups,
                                      uint64_t& budget) {
  Int8Filter f;
  if (!kernels::qgemm::has_vnni() || rows < 1 || k < 1 || groups < 1 || rows % groups != 0) return f;
  const Value& xv = g.values[n.inputs[0]];
  const Value& wv = g.values[n.inputs[1]];
  if ((xv.datatype != Datatype::QInt8 && xv.datatype != Datatype::QUInt8) || xv.quant.kind != QuantKind::PerTensor)
    return f;
  const float sx = xv.quant.scale;
  const int32_t zero = xv.quant.zero_point + (xv.datatype == Datatype::QInt8 ? 128 : 0);
  if (!(sx > 0.f) || !std::isfinite(1.f / sx) || zero < 0 || zero > 255) return f;
  if (wv.numel != rows * k || wv.constant.size() != static_cast<size_t>(wv.numel)) return f;
  const bool per_channel = wv.datatype == Datatype::QCInt8 && wv.quant.kind == QuantKind::PerChannel &&
                           wv.quant.channel_dim == 0 && wv.quant.scales.size() == static_cast<size_t>(rows);
  const bool per_tensor = wv.datatype == Datatype::QInt8 && wv.quant.kind == QuantKind::PerTensor &&
                          wv.quant.zero_point == 0;
  if (!per_channel && !per_tensor) return f;
  const int64_t og = rows / groups;
  ETRT_CHECK_OK(take(budget, (static_cast<uint64_t>(groups) * kernels::qgemm::packed_qb_bytes(k, og) +
                              static_cast<uint64_t>(rows) * 8 + sizeof(float) - 1) / sizeof(float), n));
  const auto* w = reinterpret_cast<const int8_t*>(wv.constant.data());
  for (int64_t gi = 0; gi < groups; ++gi) {
    // B(p, j) = w[(gi * og + j) * k + p]: the group's filter rows as columns.
    ETRT_TRY(kernels::qgemm::PackedQB b, kernels::qgemm::pack_qb(w + gi * og * k, 1, k, k, og));
    for (int64_t j = 0; j < og; ++j) {
      const int64_t o = gi * og + j;
      f.zero_sum.push_back(zero * b.col_sums[static_cast<size_t>(j)]);
      f.scale.push_back(sx * (per_channel ? wv.quant.scales[static_cast<size_t>(o)] : wv.quant.scale));
    }
    f.packed.push_back(std::move(b));
  }
  f.to_bytes = {1.f / sx, zero};
  f.exact = exact_requant(g, n, f.scale, f.zero_sum);
  return f;
}

/// The byte kernel's filter (Note [byte depthwise]) of a depthwise node of one output per channel whose input is
/// quantized per tensor (8-bit) and whose filter is int8 with zero point 0 (qcint8 per channel, qint8 per tensor);
/// an inactive one otherwise. Whether the node runs on it is the executor's choice (Note [byte activations]).
inline Result<ByteDepthwiseFilter> byte_depthwise_filter(const Graph& g, const Node& n, std::span<float* const> ptr,
                                                         const kernels::nhwc::Geometry& geo, uint64_t& budget) {
  ByteDepthwiseFilter f;
  const Value& xv = g.values[n.inputs[0]];
  const Value& wv = g.values[n.inputs[1]];
  if ((xv.datatype != Datatype::QInt8 && xv.datatype != Datatype::QUInt8) || xv.quant.kind != QuantKind::PerTensor ||
      !kernels::nhwc::byte_depthwise_fits(geo))
    return f;
  const float sx = xv.quant.scale;
  const int64_t taps = geo.KH * geo.KW, C = geo.C, Cp = kernels::nhwc::byte_depthwise_channels(C);
  if (!(sx > 0.f) || !std::isfinite(sx) || wv.numel != taps * C || wv.constant.size() != static_cast<size_t>(wv.numel))
    return f;
  const bool per_channel = wv.datatype == Datatype::QCInt8 && wv.quant.kind == QuantKind::PerChannel &&
                           wv.quant.channel_dim == 3 && wv.quant.scales.size() == static_cast<size_t>(C);
  const bool per_tensor = wv.datatype == Datatype::QInt8 && wv.quant.kind == QuantKind::PerTensor &&
                          wv.quant.zero_point == 0;
  if (!per_channel && !per_tensor) return f;
  const float* bias = n.inputs[2] != kNoValue ? ptr[n.inputs[2]] : nullptr;
  if (n.inputs[2] != kNoValue && !bias) return f;
  ETRT_CHECK_OK(take(budget, static_cast<uint64_t>((taps + 2) * Cp), n));
  const auto* w = reinterpret_cast<const int8_t*>(wv.constant.data());
  f.weights.assign(static_cast<size_t>(taps * Cp), 0.f);
  f.scale.assign(static_cast<size_t>(Cp), 0.f);
  f.bias.assign(static_cast<size_t>(Cp), 0.f);
  for (int64_t t = 0; t < taps; ++t)
    for (int64_t c = 0; c < C; ++c) f.weights[static_cast<size_t>(t * Cp + c)] = static_cast<float>(w[t * C + c]);
  for (int64_t c = 0; c < C; ++c) {
    const float s = sx * (per_channel ? wv.quant.scales[static_cast<size_t>(c)] : wv.quant.scale);
    const float b = bias ? bias[c] : 0.f;
    if (!std::isfinite(s) || !std::isfinite(b)) return ByteDepthwiseFilter{};
    f.scale[static_cast<size_t>(c)] = s;
    f.bias[static_cast<size_t>(c)] = b;
  }
  f.in_zero = static_cast<float>(xv.quant.zero_point + (xv.datatype == Datatype::QInt8 ? 128 : 0));
  f.exact = exact_requant(g, n, std::span<const float>(f.scale).first(static_cast<size_t>(C)), {}, true);
  if (f.exact.active()) {
    f.exact.scale.resize(static_cast<size_t>(Cp), 0.f);
    f.exact.bias.resize(static_cast<size_t>(Cp), 0.f);
  }
  return f;
}

}  // namespace packed

namespace prepare {

/// FullyConnected: the filter [N, K] (or [K, N] with kFlagTransposeWeights) packed as the K x N matrix B; or, for
/// a qdint8 activation (one set of parameters per row) and a quantized filter that stays quantized (executor.h: no
/// float copy), what the integer kernel needs.
inline Result<PreparedNode> fully_connected(const Graph& g, const Node& n, std::span<float* const> ptr,
                                            uint64_t& budget) {
  PreparedNode p;
  const uint32_t w = n.inputs[1];
  const Value& wv = g.values[w];
  const Value& xv = g.values[n.inputs[0]];
  if (ptr[w] == nullptr && !wv.constant.empty() && !(n.flags & kFlagTransposeWeights) &&
      xv.datatype == Datatype::QDInt8 && xv.quant.kind == QuantKind::DynamicPerToken &&
      !(xv.flags & (kValueExternalInput | kValueExternalOutput)) &&  // its parameters come from the node writing it
      xv.quant.num_nonbatch_dims == 1 && !xv.dims.empty() && wv.dims.size() == 2 && xv.dims.back() == wv.dims[1] &&
      packed::bias_fits(g, n, wv.dims[0])) {
    ETRT_CHECK_OK(packed::take(budget, quant::qd8_plan_floats(wv.dims[0], wv.dims[1]), n));
    p.qd8 = quant::qd8_plan(wv.datatype, wv.quant, wv.dims, wv.constant.data());
    return p;
  }
  if (!packed::float_constant(g, ptr, w) || g.values[w].dims.size() != 2) return p;
  const bool transposed = (n.flags & kFlagTransposeWeights) != 0;
  if (!transposed && packed::bias_fits(g, n, wv.dims[0])) {
    ETRT_TRY(p.int8, packed::int8_filter(g, n, wv.dims[0], wv.dims[1], 1, budget));
    if (p.int8.active()) {
      p.packed_path = true;
      return p;
    }
  }
  const int64_t k = transposed ? g.values[w].dims[0] : g.values[w].dims[1];
  const int64_t cols = transposed ? g.values[w].dims[1] : g.values[w].dims[0];
  if (k < 1 || cols < 1 || !packed::bias_fits(g, n, cols)) return p;
  ETRT_CHECK_OK(packed::take(budget, kernels::gemm::packed_b_floats(k, cols), n));
  ETRT_TRY(kernels::gemm::PackedB b, transposed ? kernels::gemm::pack_b(ptr[w], cols, 1, k, cols)
                                                : kernels::gemm::pack_b(ptr[w], 1, k, k, cols));
  p.packed.push_back(std::move(b));
  p.packed_path = true;
  return p;
}

/// Conv2d: each group's OHWI filter rows [O / groups, KH * KW * C / groups] packed as B (K x O / groups).
inline Result<PreparedNode> conv(const Graph& g, const Node& n, std::span<float* const> ptr, uint64_t& budget) {
  PreparedNode p;
  const uint32_t w = n.inputs[1];
  if (!packed::float_constant(g, ptr, w)) return p;
  const auto& fd = g.values[w].dims;
  const auto geo = packed::geometry(n, ValueShape::of(g.values[n.inputs[0]].dims), ValueShape::of(g.values[n.output].dims), fd);
  const int64_t groups = n.conv[12];
  if (!geo.valid() || groups < 1 || fd[0] != geo.O || geo.O % groups != 0 || fd[3] * groups != geo.C ||
      !packed::bias_fits(g, n, geo.O))
    return p;
  const int64_t og = geo.O / groups, k = geo.KH * geo.KW * fd[3];
  ETRT_TRY(p.int8, packed::int8_filter(g, n, geo.O, k, groups, budget));
  if (p.int8.active()) {
    p.packed_path = true;
    return p;
  }
  if (const kernels::winograd::Plan plan = packed::winograd_plan(g, n); plan.active()) {
    ETRT_CHECK_OK(packed::take(budget, kernels::winograd::filter_floats(plan, geo.C, geo.O), n));
    ETRT_TRY(p.winograd, kernels::winograd::prepare(plan, ptr[w], geo.C, geo.O));
    p.packed_path = true;
    return p;
  }
  ETRT_CHECK_OK(packed::take(budget, static_cast<uint64_t>(groups) * kernels::gemm::packed_b_floats(k, og), n));
  for (int64_t gi = 0; gi < groups; ++gi) {
    // B(p, j) = filter[(gi * og + j) * k + p]: row j of the group's filter rows.
    ETRT_TRY(kernels::gemm::PackedB b, kernels::gemm::pack_b(ptr[w] + gi * og * k, 1, k, k, og));
    p.packed.push_back(std::move(b));
  }
  p.packed_path = true;
  return p;
}

/// DepthwiseConv2d: the [1, KH, KW, C * M] filter is read in place; only the geometry is checked.
inline Result<PreparedNode> depthwise_conv(const Graph& g, const Node& n, std::span<float* const> ptr,
                                           uint64_t& budget) {
  PreparedNode p;
  const uint32_t w = n.inputs[1];
  if (!packed::float_constant(g, ptr, w)) return p;
  const auto& fd = g.values[w].dims;
  const auto geo = packed::geometry(n, ValueShape::of(g.values[n.inputs[0]].dims), ValueShape::of(g.values[n.output].dims), fd);
  if (!geo.valid() || fd[0] != 1 || fd[3] != geo.O || geo.O % geo.C != 0 || int64_t{n.conv[12]} != geo.C ||
      geo.KH * geo.KW > kernels::nhwc::kMaxDepthwiseTaps || !packed::bias_fits(g, n, geo.O))
    return p;
  p.packed_path = true;
  ETRT_TRY(p.byte_dw, packed::byte_depthwise_filter(g, n, ptr, geo, budget));
  return p;
}

}  // namespace prepare

namespace packed {

/// out [m, N] = clamp(x [m, K] . B + bias): a fully-connected node on its packed filter (float or int8).
inline Status fully_connected(const PreparedNode& p, const Node& n, const float* x, const ValueShape& xs, float* out,
                              const ValueShape& os, const float* bias) {
  const bool int8 = p.int8.active();
  const int64_t k = int8 ? p.int8.packed[0].k : p.packed[0].k, cols = int8 ? p.int8.packed[0].n : p.packed[0].n;
  if (xs.rank == 0 || xs.d[xs.rank - 1] != k)
    return fail(Error::InvalidProgram, "input ", shape_str(xs.sizes()), " does not end in the filter's ", k,
                " input channels");
  const int64_t m = xs.numel() / k;
  if (os.numel() != m * cols)
    return fail(Error::InvalidProgram, "output ", shape_str(os.sizes()), " is not ", m, " x ", cols);
  if (int8 && (p.bytes_in & 1)) {  // Note [byte activations]: read in place, the tail past the rows made readable
    auto* bytes = reinterpret_cast<uint8_t*>(const_cast<float*>(x));
    std::memset(bytes + xs.numel(), 0, 64);
    const auto [rq, ep] = int8_requant(p, n, bias, 0, out);
    kernels::qgemm::qgemm(m, p.int8.packed[0], rq, ep, out, cols, kernels::nhwc::ByteRows{bytes, k});
  } else if (int8) {
    const auto [rq, ep] = int8_requant(p, n, bias, 0, out);
    kernels::qgemm::qgemm(m, p.int8.packed[0], rq, ep, out, cols, kernels::nhwc::QuantizedRows{x, k, k, p.int8.to_bytes});
  } else {
    kernels::gemm::packed_gemm(m, p.packed[0], epilogue(p, n, bias), out, cols, kernels::gemm::MatrixRows{x, k});
  }
  return {};
}

/// A Conv2d (groups of packed filters, or the Winograd transform's) or DepthwiseConv2d (filter in place) node on
/// this call's shapes. `scratch` holds what conv_scratch reserved: the input as bytes on the int8 path, a Winograd
/// pass's matrices.
inline Status convolution(const PreparedNode& p, const Node& n, bool depthwise, const float* x, const ValueShape& xs,
                          const float* filter, std::span<const int64_t> fd, float* out, const ValueShape& os,
                          const float* bias, float* scratch) {
  const kernels::nhwc::Geometry geo = geometry(n, xs, os, fd);
  if (!geo.valid() || xs.d[0] != os.d[0])
    return fail(Error::InvalidProgram, "input ", shape_str(xs.sizes()), " and output ", shape_str(os.sizes()),
                " do not fit the convolution's window");
  const kernels::gemm::Epilogue ep = epilogue(p, n, bias);
  if (depthwise && p.bytes_out) {  // and its input: ByteForm::Joint (Note [byte depthwise])
    kernels::nhwc::ByteDepthwise k{p.byte_dw.weights.data(), p.byte_dw.scale.data(), p.byte_dw.bias.data(),
                                   p.byte_dw.in_zero, ep.lo, ep.hi, {}};
    const BlockFinish& f = p.finish;
    const auto a = grid_step(f.grid), b = grid_step(f.next_grid);
    if (!a || (f.next && !b)) return fail(Error::Internal, "a byte depthwise output off an 8-bit grid");
    k.out.round = true;
    k.out.grid = *a;
    k.out.next = f.next;
    if (f.next) {
      k.out.lo = f.lo;
      k.out.hi = f.hi;
      k.out.next_grid = *b;
    }
    k.out.byte_zero = f.byte_zero;
    if (const ExactRequant& e = p.byte_dw.exact; e.active() && !f.next) {  // Note [xnnpack requantization]
      k.scale = e.scale.data();
      k.bias = nullptr;
      k.acc_init = e.bias.data();  // the int32 bias, in the sums
      k.lo = -std::numeric_limits<float>::infinity();
      k.hi = std::numeric_limits<float>::infinity();
      k.out.grid = kernels::qgemm::GridStep{1.f, e.lo, e.hi, e.out_scale};  // the sums arrive in steps
    }
    auto* dst = reinterpret_cast<uint8_t*>(f.next ? (*f.ptr)[f.dst] : out);
    if (!kernels::nhwc::byte_depthwise_fits(geo))
      return fail(Error::InvalidProgram, "input ", shape_str(xs.sizes()), " and output ", shape_str(os.sizes()),
                  " do not fit the depthwise filter prepared for bytes");
    if (!kernels::nhwc::depthwise_bytes(geo, reinterpret_cast<const uint8_t*>(x), k, dst))
      return fail(Error::MemoryAllocationFailed, "cannot allocate the depthwise convolution's row buffer");
    return {};
  }
  if (depthwise) {
    if (!kernels::nhwc::depthwise(geo, geo.O / geo.C, x, filter, ep, out))
      return fail(Error::InvalidProgram, "a depthwise window of ", geo.KH, "x", geo.KW, " over ", geo.C,
                  " channels into ", geo.O, " is not supported");
    return {};
  }
  if (p.int8.active()) {
    // The input once into bytes (scratch::conv reserved them for the planned shape, which this call's does not
    // exceed), then the windows gathered from them; or its bytes in place (Note [byte activations]), whose slot
    // holds the readable tail.
    const int64_t numel = xs.numel(), padded = kernels::nhwc::conv_input_bytes(geo);
    uint8_t* bytes = reinterpret_cast<uint8_t*>(scratch);
    if (p.bytes_in & 1) bytes = reinterpret_cast<uint8_t*>(const_cast<float*>(x));
    else kernels::qgemm::quantize(x, numel, p.int8.to_bytes.inv_scale, p.int8.to_bytes.zero, bytes);
    std::memset(bytes + numel, 0, static_cast<size_t>(padded - numel));
    const auto pad = static_cast<uint8_t>(p.int8.to_bytes.zero);
    const int64_t groups = static_cast<int64_t>(p.int8.packed.size()), cg = geo.C / groups, og = geo.O / groups;
    for (int64_t gi = 0; gi < groups; ++gi) {
      auto [rq, gep] = int8_requant(p, n, bias, gi * og, out);
      if (gep.bias) gep.bias = bias + gi * og;  // null where the bias is in the sums (Note [xnnpack requantization])
      kernels::nhwc::qconv_group(geo, bytes, pad, gi * cg, cg, p.int8.packed[gi], rq, gep, out, gi * og);
    }
    return {};
  }
  if (p.winograd.active()) {
    if (!kernels::winograd::fits(geo) || geo.C != p.winograd.C || geo.O != p.winograd.O)
      return fail(Error::InvalidProgram, "input ", shape_str(xs.sizes()), " and output ", shape_str(os.sizes()),
                  " do not fit the convolution's ", p.winograd.C, " -> ", p.winograd.O, " channel 3x3 filter");
    kernels::winograd::conv(geo, x, p.winograd, ep, out, scratch);
    return {};
  }
  if (p.gate_ptr) {  // Note [xnnpack gated filter]: one group, a pointwise filter
    kernels::gemm::scale_rows(p.packed[0], (*p.gate_ptr)[p.gate], p.gated.data.get());
    kernels::nhwc::conv_group(geo, x, 0, geo.C, p.gated, ep, out, 0);
    return {};
  }
  const int64_t groups = static_cast<int64_t>(p.packed.size()), cg = geo.C / groups, og = geo.O / groups;
  for (int64_t gi = 0; gi < groups; ++gi) {
    kernels::gemm::Epilogue gep = ep;
    if (bias) gep.bias = bias + gi * og;
    kernels::nhwc::conv_group(geo, x, gi * cg, cg, p.packed[gi], gep, out, gi * og);
  }
  return {};
}

/// BlockFinish::silu on a block in place: the pointwise layer's SiLU on its band (Note [pointwise then depthwise]).
inline void silu_in_place(const void* state, float* c, int64_t rows, int64_t cols, int64_t ldc) {
  const auto& f = *static_cast<const BlockFinish*>(state);
  for (int64_t r = 0; r < rows; ++r) kernels::silu_clamped(c + r * ldc, c + r * ldc, cols, f.lo, f.hi);
}

/// Whether a pointwise Conv2d node (prepared as `pc`) may run band by band into the DepthwiseConv2d node reading its
/// output (prepared as `pd`): both on their float packed filters, the first ungated, in one group, its block finish
/// none or its SiLU (Note [xnnpack silu]), the second writing floats (Note [pointwise then depthwise]).
inline bool band_pair_fits(const PreparedNode& pc, const PreparedNode& pd) {
  return pc.packed_path && !pc.int8.active() && !pc.winograd.active() && !pc.gate_ptr && pc.packed.size() == 1 &&
         !pc.finish.round && !pc.finish.next && pd.packed_path && !pd.bytes_out && !pd.bytes_in;
}

/// Node c (a pointwise Conv2d) and node d (the DepthwiseConv2d reading c's output, or the SiLU of it) in one pass
/// (Note [pointwise then depthwise]) on this call's shapes: xs c's input, ms the tensor between them, os d's output.
/// False (nothing written) where this call's geometry is not a pointwise layer feeding the depthwise one: the
/// caller then runs the two nodes apart.
inline Result<bool> pointwise_depthwise(const PreparedNode& pc, const Node& c, const PreparedNode& pd, const Node& d,
                                        const float* x, const ValueShape& xs, const ValueShape& ms,
                                        std::span<const int64_t> c_fd, const float* d_filter,
                                        std::span<const int64_t> d_fd, float* out, const ValueShape& os,
                                        const float* c_bias, const float* d_bias) {
  const kernels::nhwc::Geometry pw = geometry(c, xs, ms, c_fd), dw = geometry(d, ms, os, d_fd);
  if (!kernels::nhwc::pointwise_depthwise_fits(pw, dw) || pw.O != pc.packed[0].n || pw.C != pc.packed[0].k)
    return false;
  kernels::gemm::Epilogue pw_ep = epilogue(pc, c, c_bias);
  if (pc.finish.silu) {
    pw_ep.finish = &silu_in_place;
    pw_ep.finish_state = &pc.finish;
  }
  if (!kernels::nhwc::pointwise_depthwise(pw, x, pc.packed[0], pw_ep, dw, d_filter, epilogue(pd, d, d_bias), out))
    return fail(Error::MemoryAllocationFailed, "cannot allocate the pointwise layer's band of rows");
  return true;
}

}  // namespace packed

}  // namespace etrt::xnnpack
