// Runs a validated XNNPACK Graph with the portable kernels (no XNNPACK library).
//
// Layouts: an XNN value's dims describe its memory, row-major. Spatial nodes (convolutions, pooling, resize) work
// in NHWC with OHWI filters, so the executor hands the kernels NCHW-shaped views whose dim_order is channels-last
// ({0,2,3,1}); filters get the dim_order that maps torch's weight layout onto XNNPACK's (see conv_weight). No data
// is permuted: a view with a dim_order is just strides.
//
// Memory: constants are read in place from the program's bytes (copied once only if misaligned);
// intermediates share one liveness-planned arena; external values (the DelegateCall's args) are bound per call.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>  // uintptr_t: constant alignment
#include <cstring>
#include <memory>
#include <mutex>
#include <new>  // std::nothrow
#include <optional>
#include <span>
#include <vector>

#include "etrt/backends/xnnpack/argmax_pooling.h"
#include "etrt/backends/xnnpack/graph_checks.h"
#include "etrt/backends/xnnpack/intermediate_plan.h"
#include "etrt/backends/xnnpack/payload.h"
#include "etrt/backends/xnnpack/quantization.h"
#include "etrt/backends/xnnpack/sdpa.h"
#include "etrt/backends/xnnpack/shape_inference.h"
#include "etrt/core/evalue.h"
#include "etrt/kernels/kernel.h"
#include "etrt/kernels/ops/activation.h"
#include "etrt/kernels/ops/arithmetic.h"
#include "etrt/kernels/ops/conv.h"
#include "etrt/kernels/ops/linalg.h"
#include "etrt/kernels/ops/pad.h"
#include "etrt/kernels/ops/pool.h"
#include "etrt/kernels/ops/rearrange.h"
#include "etrt/kernels/ops/reduce.h"
#include "etrt/kernels/ops/shape.h"
#include "etrt/kernels/ops/softmax.h"
#include "etrt/kernels/ops/unary.h"
#include "etrt/kernels/ops/upsample.h"

namespace etrt::xnnpack {

class Executor {
 public:
  /// Upper bound on one graph's own storage (constants plus intermediates, one buffer each).
  static constexpr uint64_t kMaxStorageBytes = uint64_t{4} << 30;

