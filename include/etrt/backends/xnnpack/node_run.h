// How each XNNPACK node kind runs: one function per kind (or a template over the portable kernel it calls), named
// by the node kinds' table (node_table.h). A run function reads and writes float buffers through NodeRun; what it
// relies on was checked at load by the kind's check (graph_checks.h) and the shapes this call come from the kind's
// shape rule (shape_inference.h).
//
// Layouts: an XNN value's dims describe its memory, row-major. Spatial nodes (convolutions, pooling, resize) work
// in NHWC with OHWI filters, so the kernels get NCHW-shaped views whose dim_order is channels-last ({0,2,3,1});
// filters get the dim_order that maps torch's weight layout onto XNNPACK's (conv_weight). No data is permuted: a
// view with a dim_order is just strides.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "etrt/backends/xnnpack/argmax_pooling.h"
#include "etrt/backends/xnnpack/byte_values.h"
#include "etrt/backends/xnnpack/fast_elementwise.h"
#include "etrt/backends/xnnpack/graph_checks.h"
#include "etrt/backends/xnnpack/packed_filters.h"
#include "etrt/backends/xnnpack/quantization.h"
#include "etrt/backends/xnnpack/quantized_gemv.h"
#include "etrt/backends/xnnpack/sdpa.h"
#include "etrt/backends/xnnpack/shape_inference.h"
#include "etrt/core/evalue.h"
#include "etrt/kernels/float_kernels.h"  // the portable kernels below, instantiated once for float
#include "etrt/kernels/kernel.h"
#include "etrt/kernels/util/movement_util.h"
#include "etrt/kernels/util/nhwc_pool.h"

namespace etrt::xnnpack {

namespace detail {

using F = types<float>;

inline Scalar fscalar(double d) {
  Scalar s;
  s.v = d;
  return s;
}
inline Scalar iscalar(int64_t i) {
  Scalar s;
  s.v = i;
  return s;
}

/// Rows of a quantized weight dequantized at a time (about 64 KB of floats).
inline int64_t weight_block_rows(int64_t k) { return std::clamp<int64_t>(16384 / std::max<int64_t>(k, 1), 8, 256); }

}  // namespace detail

/// What a node's run function works on this call: the float buffer and shape of every value, and the scratch
/// buffer sized at load for the largest need (Note [xnnpack scratch]).
struct NodeRun {
  KernelContext& ctx;
  const Graph& g;
  std::span<float* const> ptr;
  std::span<const ValueShape> shapes;
  float* scratch;
  const std::vector<bool>& blocked_weights;  // quantized filters read a block of rows at a time (executor.h)
  std::span<const PreparedNode> prepared;    // by node position (packed_filters.h)
  // By value id: the per-row parameters of each dynamically quantized value this call (empty for the others).
  std::span<const std::vector<quant::DynamicParams>> row_params;
  // Set by a run function that wrote its per-tensor quantized output already clamped to the node's output_min_max
  // and rounded onto its grid (fast::OutGrid): the executor then skips its requantize pass. Reset before each node.
  mutable bool output_on_grid = false;

  /// The rounding of node n's output as a loop writes it, when the output is quantized per tensor on a grid within
  /// the vector rounding's range; the clamp is the node's output_min_max (the executor's requantize_output).
  std::optional<fast::OutGrid> out_grid(const Node& n) const {
    const Value& v = g.values[n.output];
    if (v.quant.kind != QuantKind::PerTensor) return std::nullopt;
    const QRange range = qrange(v.datatype);
    const float qlo = static_cast<float>(range.lo - v.quant.zero_point);
    const float qhi = static_cast<float>(range.hi - v.quant.zero_point);
    if (std::max(-qlo, qhi) > 4194304.f) return std::nullopt;  // a 32-bit grid: the pass's exact path
    constexpr float kInf = std::numeric_limits<float>::infinity();
    return fast::OutGrid{n.has_min_max ? n.out_min : -kInf, n.has_min_max ? n.out_max : kInf, 1.f / v.quant.scale,
                         qlo, qhi, v.quant.scale};
  }

  Result<Tensor> flat(uint32_t id) const { return Tensor::make(ScalarType::Float, shapes[id].sizes(), {}, ptr[id]); }

  /// An NHWC buffer as the NCHW tensor the kernels expect (channels-last dim_order).
  Result<Tensor> nchw(uint32_t id) const {
    const auto& d = shapes[id].d;  // 4-D: the kind's check
    const std::array<int64_t, 4> sizes{d[0], d[3], d[1], d[2]};
    static constexpr std::array<uint8_t, 4> kChannelsLast{0, 2, 3, 1};
    return Tensor::make(ScalarType::Float, sizes, kChannelsLast, ptr[id]);
  }

  /// The input of a convolution or pooling node as an NCHW view. The excess of asymmetric padding is applied here,
  /// into scratch, with `value`; `pad` receives the symmetric padding left for the kernel (Note [xnnpack scratch]).
  Result<Tensor> spatial_input(const Node& n, float value, std::array<int64_t, 2>& pad) const {
    const detail::SpatialPad p = detail::split_padding(n);
    pad = p.symmetric;
    if (!p.explicit_pad()) return nchw(n.inputs[0]);
    const auto& d = shapes[n.inputs[0]].d;  // NHWC, 4-D
    const std::array<int64_t, 4> padded{d[0], d[1] + p.top + p.bottom, d[2] + p.left + p.right, d[3]};
    ETRT_TRY(Tensor x, flat(n.inputs[0]));
    ETRT_TRY(Tensor px, Tensor::make(ScalarType::Float, padded, {}, scratch));  // sized at load: scratch::padded_input
    const std::array<int64_t, 6> pads{0, 0, p.left, p.right, p.top, p.bottom};  // (C, W, H) pairs, last dim first
    ETRT_CHECK_OK(kernels::constant_pad_nd_out<detail::F>(ctx, x, pads, detail::fscalar(value), px));
    const std::array<int64_t, 4> sizes{padded[0], padded[3], padded[1], padded[2]};
    static constexpr std::array<uint8_t, 4> kChannelsLast{0, 2, 3, 1};
    return Tensor::make(ScalarType::Float, sizes, kChannelsLast, scratch);
  }