  /// `max_bytes` > 0 lowers the limit for this graph (LoadOptions::max_planned_bytes).
  static Result<std::unique_ptr<Executor>> create(Graph g, uint64_t max_bytes = 0) {
    auto e = std::unique_ptr<Executor>(new Executor());
    e->ptr_.assign(g.values.size(), nullptr);
    e->storage_.resize(g.values.size());
    for (const Node& n : g.nodes) ETRT_CHECK_OK(detail::check_node(g, n));
    ETRT_TRY(const IntermediatePlan plan, plan_intermediates(g));
    uint64_t scratch = 0;  // Note [xnnpack scratch]
    for (const Node& n : g.nodes) {
      ETRT_TRY(const uint64_t need, detail::scratch_floats(g, n));
      scratch = std::max(scratch, need);
    }
    e->stays_quantized_ = weights_read_in_blocks(g);
    for (const Node& n : g.nodes)
      if (n.kind == NodeKind::FullyConnected && e->stays_quantized_[n.inputs[1]]) {
        const int64_t k = g.values[n.inputs[1]].dims[1];
        scratch = std::max<uint64_t>(scratch, static_cast<uint64_t>(weight_block_rows(k) * k));
      }
    // Bound what a payload may ask for before allocating (a corrupt dim must not exhaust memory).
    uint64_t total_bytes = (plan.arena_floats + scratch) * sizeof(float);
    for (const Value& v : g.values) {
      if (!v.present) continue;
      if (!v.constant.empty()) total_bytes += v.constant.size();
      // Quantized constants are dequantized once (weights read in blocks excepted); quantized externals get a float
      // staging buffer.
      const size_t id = static_cast<size_t>(&v - g.values.data());
      if (v.datatype != Datatype::Fp32 && (!v.constant.empty() || (v.flags & kExternal)) && !e->stays_quantized_[id])
        total_bytes += static_cast<uint64_t>(v.numel) * sizeof(float);
    }
    const uint64_t limit = max_bytes > 0 ? std::min(max_bytes, kMaxStorageBytes) : kMaxStorageBytes;
    if (total_bytes > limit)
      return fail(Error::MemoryAllocationFailed, "XNNPACK graph: its constants and intermediates need ", total_bytes,
                  " bytes, over the ", max_bytes > 0 && max_bytes < kMaxStorageBytes ? "load option's cap" : "delegate's limit",
                  " of ", limit, " bytes");
    // Default-initialised: pages are touched by the first node that writes them, not here.
    e->arena_.reset(new (std::nothrow) float[std::max<uint64_t>(plan.arena_floats, 1)]);
    if (!e->arena_) return fail(Error::MemoryAllocationFailed, "XNNPACK graph: cannot allocate ", total_bytes, " bytes");
    if (scratch > 0) {
      e->scratch_.reset(new (std::nothrow) float[scratch]);
      if (!e->scratch_)
        return fail(Error::MemoryAllocationFailed, "XNNPACK graph: cannot allocate ", scratch * sizeof(float),
                    " bytes of scratch");
    }
    for (size_t id = 0; id < g.values.size(); ++id) {
      const Value& v = g.values[id];
      if (!v.present || e->stays_quantized_[id]) continue;
      if (v.datatype != Datatype::Fp32 && (!v.constant.empty() || (v.flags & kExternal))) {
        // Note [xnnpack quantized values]: held as the float each quantized element stands for.
        e->storage_[id].reset(new (std::nothrow) float[static_cast<size_t>(std::max<int64_t>(v.numel, 1))]);
        if (!e->storage_[id])
          return fail(Error::MemoryAllocationFailed, "XNNPACK value ", id, ": cannot allocate ", v.numel, " floats");
        if (!v.constant.empty())
          quant::dequantize_constant(v.datatype, v.quant, v.dims, v.numel, v.constant.data(), e->storage_[id].get());
        e->ptr_[id] = e->storage_[id].get();
      } else if (!v.constant.empty() && reinterpret_cast<uintptr_t>(v.constant.data()) % alignof(float) == 0) {
        // Read in place from the program's (mapped) bytes: no node writes a constant.
        e->ptr_[id] = const_cast<float*>(reinterpret_cast<const float*>(v.constant.data()));
      } else if (!v.constant.empty()) {
        // Copied once only when misaligned: named data may sit at any byte offset, the kernels read aligned floats.
        e->storage_[id].reset(new (std::nothrow) float[static_cast<size_t>(std::max<int64_t>(v.numel, 1))]);
        if (!e->storage_[id])
          return fail(Error::MemoryAllocationFailed, "XNNPACK value ", id, ": cannot allocate ", v.numel, " floats");
        std::memcpy(e->storage_[id].get(), v.constant.data(), v.constant.size());
        e->ptr_[id] = e->storage_[id].get();
      } else if (plan.offset[id] >= 0) {
        e->ptr_[id] = e->arena_.get() + plan.offset[id];
      }
    }
    for (const Value& v : g.values) e->planned_shapes_.push_back(ValueShape::of(v.dims));
    e->shapes_ = e->planned_shapes_;
    e->g_ = std::move(g);
    return e;
  }