  /// The optional input `k` (a bias) as a flat tensor, or nullopt when the node has none.
  Result<std::optional<Tensor>> optional_flat(const Node& n, size_t k) const {
    if (n.inputs[k] == kNoValue) return std::optional<Tensor>();
    ETRT_TRY(Tensor t, flat(n.inputs[k]));
    return std::optional<Tensor>(t);
  }
};

using RunFn = Status (*)(const NodeRun&, const Node&);

namespace run {

using detail::F;
using UnaryKernel = Status (*)(KernelContext&, const Tensor&, Tensor&);
using BinaryKernel = Status (*)(KernelContext&, const Tensor&, const Tensor&, Tensor&);

/// A portable kernel on one input, as its output.
template <UnaryKernel Kernel>
Status unary(const NodeRun& r, const Node& n) {
  ETRT_TRY(Tensor x, r.flat(n.inputs[0]));
  ETRT_TRY(Tensor o, r.flat(n.output));
  return Kernel(r.ctx, x, o);
}

/// An elementwise node's function from a float tensor into an output of its size, each output element a function
/// of the input element at its place and the node's fields alone: what an activation chain tabulates over a grid's
/// 256 bytes or runs block by block (Note [xnnpack activation chain]). The kinds' run functions go through the
/// same kernels, so a chain and the nodes it replaces compute the same values.
using ElementwiseFn = Status (*)(KernelContext&, const Node&, const Tensor&, Tensor&);
template <UnaryKernel Kernel>
Status unary_elements(KernelContext& c, const Node&, const Tensor& x, Tensor& o) {
  return Kernel(c, x, o);
}
/// Two inputs that broadcast (shape::broadcast): the contiguous loop of Op when the shapes allow it
/// (fast_elementwise.h), else the portable kernel.
template <BinaryKernel Kernel, class Op>
Status binary(const NodeRun& r, const Node& n) {
  const uint32_t ia = n.inputs[0], ib = n.inputs[1];
  const auto grid = r.out_grid(n);
  if (const PreparedNode& p = r.prepared[n.index]; p.bytes_out || p.bytes_in) {  // Note [byte activations]
    const ValueShape& os = r.shapes[n.output];
    const auto layout = fast::mixed_layout(r.shapes[ia], r.shapes[ib], os);
    if (!layout || !grid)
      return fail(Error::InvalidArgument, "inputs ", shape_str(r.shapes[ia].sizes()), " and ",
                  shape_str(r.shapes[ib].sizes()), " do not broadcast to ", shape_str(os.sizes()),
                  " as its int8 values take (equal shapes, or one repeating the other's last dims)");
    const auto operand = [&](uint32_t id, int k, bool row) {
      const Value& v = r.g.values[id];
      if (!(p.bytes_in & (1u << k))) return fast::MixedOperand{r.ptr[id], nullptr, 0.f, 1.f, row};
      return fast::MixedOperand{nullptr, reinterpret_cast<const uint8_t*>(r.ptr[id]), byte_zero(v), v.quant.scale, row};
    };
    fast::binary_mixed(operand(ia, 0, layout->a_row), operand(ib, 1, layout->b_row), layout->rows, layout->inner, Op{},
                       *grid, p.bytes_out ? nullptr : r.ptr[n.output],
                       p.bytes_out ? reinterpret_cast<uint8_t*>(r.ptr[n.output]) : nullptr,
                       byte_zero(r.g.values[n.output]));
    r.output_on_grid = true;
    return {};
  }
  if (fast::binary(r.shapes[ia], r.ptr[ia], r.shapes[ib], r.ptr[ib], r.shapes[n.output], r.ptr[n.output], Op{},
                   grid ? &*grid : nullptr)) {
    r.output_on_grid = grid.has_value();
    return {};
  }
  ETRT_TRY(Tensor a, r.flat(n.inputs[0]));
  ETRT_TRY(Tensor b, r.flat(n.inputs[1]));
  ETRT_TRY(Tensor o, r.flat(n.output));
  return Kernel(r.ctx, a, b, o);
}

// Kernels whose extra arguments are fixed for XNNPACK's definition of the node.
inline Status add(KernelContext& c, const Tensor& a, const Tensor& b, Tensor& o) {
  return kernels::add_out<F>(c, a, b, detail::iscalar(1), o);
}
inline Status subtract(KernelContext& c, const Tensor& a, const Tensor& b, Tensor& o) {
  return kernels::sub_out<F>(c, a, b, detail::iscalar(1), o);
}
inline Status softmax_last_dim(KernelContext& c, const Tensor& x, Tensor& o) {
  return kernels::softmax_out<F>(c, x, std::max<int64_t>(x.dim() - 1, 0), false, o);
}
inline Status sigmoid_elements(KernelContext&, const Node&, const Tensor& x, Tensor& o) {
  fast::sigmoid(x.data_as<float>(), o.data_as<float>(), x.numel());
  return {};
}
inline Status sigmoid(const NodeRun& r, const Node& n) {
  const int64_t count = r.shapes[n.output].numel();  // shape::same
  if (const auto grid = r.out_grid(n)) {
    fast::sigmoid(r.ptr[n.inputs[0]], r.ptr[n.output], count, *grid);
    r.output_on_grid = true;
  } else {
    fast::sigmoid(r.ptr[n.inputs[0]], r.ptr[n.output], count);
  }
  return {};
}
inline Status gelu_exact(KernelContext& c, const Tensor& x, Tensor& o) { return kernels::gelu_out<F>(c, x, "none", o); }
inline Status square(KernelContext& c, const Tensor& x, Tensor& o) { return kernels::mul_out<F>(c, x, x, o); }

inline Status leaky_relu_elements(KernelContext& c, const Node& n, const Tensor& x, Tensor& o) {
  return kernels::leaky_relu_out<F>(c, x, detail::fscalar(n.fparam), o);
}
inline Status leaky_relu(const NodeRun& r, const Node& n) {
  ETRT_TRY(Tensor x, r.flat(n.inputs[0]));
  ETRT_TRY(Tensor o, r.flat(n.output));
  return leaky_relu_elements(r.ctx, n, x, o);
}
inline Status elu_elements(KernelContext& c, const Node& n, const Tensor& x, Tensor& o) {
  return kernels::elu_out<F>(c, x, detail::fscalar(n.fparam), detail::fscalar(1.0), detail::fscalar(1.0), o);
}
inline Status elu(const NodeRun& r, const Node& n) {
  ETRT_TRY(Tensor x, r.flat(n.inputs[0]));
  ETRT_TRY(Tensor o, r.flat(n.output));
  return elu_elements(r.ctx, n, x, o);
}

/// prelu(x, w) = max(x, 0) + w * min(x, 0), from the binary kernels (w broadcasts on channels, the last NHWC dim);
/// the negative part goes to scratch (scratch::input_size).
inline Status prelu(const NodeRun& r, const Node& n) {
  ETRT_TRY(Tensor x, r.flat(n.inputs[0]));
  ETRT_TRY(Tensor w, r.flat(n.inputs[1]));
  ETRT_TRY(Tensor o, r.flat(n.output));
  float zero = 0.f;
  ETRT_TRY(Tensor z, Tensor::make(ScalarType::Float, {}, {}, &zero));
  ETRT_TRY(Tensor tn, Tensor::make(ScalarType::Float, x.sizes(), {}, r.scratch));
  ETRT_CHECK_OK(kernels::minimum_out<F>(r.ctx, x, z, tn));
  ETRT_CHECK_OK(kernels::mul_out<F>(r.ctx, tn, w, tn));
  ETRT_CHECK_OK(kernels::maximum_out<F>(r.ctx, x, z, o));
  return kernels::add_out<F>(r.ctx, o, tn, detail::iscalar(1), o);
}

/// Reshape, convert, copy and clamp move bytes (equal element counts: checks::same_size); clamp's bounds are its
/// output_min_max, which the executor applies after every node.
inline Status copy(const NodeRun& r, const Node& n) {
  const size_t bytes = static_cast<size_t>(r.shapes[n.output].numel()) * sizeof(float);
  if (r.ptr[n.output] == r.ptr[n.inputs[0]]) return {};  // the output holds its input's bytes (Note [xnnpack reshape alias])
  if (bytes) std::memmove(r.ptr[n.output], r.ptr[n.inputs[0]], bytes);
  return {};
}

/// out[M, N] = x[M, K] . dequantize(w[N, K])^T + bias, a block of weight rows at a time through scratch.
inline Status quantized_linear(const NodeRun& r, const Node& n) {
  const Value& w = r.g.values[n.inputs[1]];
  const int64_t rows_total = w.dims[0], k = w.dims[1];
  const ValueShape& xs = r.shapes[n.inputs[0]];
  if (xs.rank == 0 || xs.d[xs.rank - 1] != k)
    return fail(Error::InvalidProgram, "input ", shape_str(xs.sizes()), " does not end in the filter's ", k,
                " input channels");
  const int64_t m = xs.numel() / std::max<int64_t>(k, 1);
  if (r.shapes[n.output].numel() != m * rows_total)
    return fail(Error::InvalidProgram, "output ", shape_str(r.shapes[n.output].sizes()), " is not ", m, " x ",
                rows_total);
  const float* x = r.ptr[n.inputs[0]];
  float* out = r.ptr[n.output];
  const float* bias = n.inputs[2] != kNoValue ? r.ptr[n.inputs[2]] : nullptr;
  const PreparedNode& p = r.prepared[n.index];
  const std::vector<quant::DynamicParams>& params = r.row_params[n.inputs[0]];
  if (p.qd8.weight != quant::Qd8Weight::None && static_cast<size_t>(m) <= params.size()) {
    const quant::Qd8Rows rows = quant::qd8_rows_in(r.scratch, m, k);  // qd8_rows_bytes(m, k): sized at load
    quant::pack_qd8_rows(p.qd8, x, m, k, params.data(), rows);
    quant::qd8_gemm(p.qd8, rows, m, w.dims, w.constant.data(), w.quant, bias, out);
    return {};
  }
  const int64_t block = detail::weight_block_rows(k);
  float* wbuf = r.scratch;  // block x k floats: sized at load (executor.h)
  if (m <= quant::kGemvMaxRows && k <= quant::kGemvMaxCols) {  // wbuf holds kGemvMaxRows x k floats too
    quant::quantized_gemv(w.datatype, w.quant, w.dims, w.constant.data(), x, m, bias, out, wbuf);
    return {};
  }
  for (int64_t r0 = 0; r0 < rows_total; r0 += block) {
    const int64_t rows = std::min(block, rows_total - r0);
    quant::dequantize_rows(w.datatype, w.quant, w.dims, w.constant.data(), r0, rows, wbuf);
    kernels::gemm::gemm<float>(false, true, m, rows, k, 1.f, x, k, wbuf, k, 0.f, out + r0, rows_total);
    if (bias)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < rows; ++j) out[i * rows_total + r0 + j] += bias[r0 + j];
  }
  return {};
}

inline const float* optional_ptr(const NodeRun& r, const Node& n, size_t k) {
  return n.inputs[k] == kNoValue ? nullptr : r.ptr[n.inputs[k]];
}

inline Status fully_connected(const NodeRun& r, const Node& n) {
  if (const PreparedNode& p = r.prepared[n.index]; p.packed_path)
    return packed::fully_connected(p, n, r.ptr[n.inputs[0]], r.shapes[n.inputs[0]], r.ptr[n.output],
                                   r.shapes[n.output], optional_ptr(r, n, 2));
  if (r.blocked_weights[n.inputs[1]]) return quantized_linear(r, n);
  ETRT_TRY(Tensor x, r.flat(n.inputs[0]));
  ETRT_TRY(Tensor o, r.flat(n.output));
  const auto& wd = r.g.values[n.inputs[1]].dims;
  if (wd.size() != 2) return fail(Error::InvalidProgram, "filter must be 2-D, got ", shape_str(wd));
  Tensor w;
  if (n.flags & kFlagTransposeWeights) {
    // [K, N] in memory: torch's [N, K] weight with a transposed dim_order.
    const std::array<int64_t, 2> sizes{wd[1], wd[0]};
    static constexpr std::array<uint8_t, 2> order{1, 0};
    ETRT_TRY(w, Tensor::make(ScalarType::Float, sizes, order, r.ptr[n.inputs[1]]));
  } else {
    ETRT_TRY(w, r.flat(n.inputs[1]));
  }
  ETRT_TRY(std::optional<Tensor> bias, r.optional_flat(n, 2));
  return kernels::linear_out<F>(r.ctx, x, w, bias ? &*bias : nullptr, o);
}

enum class ConvFilter { Ohwi, Depthwise, Transposed };

/// The filter as torch's weight: OHWI -> [O, I, KH, KW]; depthwise [1, KH, KW, O] -> [O, 1, KH, KW]; transposed
/// OHWI (groups 1) -> torch's transposed [I, O, KH, KW].
template <ConvFilter Filter>
Result<Tensor> conv_weight(const NodeRun& r, const Node& n) {
  const auto& d = r.g.values[n.inputs[1]].dims;
  float* p = r.ptr[n.inputs[1]];
  if constexpr (Filter == ConvFilter::Ohwi) {
    const std::array<int64_t, 4> sizes{d[0], d[3], d[1], d[2]};
    static constexpr std::array<uint8_t, 4> order{0, 2, 3, 1};
    return Tensor::make(ScalarType::Float, sizes, order, p);
  } else {
    const std::array<int64_t, 4> sizes{d[3], d[0], d[1], d[2]};
    static constexpr std::array<uint8_t, 4> order{1, 2, 3, 0};
    return Tensor::make(ScalarType::Float, sizes, order, p);
  }
}

template <ConvFilter Filter>
Status convolution(const NodeRun& r, const Node& n) {
  if constexpr (Filter != ConvFilter::Transposed) {
    if (const PreparedNode& p = r.prepared[n.index]; p.packed_path)
      return packed::convolution(p, n, Filter == ConvFilter::Depthwise, r.ptr[n.inputs[0]], r.shapes[n.inputs[0]],
                                 r.ptr[n.inputs[1]], r.g.values[n.inputs[1]].dims, r.ptr[n.output],
                                 r.shapes[n.output], optional_ptr(r, n, 2), r.scratch);
  }
  std::array<int64_t, 2> pad{};
  ETRT_TRY(Tensor x, r.spatial_input(n, 0.f, pad));
  ETRT_TRY(Tensor o, r.nchw(n.output));
  ETRT_TRY(Tensor w, conv_weight<Filter>(r, n));
  ETRT_TRY(std::optional<Tensor> bias, r.optional_flat(n, 2));
  const std::array<int64_t, 2> stride{n.conv[6], n.conv[7]};
  const std::array<int64_t, 2> dil{std::max<uint32_t>(n.conv[8], 1), std::max<uint32_t>(n.conv[9], 1)};
  const std::array<int64_t, 2> adj{n.conv[13], n.conv[14]};
  constexpr bool transposed = Filter == ConvFilter::Transposed;
  return kernels::convolution_out<F>(r.ctx, x, w, bias ? &*bias : nullptr, stride, pad, dil, transposed,
                                     transposed ? std::span<const int64_t>(adj) : std::span<const int64_t>(),
                                     n.conv[12], o);
}

/// The pooling window of a MaxPooling2d or AvgPooling2d node on NHWC activations, where its shapes and fields
/// make a valid one with one output channel per input channel.
inline std::optional<kernels::nhwc::Geometry> pooling_geometry(const ValueShape& xs, const ValueShape& os,
                                                               const Node& n) {
  if (xs.rank != 4 || os.rank != 4) return std::nullopt;
  kernels::nhwc::Geometry geo;
  geo.N = xs.d[0], geo.H = xs.d[1], geo.W = xs.d[2], geo.C = xs.d[3];
  geo.OH = os.d[1], geo.OW = os.d[2], geo.O = os.d[3];
  geo.KH = n.conv[4], geo.KW = n.conv[5], geo.sh = n.conv[6], geo.sw = n.conv[7];
  geo.dh = std::max<uint32_t>(n.conv[8], 1), geo.dw = std::max<uint32_t>(n.conv[9], 1);
  geo.pt = n.conv[0], geo.pr = n.conv[1], geo.pb = n.conv[2], geo.pl = n.conv[3];
  if (!geo.valid() || geo.O != geo.C || os.d[0] != geo.N) return std::nullopt;
  return geo;
}
inline std::optional<kernels::nhwc::Geometry> pooling_geometry(const NodeRun& r, const Node& n) {
  return pooling_geometry(r.shapes[n.inputs[0]], r.shapes[n.output], n);
}

/// The NHWC loop (kernels/util/nhwc_pool.h) where the window geometry holds, else the portable kernel.
inline Status avg_pooling(const NodeRun& r, const Node& n) {
  if (const auto geo = pooling_geometry(r, n); geo && geo->dh == 1 && geo->dw == 1 &&
                                               kernels::nhwc::avg_pool(*geo, r.ptr[n.inputs[0]], r.ptr[n.output]))
    return {};
  std::array<int64_t, 2> pad{};
  ETRT_TRY(Tensor x, r.spatial_input(n, 0.f, pad));  // symmetric padding only: checks::avg_pooling
  ETRT_TRY(Tensor o, r.nchw(n.output));
  const std::array<int64_t, 2> ks{n.conv[4], n.conv[5]}, stride{n.conv[6], n.conv[7]};
  return kernels::avg_pool2d_out<F>(r.ctx, x, ks, stride, pad, false, false, std::nullopt, o);
}

/// The NHWC loop (kernels/util/nhwc_pool.h) where the window geometry holds, else the portable kernel, whose errors
/// name what is wrong.
inline Status max_pooling(const NodeRun& r, const Node& n) {
  if (r.prepared[n.index].bytes_out) {  // Note [byte activations]: bytes of one grid in and out (ByteForm::Joint)
    const auto geo = pooling_geometry(r, n);
    if (!geo || !kernels::nhwc::max_pool_bytes_fits(*geo))  // checked when the bytes were chosen
      return fail(Error::Internal, "max pooling of bytes without an NHWC window of at most 64 taps");
    kernels::nhwc::max_pool_bytes(*geo, reinterpret_cast<const uint8_t*>(r.ptr[n.inputs[0]]),
                                  reinterpret_cast<uint8_t*>(r.ptr[n.output]));
    r.output_on_grid = true;  // the maxima are the input's grid points, which is the output's grid
    return {};
  }
  if (const auto geo = pooling_geometry(r, n)) {
    kernels::nhwc::max_pool(*geo, r.ptr[n.inputs[0]], r.ptr[n.output]);
    return {};
  }
  std::array<int64_t, 2> pad{};
  ETRT_TRY(Tensor x, r.spatial_input(n, -std::numeric_limits<float>::infinity(), pad));
  ETRT_TRY(Tensor o, r.nchw(n.output));
  const std::array<int64_t, 2> ks{n.conv[4], n.conv[5]}, stride{n.conv[6], n.conv[7]};
  const std::array<int64_t, 2> dil{std::max<uint32_t>(n.conv[8], 1), std::max<uint32_t>(n.conv[9], 1)};
  // The indices follow the padded input in scratch (scratch::max_pooling).
  const detail::SpatialPad sp = detail::split_padding(n);
  uint64_t at = 0;
  if (sp.explicit_pad()) {
    const auto& d = r.shapes[n.inputs[0]].d;
    at = static_cast<uint64_t>(d[0] * (d[1] + sp.top + sp.bottom) * (d[2] + sp.left + sp.right) * d[3]);
  }
  at = (at + 1) / 2 * 2;
  ETRT_TRY(Tensor it, Tensor::make(ScalarType::Long, o.sizes(), {}, r.scratch + at));
  return kernels::max_pool2d_with_indices_out<F>(r.ctx, x, ks, stride, pad, dil, false, o, it);
}

/// The mean over the pixels of each channel of an NHWC input (kernels/util/nhwc_pool.h); NaN for an input of no
/// pixels, as torch's mean of nothing.
inline Status global_avg_pooling(const NodeRun& r, const Node& n) {
  const ValueShape& xs = r.shapes[n.inputs[0]];  // 4-D: checks::nhwc
  const ValueShape& os = r.shapes[n.output];
  const int64_t N = xs.d[0], P = xs.d[1] * xs.d[2], C = xs.d[3];
  if (os.rank != 4 || os.d[0] != N || os.d[1] != 1 || os.d[2] != 1 || os.d[3] != C)
    return fail(Error::InvalidProgram, "output ", shape_str(os.sizes()), " is not the input ", shape_str(xs.sizes()),
                " pooled to one pixel");
  if (r.prepared[n.index].bytes_in & 1) {  // Note [byte activations]
    const Value& v = r.g.values[n.inputs[0]];
    kernels::nhwc::global_avg_pool_bytes(reinterpret_cast<const uint8_t*>(r.ptr[n.inputs[0]]), N, P, C, byte_zero(v),
                                         v.quant.scale, r.ptr[n.output]);
    return {};
  }
  kernels::nhwc::global_avg_pool(r.ptr[n.inputs[0]], N, P, C, r.ptr[n.output]);
  return {};
}

inline Status resize_bilinear(const NodeRun& r, const Node& n) {
  ETRT_TRY(Tensor x, r.nchw(n.inputs[0]));
  ETRT_TRY(Tensor o, r.nchw(n.output));
  const std::array<int64_t, 2> size{n.conv[0], n.conv[1]};
  return kernels::upsample_bilinear2d_vec_out<F>(r.ctx, x, std::span<const int64_t>(size),
                                                 (n.flags & kFlagAlignCorners) != 0, std::nullopt, o);
}

inline Status transpose(const NodeRun& r, const Node& n) {
  if (r.prepared[n.index].bytes_out) {  // Note [byte activations]: input and output bytes on one grid (ByteForm::Joint)
    const ValueShape& xs = r.shapes[n.inputs[0]];
    std::array<int64_t, kMaxXnnDims> stride{};
    int64_t s = 1;
    for (uint32_t d = xs.rank; d-- > 0;) stride[d] = s, s *= xs.d[d];
    kernels::mv::View src;
    src.data = reinterpret_cast<char*>(r.ptr[n.inputs[0]]);
    for (uint32_t d = 0; d < xs.rank; ++d) {  // checks::transpose: n.ints is a permutation of [0, rank)
      const auto from = static_cast<size_t>(n.ints[d]);
      src.push(xs.d[from], stride[from]);
    }
    kernels::mv::copy_views(1, kernels::mv::contiguous_view(r.ptr[n.output], r.shapes[n.output].sizes()), src);
    r.output_on_grid = true;  // the bytes are the input's grid points, which is the output's grid
    return {};
  }
  ETRT_TRY(Tensor x, r.flat(n.inputs[0]));
  ETRT_TRY(Tensor o, r.flat(n.output));
  return kernels::permute_copy_out<F>(r.ctx, x, n.ints, o);
}

inline Status constant_pad(const NodeRun& r, const Node& n) {
  ETRT_TRY(Tensor x, r.flat(n.inputs[0]));
  ETRT_TRY(Tensor o, r.flat(n.output));
  // constant_pad_nd lists (before, after) pairs from the last dim backwards.
  const size_t rank = x.dim();
  std::vector<int64_t> pad;
  for (size_t d = rank; d-- > 0;) pad.insert(pad.end(), {n.ints[d], n.ints[rank + d]});
  return kernels::constant_pad_nd_out<F>(r.ctx, x, pad, detail::fscalar(n.fparam), o);
}

inline Status concatenate(const NodeRun& r, const Node& n) {
  std::vector<Tensor> ts;
  for (uint32_t id : n.inputs) {
    ETRT_TRY(Tensor t, r.flat(id));
    ts.push_back(t);
  }
  std::vector<Tensor*> ptrs;
  for (Tensor& t : ts) ptrs.push_back(&t);
  ETRT_TRY(Tensor o, r.flat(n.output));
  return kernels::cat_out<F>(r.ctx, ptrs, n.axis, o);
}

/// One slice_copy per sliced dim, through two intermediates in scratch taking turns (scratch::two_inputs); the
/// exporter slices one dim per node in practice.
inline Status slice(const NodeRun& r, const Node& n) {
  ETRT_TRY(Tensor cur, r.flat(n.inputs[0]));
  const size_t rank = cur.dim();
  std::vector<int64_t> sizes(cur.sizes().begin(), cur.sizes().end());
  std::vector<size_t> sliced;
  float* tmp[2] = {r.scratch, r.scratch ? r.scratch + r.g.values[n.inputs[0]].numel : nullptr};
  for (size_t d = 0; d < rank; ++d) {
    const int64_t size = n.ints[rank + d] == 0 ? sizes[d] - n.ints[d] : n.ints[rank + d];
    if (n.ints[d] != 0 || size != sizes[d]) sliced.push_back(d);
  }
  if (sliced.empty()) return copy(r, n);
  for (size_t j = 0; j < sliced.size(); ++j) {
    const size_t d = sliced[j];
    const int64_t off = n.ints[d], size = n.ints[rank + d] == 0 ? sizes[d] - off : n.ints[rank + d];
    sizes[d] = size;
    Tensor next;
    if (j + 1 == sliced.size()) {
      ETRT_TRY(next, r.flat(n.output));
    } else {
      ETRT_TRY(next, Tensor::make(ScalarType::Float, sizes, {}, tmp[j % 2]));  // each fits: sizes only shrink
    }
    ETRT_CHECK_OK(kernels::slice_copy_tensor_out<F>(r.ctx, cur, static_cast<int64_t>(d), off, off + size, 1, next));
    cur = next;
  }
  return {};
}

/// Leading dims folded into one batch (equal on both sides: checks::batch_matmul).
inline Status batch_matmul(const NodeRun& r, const Node& n) {
  const auto ad = r.shapes[n.inputs[0]].sizes();
  const auto bd = r.shapes[n.inputs[1]].sizes();
  const auto od = r.shapes[n.output].sizes();
  const int64_t batch = detail::product(ad.first(ad.size() - 2));
  if (batch < 0) return fail(Error::InvalidProgram, "batch of ", shape_str(ad), " overflows");
  const std::array<int64_t, 3> as{batch, ad[ad.size() - 2], ad.back()}, bs{batch, bd[bd.size() - 2], bd.back()};
  if (od.size() < 2) return fail(Error::InvalidProgram, "output must be at least 2-D");
  const std::array<int64_t, 3> os{batch, od[od.size() - 2], od.back()};
  if (detail::product(os) != r.shapes[n.output].numel())
    return fail(Error::InvalidProgram, "output ", shape_str(od), " does not match the batch of ", shape_str(ad));
  ETRT_TRY(Tensor a, Tensor::make(ScalarType::Float, as, {}, r.ptr[n.inputs[0]]));
  ETRT_TRY(Tensor b, Tensor::make(ScalarType::Float, bs, {}, r.ptr[n.inputs[1]]));
  ETRT_TRY(Tensor o, Tensor::make(ScalarType::Float, os, {}, r.ptr[n.output]));
  return kernels::bmm_out<F>(r.ctx, a, b, o);
}

inline Status argmax_pooling(const NodeRun& r, const Node& n) {
  return argmax_pooling_2d(n, r.ptr[n.inputs[0]], r.shapes[n.inputs[0]], r.ptr[n.output], r.ptr[n.index_output],
                           r.shapes[n.output]);
}

inline Status sdpa(const NodeRun& r, const Node& n) {
  const auto& in = n.inputs;
  const SdpaOperands a{r.ptr[in[0]],    r.ptr[in[1]],    r.ptr[in[2]],    r.ptr[in[3]],    r.ptr[in[4]],
                       r.ptr[n.output], r.shapes[in[0]], r.shapes[in[1]], r.shapes[in[2]], r.shapes[in[3]],
                       r.shapes[in[4]], r.shapes[n.output]};
  return scaled_dot_product_attention(n, a, r.scratch);  // scratch::key_size: at least U logits
}

}  // namespace run

}  // namespace etrt::xnnpack