  Status execute(std::span<EValue* const> args) {
    std::lock_guard<std::mutex> lock(mu_);  // the bound external pointers are per call
    if (args.size() != g_.num_externs)
      return fail(Error::InvalidArgument, "XnnpackBackend: ", args.size(), " arguments, the graph has ",
                  g_.num_externs, " external values");
    staged_outputs_.clear();
    // Inputs first: their shapes this call decide every other shape (shape_inference.h).
    bool dynamic = false;
    for (size_t id = 0; id < g_.values.size(); ++id) {
      const Value& v = g_.values[id];
      if (!v.present || !(v.flags & kValueExternalInput)) continue;
      ETRT_TRY(Tensor* tp, external_arg(args, v));
      const Tensor& t = *tp;
      if (t.numel() == v.numel) {
        shapes_[id] = planned_shapes_[id];  // the planned size (a 0-d tensor is [1] in the payload)
      } else if (static_cast<size_t>(t.dim()) != v.dims.size() || t.numel() > v.numel) {
        return fail(Error::InvalidArgument, "XnnpackBackend: argument ", v.external_id, " is ", t.describe(),
                    ", the graph takes at most ", shape_str(v.dims));
      } else {
        shapes_[id] = ValueShape::of(t.sizes());
      }
      dynamic = dynamic || !(shapes_[id] == planned_shapes_[id]);
      if (t.dtype() == ScalarType::Float) {
        ptr_[id] = static_cast<float*>(t.data());
      } else {  // Note [xnnpack quantized values]: staged as floats
        quant::dequantize_external(v.datatype, v.quant, t.data(), ptr_[id], t.numel());
      }
    }
    if (dynamic) {
      for (const Node& n : g_.nodes) {
        ETRT_TRY(const ValueShape o, detail::infer_output(g_, n, shapes_));
        if (o.rank != planned_shapes_[n.output].rank || o.numel() > g_.values[n.output].numel)
          return fail(Error::InvalidArgument, n.where(), ": output shape ", shape_str(o.sizes()),
                      " exceeds the planned ", shape_str(g_.values[n.output].dims));
        shapes_[n.output] = o;
        if (n.index_output != kNoValue) shapes_[n.index_output] = o;
      }
      shapes_dynamic_ = true;
    } else if (shapes_dynamic_) {
      shapes_ = planned_shapes_;
      shapes_dynamic_ = false;
    }
    for (size_t id = 0; id < g_.values.size(); ++id) {
      const Value& v = g_.values[id];
      if (!v.present || (v.flags & kExternal) != kValueExternalOutput) continue;
      ETRT_TRY(Tensor* tp, external_arg(args, v));
      Tensor& t = *tp;
      if (static_cast<uint32_t>(t.dim()) == shapes_[id].rank) {
        if (Status st = t.resize(shapes_[id].sizes()); !st)
          return fail(Error::InvalidArgument, "XnnpackBackend: output argument ", v.external_id, ": ", st.error().what);
      } else if (t.numel() != shapes_[id].numel()) {  // a 0-d output is [1] in the payload
        return fail(Error::InvalidArgument, "XnnpackBackend: output argument ", v.external_id, " is ", t.describe(),
                    ", the graph writes ", shape_str(shapes_[id].sizes()));
      }
      if (t.numel() > 0 && !t.data())
        return fail(Error::InvalidArgument, "XnnpackBackend: argument ", v.external_id, " has no data");
      if (t.dtype() == ScalarType::Float) ptr_[id] = static_cast<float*>(t.data());
      else staged_outputs_.push_back({static_cast<uint32_t>(id), t.data(), t.dtype()});
    }
    KernelContext ctx;
    for (const Node& n : g_.nodes) {
      Status s = run_node(ctx, n);
      if (!s) return fail(s.error().code, n.where(), ": ", s.error().what);
      if (n.has_min_max && (n.out_min > -std::numeric_limits<float>::infinity() ||
                            n.out_max < std::numeric_limits<float>::infinity())) {
        ETRT_TRY(Tensor o, flat(n.output));
        ETRT_CHECK_OK(kernels::clamp_out<F>(ctx, o, std::optional<Scalar>(detail::fscalar(n.out_min)),
                                            std::optional<Scalar>(detail::fscalar(n.out_max)), o));
      }
      requantize_output(n);
    }
    for (const StagedOutput& s : staged_outputs_) {
      const Value& v = g_.values[s.id];
      const int64_t count = shapes_[s.id].numel();
      if (v.datatype == Datatype::Int32) {  // indices, held as exact small floats
        for (int64_t i = 0; i < count; ++i) {
          if (s.dtype == ScalarType::Long) static_cast<int64_t*>(s.data)[i] = static_cast<int64_t>(ptr_[s.id][i]);
          else static_cast<int32_t*>(s.data)[i] = static_cast<int32_t>(ptr_[s.id][i]);
        }
      } else {
        quant::quantize_external(v.datatype, v.quant, ptr_[s.id], s.data, count);
      }
    }
    return {};
  }

  const Graph& graph() const { return g_; }

 private:
  using F = types<float>;
  static constexpr uint32_t kExternal = kValueExternalInput | kValueExternalOutput;
  Executor() = default;

  /// Note [xnnpack quantized values]: a node's quantized output is rounded onto its grid where it is written.
  /// Rows of a quantized weight dequantized at a time (about 64 KB of floats).
  static int64_t weight_block_rows(int64_t k) { return std::clamp<int64_t>(16384 / std::max<int64_t>(k, 1), 8, 256); }

  /// The quantized weights that only fully-connected nodes read, as their (untransposed, 2-D) filter: these stay
  /// quantized in memory and are dequantized a block of rows at a time (quantized_linear), so a 4-bit LLM's weights
  /// take their file size, not eight times it.
  static std::vector<bool> weights_read_in_blocks(const Graph& g) {
    std::vector<bool> keep(g.values.size(), false);
    for (size_t id = 0; id < g.values.size(); ++id) {
      const Value& v = g.values[id];
      keep[id] = v.present && !v.constant.empty() && v.dims.size() == 2 &&
                 (v.datatype == Datatype::QCInt8 || v.datatype == Datatype::QCInt4 || v.datatype == Datatype::QBInt4);
    }
    for (const Node& n : g.nodes)
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        const uint32_t id = n.inputs[k];
        if (id == kNoValue || !keep[id]) continue;
        if (n.kind != NodeKind::FullyConnected || k != 1 || (n.flags & kFlagTransposeWeights)) keep[id] = false;
      }
    return keep;
  }

  /// out[M, N] = x[M, K] . dequantize(w[N, K])^T + bias, a block of weight rows at a time through scratch.
  Status quantized_linear(const Node& n) {
    const Value& w = g_.values[n.inputs[1]];
    const int64_t rows_total = w.dims[0], k = w.dims[1];
    const ValueShape& xs = shapes_[n.inputs[0]];
    if (xs.rank == 0 || xs.d[xs.rank - 1] != k)
      return fail(Error::InvalidProgram, "input ", shape_str(xs.sizes()), " does not end in the filter's ", k,
                  " input channels");
    const int64_t m = xs.numel() / std::max<int64_t>(k, 1);
    if (shapes_[n.output].numel() != m * rows_total)
      return fail(Error::InvalidProgram, "output ", shape_str(shapes_[n.output].sizes()), " is not ", m, " x ",
                  rows_total);
    const float* x = ptr_[n.inputs[0]];
    float* out = ptr_[n.output];
    const float* bias = n.inputs[2] != kNoValue ? ptr_[n.inputs[2]] : nullptr;
    const int64_t block = weight_block_rows(k);
    float* wbuf = scratch_.get();  // block x k floats: sized at init
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

  /// The DelegateCall argument bound to external value `v`, checked against the value's datatype.
  Result<Tensor*> external_arg(std::span<EValue* const> args, const Value& v) const {
    EValue* a = args[v.external_id];  // external_id < num_externs: checked by parse_payload
    if (!a || !a->is_tensor())
      return fail(Error::InvalidArgument, "XnnpackBackend: argument ", v.external_id, " is not a tensor");
    ETRT_TRY(Tensor* t, a->to_tensor("XnnpackBackend argument"));
    const ScalarType want = v.datatype == Datatype::QInt8    ? ScalarType::Char
                            : v.datatype == Datatype::QUInt8 ? ScalarType::Byte
                            : v.datatype == Datatype::Int32  ? ScalarType::Int
                                                             : ScalarType::Float;
    // int32 indices may also be delivered into int64 (the program's tensor for argmax positions may be Long).
    const bool index_as_long = v.datatype == Datatype::Int32 && t->dtype() == ScalarType::Long;
    if (t->dtype() != want && !index_as_long)
      return fail(Error::InvalidArgument, "XnnpackBackend: argument ", v.external_id, " is ", t->describe(),
                  ", the graph expects ", name(want), shape_str(v.dims));
    if (t->numel() > 0 && !t->data() && (v.flags & kValueExternalInput))
      return fail(Error::InvalidArgument, "XnnpackBackend: argument ", v.external_id, " has no data");
    return t;
  }

  void requantize_output(const Node& n) {
    const Value& v = g_.values[n.output];
    const ValueShape& shape = shapes_[n.output];
    float* x = ptr_[n.output];
    switch (v.quant.kind) {
      case QuantKind::PerTensor:
        quant::fake_quantize(x, shape.numel(), v.quant.scale, v.quant.zero_point, qrange(v.datatype));
        break;
      case QuantKind::DynamicPerToken: {
        int64_t row = 1;  // the trailing num_nonbatch_dims share one set of parameters
        for (uint32_t k = shape.rank - static_cast<uint32_t>(v.quant.num_nonbatch_dims); k < shape.rank; ++k)
          row *= shape.d[k];
        quant::fake_quantize_dynamic(x, shape.numel(), row);
        break;
      }
      default:
        break;  // per-channel values are constants (parse_value)
    }
  }

  Result<Tensor> flat(uint32_t id) const {
    return Tensor::make(ScalarType::Float, shapes_[id].sizes(), {}, ptr_[id]);
  }
  /// An NHWC buffer as the NCHW tensor the kernels expect (channels-last dim_order).
  Result<Tensor> nchw(uint32_t id) const {
    const auto& d = shapes_[id].d;  // 4-D: check_node
    const std::array<int64_t, 4> sizes{d[0], d[3], d[1], d[2]};
    static constexpr std::array<uint8_t, 4> kChannelsLast{0, 2, 3, 1};
    return Tensor::make(ScalarType::Float, sizes, kChannelsLast, ptr_[id]);
  }
  /// The filter as torch's weight: OHWI -> [O, I, KH, KW]; depthwise [1, KH, KW, O] -> [O, 1, KH, KW];
  /// transposed OHWI (groups 1) -> torch's transposed [I, O, KH, KW].
  Result<Tensor> conv_weight(const Node& n) const {
    const auto& d = g_.values[n.inputs[1]].dims;
    const void* p = ptr_[n.inputs[1]];
    if (n.kind == NodeKind::DepthwiseConv2d) {
      const std::array<int64_t, 4> sizes{d[3], d[0], d[1], d[2]};
      static constexpr std::array<uint8_t, 4> order{1, 2, 3, 0};
      return Tensor::make(ScalarType::Float, sizes, order, const_cast<void*>(p));
    }
    if (n.kind == NodeKind::ConvTranspose2d) {
      const std::array<int64_t, 4> sizes{d[3], d[0], d[1], d[2]};
      static constexpr std::array<uint8_t, 4> order{1, 2, 3, 0};
      return Tensor::make(ScalarType::Float, sizes, order, const_cast<void*>(p));
    }
    const std::array<int64_t, 4> sizes{d[0], d[3], d[1], d[2]};
    static constexpr std::array<uint8_t, 4> order{0, 2, 3, 1};
    return Tensor::make(ScalarType::Float, sizes, order, const_cast<void*>(p));
  }

  /// The input of a convolution or pooling node as an NCHW view. The excess of asymmetric padding is applied here,
  /// into the scratch buffer, with `value`; `pad` receives the symmetric padding left for the kernel
  /// (Note [xnnpack scratch]).
  Result<Tensor> spatial_input(KernelContext& ctx, const Node& n, float value, std::array<int64_t, 2>& pad) const {
    const detail::SpatialPad p = detail::split_padding(n);
    pad = p.symmetric;
    if (!p.explicit_pad()) return nchw(n.inputs[0]);
    const auto& d = shapes_[n.inputs[0]].d;  // NHWC, 4-D: check_node
    const std::array<int64_t, 4> padded{d[0], d[1] + p.top + p.bottom, d[2] + p.left + p.right, d[3]};
    float* buf = scratch_.get();  // sized at init for this node
    ETRT_TRY(Tensor x, flat(n.inputs[0]));
    ETRT_TRY(Tensor px, Tensor::make(ScalarType::Float, padded, {}, buf));
    const std::array<int64_t, 6> pads{0, 0, p.left, p.right, p.top, p.bottom};  // (C, W, H) pairs, last dim first
    ETRT_CHECK_OK(kernels::constant_pad_nd_out<F>(ctx, x, pads, detail::fscalar(value), px));
    const std::array<int64_t, 4> sizes{padded[0], padded[3], padded[1], padded[2]};
    static constexpr std::array<uint8_t, 4> kChannelsLast{0, 2, 3, 1};
    return Tensor::make(ScalarType::Float, sizes, kChannelsLast, buf);
  }

  Status copy(const Node& n) {
    // Equal element counts: check_node.
    const size_t bytes = static_cast<size_t>(shapes_[n.output].numel()) * sizeof(float);
    if (bytes) std::memmove(ptr_[n.output], ptr_[n.inputs[0]], bytes);
    return {};
  }

  Status run_node(KernelContext& ctx, const Node& n) {
    namespace k = kernels;
    using K = NodeKind;
    switch (n.kind) {
      case K::Add: case K::Subtract: case K::Multiply: case K::Div: case K::Minimum: case K::Maximum: {
        ETRT_TRY(Tensor a, flat(n.inputs[0]));
        ETRT_TRY(Tensor b, flat(n.inputs[1]));
        ETRT_TRY(Tensor o, flat(n.output));
        switch (n.kind) {
          case K::Add: return k::add_out<F>(ctx, a, b, detail::iscalar(1), o);
          case K::Subtract: return k::sub_out<F>(ctx, a, b, detail::iscalar(1), o);
          case K::Multiply: return k::mul_out<F>(ctx, a, b, o);
          case K::Div: return k::div_out<F>(ctx, a, b, o);
          case K::Minimum: return k::minimum_out<F>(ctx, a, b, o);
          default: return k::maximum_out<F>(ctx, a, b, o);
        }
      }
      case K::PReLU: {
        // prelu(x, w) = max(x, 0) + w * min(x, 0), composed from the binary kernels (w broadcasts on channels,
        // the last NHWC dim).
        ETRT_TRY(Tensor x, flat(n.inputs[0]));
        ETRT_TRY(Tensor w, flat(n.inputs[1]));
        ETRT_TRY(Tensor o, flat(n.output));
        float zero = 0.f;
        ETRT_TRY(Tensor z, Tensor::make(ScalarType::Float, {}, {}, &zero));
        ETRT_TRY(Tensor tn, Tensor::make(ScalarType::Float, x.sizes(), {}, scratch_.get()));
        ETRT_CHECK_OK(k::minimum_out<F>(ctx, x, z, tn));
        ETRT_CHECK_OK(k::mul_out<F>(ctx, tn, w, tn));
        ETRT_CHECK_OK(k::maximum_out<F>(ctx, x, z, o));
        return k::add_out<F>(ctx, o, tn, detail::iscalar(1), o);
      }
      case K::Softmax: case K::Sigmoid: case K::Tanh: case K::Hardswish: case K::Gelu: case K::Abs: case K::Negate:
      case K::SquareRoot: case K::ReciprocalSquareRoot: case K::Exp: case K::Log: case K::Floor: case K::Ceiling:
      case K::Sin: case K::Cos: case K::Square: case K::LeakyReLU: case K::ELU: {
        ETRT_TRY(Tensor x, flat(n.inputs[0]));
        ETRT_TRY(Tensor o, flat(n.output));
        switch (n.kind) {
          case K::Softmax: return k::softmax_out<F>(ctx, x, std::max<int64_t>(x.dim() - 1, 0), false, o);
          case K::Sigmoid: return k::sigmoid_out<F>(ctx, x, o);
          case K::Tanh: return k::tanh_out<F>(ctx, x, o);
          case K::Hardswish: return k::hardswish_out<F>(ctx, x, o);
          case K::Gelu: return k::gelu_out<F>(ctx, x, "none", o);
          case K::Abs: return k::abs_out<F>(ctx, x, o);
          case K::Negate: return k::neg_out<F>(ctx, x, o);
          case K::SquareRoot: return k::sqrt_out<F>(ctx, x, o);
          case K::ReciprocalSquareRoot: return k::rsqrt_out<F>(ctx, x, o);
          case K::Exp: return k::exp_out<F>(ctx, x, o);
          case K::Log: return k::log_out<F>(ctx, x, o);
          case K::Floor: return k::floor_out<F>(ctx, x, o);
          case K::Ceiling: return k::ceil_out<F>(ctx, x, o);
          case K::Sin: return k::sin_out<F>(ctx, x, o);
          case K::Cos: return k::cos_out<F>(ctx, x, o);
          case K::Square: return k::mul_out<F>(ctx, x, x, o);
          case K::LeakyReLU: return k::leaky_relu_out<F>(ctx, x, detail::fscalar(n.fparam), o);
          default:
            return k::elu_out<F>(ctx, x, detail::fscalar(n.fparam), detail::fscalar(1.0), detail::fscalar(1.0), o);
        }
      }
      case K::Clamp: case K::Convert: case K::Copy: case K::StaticReshape:
        return copy(n);  // Clamp's bounds are its output_min_max, applied by execute
      case K::FullyConnected: {
        if (stays_quantized_[n.inputs[1]]) return quantized_linear(n);
        ETRT_TRY(Tensor x, flat(n.inputs[0]));
        ETRT_TRY(Tensor o, flat(n.output));
        const auto& wd = g_.values[n.inputs[1]].dims;
        if (wd.size() != 2) return fail(Error::InvalidProgram, "filter must be 2-D, got ", shape_str(wd));
        Tensor w;
        if (n.flags & kFlagTransposeWeights) {
          // [K, N] in memory: torch's [N, K] weight with a transposed dim_order.
          const std::array<int64_t, 2> sizes{wd[1], wd[0]};
          static constexpr std::array<uint8_t, 2> order{1, 0};
          ETRT_TRY(w, Tensor::make(ScalarType::Float, sizes, order, ptr_[n.inputs[1]]));
        } else {
          ETRT_TRY(w, flat(n.inputs[1]));
        }
        std::optional<Tensor> bias;
        if (n.inputs[2] != kNoValue) {
          ETRT_TRY(Tensor b, flat(n.inputs[2]));
          bias = b;
        }
        return k::linear_out<F>(ctx, x, w, bias ? &*bias : nullptr, o);
      }
      case K::Conv2d: case K::DepthwiseConv2d: case K::ConvTranspose2d: {
        std::array<int64_t, 2> pad{};
        ETRT_TRY(Tensor x, spatial_input(ctx, n, 0.f, pad));
        ETRT_TRY(Tensor o, nchw(n.output));
        ETRT_TRY(Tensor w, conv_weight(n));
        std::optional<Tensor> bias;
        if (n.inputs[2] != kNoValue) {
          ETRT_TRY(Tensor b, flat(n.inputs[2]));
          bias = b;
        }
        const std::array<int64_t, 2> stride{n.conv[6], n.conv[7]};
        const std::array<int64_t, 2> dil{std::max<uint32_t>(n.conv[8], 1), std::max<uint32_t>(n.conv[9], 1)};
        const std::array<int64_t, 2> adj{n.conv[13], n.conv[14]};
        const bool transposed = n.kind == K::ConvTranspose2d;
        return k::convolution_out<F>(ctx, x, w, bias ? &*bias : nullptr, stride, pad, dil, transposed,
                                     transposed ? std::span<const int64_t>(adj) : std::span<const int64_t>(),
                                     n.conv[12], o);
      }
      case K::MaxPooling2d: case K::AvgPooling2d: {
        std::array<int64_t, 2> pad{};
        ETRT_TRY(Tensor x, spatial_input(ctx, n, -std::numeric_limits<float>::infinity(), pad));
        ETRT_TRY(Tensor o, nchw(n.output));
        const std::array<int64_t, 2> ks{n.conv[4], n.conv[5]}, stride{n.conv[6], n.conv[7]};
        if (n.kind == K::AvgPooling2d)
          return k::avg_pool2d_out<F>(ctx, x, ks, stride, pad, false, false, std::nullopt, o);
        const std::array<int64_t, 2> dil{std::max<uint32_t>(n.conv[8], 1), std::max<uint32_t>(n.conv[9], 1)};
        // The indices follow the padded input in scratch (Note [xnnpack scratch]).
        const detail::SpatialPad sp = detail::split_padding(n);
        uint64_t at = 0;
        if (sp.explicit_pad()) {
          const auto& d = shapes_[n.inputs[0]].d;
          at = static_cast<uint64_t>(d[0] * (d[1] + sp.top + sp.bottom) * (d[2] + sp.left + sp.right) * d[3]);
        }
        at = (at + 1) / 2 * 2;
        ETRT_TRY(Tensor it, Tensor::make(ScalarType::Long, o.sizes(), {}, scratch_.get() + at));
        return k::max_pool2d_with_indices_out<F>(ctx, x, ks, stride, pad, dil, false, o, it);
      }
      case K::GlobalAvgPooling2d: {
        ETRT_TRY(Tensor x, flat(n.inputs[0]));
        ETRT_TRY(Tensor o, flat(n.output));
        const std::array<int64_t, 2> hw{1, 2};  // NHWC
        return k::mean_out<F>(ctx, x, std::span<const int64_t>(hw), true, std::nullopt, o);
      }
      case K::StaticResizeBilinear2D: {
        ETRT_TRY(Tensor x, nchw(n.inputs[0]));
        ETRT_TRY(Tensor o, nchw(n.output));
        const std::array<int64_t, 2> size{n.conv[0], n.conv[1]};
        return k::upsample_bilinear2d_vec_out<F>(ctx, x, std::span<const int64_t>(size),
                                                 (n.flags & kFlagAlignCorners) != 0, std::nullopt, o);
      }
      case K::StaticTranspose: {
        ETRT_TRY(Tensor x, flat(n.inputs[0]));
        ETRT_TRY(Tensor o, flat(n.output));
        return k::permute_copy_out<F>(ctx, x, n.ints, o);
      }
      case K::StaticConstantPad: {
        ETRT_TRY(Tensor x, flat(n.inputs[0]));
        ETRT_TRY(Tensor o, flat(n.output));
        // constant_pad_nd lists (before, after) pairs from the last dim backwards.
        const size_t r = x.dim();
        std::vector<int64_t> pad;
        for (size_t d = r; d-- > 0;) pad.insert(pad.end(), {n.ints[d], n.ints[r + d]});
        return k::constant_pad_nd_out<F>(ctx, x, pad, detail::fscalar(n.fparam), o);
      }
      case K::Concatenate2: case K::Concatenate3: case K::Concatenate4: case K::Concatenate5: {
        std::vector<Tensor> ts;
        for (uint32_t id : n.inputs) {
          ETRT_TRY(Tensor t, flat(id));
          ts.push_back(t);
        }
        std::vector<Tensor*> ptrs;
        for (Tensor& t : ts) ptrs.push_back(&t);
        ETRT_TRY(Tensor o, flat(n.output));
        return k::cat_out<F>(ctx, ptrs, n.axis, o);
      }
      case K::StaticSlice: {
        // One slice_copy per sliced dim, through temporaries (the exporter slices one dim per node in practice).
        ETRT_TRY(Tensor cur, flat(n.inputs[0]));
        const size_t r = cur.dim();
        std::vector<int64_t> sizes(cur.sizes().begin(), cur.sizes().end());
        std::vector<size_t> sliced;
        float* tmp[2] = {scratch_.get(), scratch_.get() ? scratch_.get() + g_.values[n.inputs[0]].numel : nullptr};
        for (size_t d = 0; d < r; ++d) {
          const int64_t size = n.ints[r + d] == 0 ? sizes[d] - n.ints[d] : n.ints[r + d];
          if (n.ints[d] != 0 || size != sizes[d]) sliced.push_back(d);
        }
        if (sliced.empty()) return copy(n);
        for (size_t j = 0; j < sliced.size(); ++j) {
          const size_t d = sliced[j];
          const int64_t off = n.ints[d], size = n.ints[r + d] == 0 ? sizes[d] - off : n.ints[r + d];
          sizes[d] = size;
          Tensor next;
          if (j + 1 == sliced.size()) {
            ETRT_TRY(next, flat(n.output));
          } else {
            ETRT_TRY(next, Tensor::make(ScalarType::Float, sizes, {}, tmp[j % 2]));  // each fits: sizes only shrink
          }
          ETRT_CHECK_OK(k::slice_copy_tensor_out<F>(ctx, cur, static_cast<int64_t>(d), off, off + size, 1, next));
          cur = next;
        }
        return {};
      }
      case K::BatchMatrixMultiply: {
        // Leading dims folded into one batch (equal on both sides: check_node).
        const auto ad = shapes_[n.inputs[0]].sizes();
        const auto bd = shapes_[n.inputs[1]].sizes();
        const auto od = shapes_[n.output].sizes();
        const int64_t batch = detail::product(std::span<const int64_t>(ad).first(ad.size() - 2));
        if (batch < 0) return fail(Error::InvalidProgram, "batch of ", shape_str(ad), " overflows");
        const std::array<int64_t, 3> as{batch, ad[ad.size() - 2], ad.back()}, bs{batch, bd[bd.size() - 2], bd.back()};
        if (od.size() < 2) return fail(Error::InvalidProgram, "output must be at least 2-D");
        const std::array<int64_t, 3> os{batch, od[od.size() - 2], od.back()};
        if (detail::product(os) != shapes_[n.output].numel())
          return fail(Error::InvalidProgram, "output ", shape_str(od), " does not match the batch of ", shape_str(ad));
        ETRT_TRY(Tensor a, Tensor::make(ScalarType::Float, as, {}, ptr_[n.inputs[0]]));
        ETRT_TRY(Tensor b, Tensor::make(ScalarType::Float, bs, {}, ptr_[n.inputs[1]]));
        ETRT_TRY(Tensor o, Tensor::make(ScalarType::Float, os, {}, ptr_[n.output]));
        return k::bmm_out<F>(ctx, a, b, o);
      }
      case K::ArgMaxPooling2d:
        return argmax_pooling_2d(n, ptr_[n.inputs[0]], shapes_[n.inputs[0]], ptr_[n.output], ptr_[n.index_output],
                                 shapes_[n.output]);
      case K::ScaledDotProductAttention: {
        const auto& in = n.inputs;
        const SdpaOperands a{ptr_[in[0]], ptr_[in[1]], ptr_[in[2]], ptr_[in[3]], ptr_[in[4]], ptr_[n.output],
                             shapes_[in[0]], shapes_[in[1]], shapes_[in[2]], shapes_[in[3]], shapes_[in[4]],
                             shapes_[n.output]};
        return scaled_dot_product_attention(n, a, scratch_.get());  // scratch: key's numel >= U (graph_checks.h)
      }
    }
    return fail(Error::NotSupported, "node kind is not supported");
  }

  Graph g_;
  std::vector<std::unique_ptr<float[]>> storage_;  // constants, by value id
  std::unique_ptr<float[]> arena_;                  // intermediates, placed by plan_intermediates
  std::unique_ptr<float[]> scratch_;                // node temporaries (Note [xnnpack scratch])
  std::vector<float*> ptr_;
  std::vector<ValueShape> planned_shapes_, shapes_;  // the payload's dims; this call's (shape_inference.h)
  bool shapes_dynamic_ = false;                      // shapes_ differs from planned_shapes_
  std::vector<bool> stays_quantized_;                // weights_read_in_blocks
  // Outputs written through a float staging buffer (quantized or int32 values): the caller's buffer, this call.
  struct StagedOutput {
    uint32_t id;
    void* data;
    ScalarType dtype;
  };
  std::vector<StagedOutput> staged_outputs_;
  std::mutex mu_;
};

}  // namespace etrt::xnnpack
