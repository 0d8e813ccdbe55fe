// Runs a parsed XNNPACK Graph with the portable kernels (no XNNPACK library): binds the external values each call,
// derives this call's shapes when the inputs are smaller than planned, runs each node through its kind's entry in
// the node kinds' table (node_table.h), applies the node's output clamp (unless its packed kernel did) and rounds
// quantized outputs onto their grid.
//
// Memory: constants are read in place from the program's bytes (copied once only if misaligned);
// intermediates share one liveness-planned arena; external values (the DelegateCall's args) are bound per call.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>  // uintptr_t: constant alignment
#include <cstdlib>  // getenv: ETRT_BYTE_ACTIVATIONS
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <new>  // std::nothrow
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "etrt/backends/xnnpack/byte_values.h"
#include "etrt/backends/xnnpack/clamp_fusion.h"
#include "etrt/backends/xnnpack/fast_elementwise.h"
#include "etrt/backends/xnnpack/graph.h"
#include "etrt/backends/xnnpack/intermediate_plan.h"
#include "etrt/backends/xnnpack/node_table.h"
#include "etrt/backends/xnnpack/quantization.h"
#include "etrt/backends/xnnpack/quantized_gemv.h"
#include "etrt/backends/xnnpack/shape_inference.h"
#include "etrt/core/aligned_buffer.h"
#include "etrt/core/evalue.h"
#include "etrt/kernels/kernel.h"
#include "etrt/kernels/float_kernels.h"  // clamp_out: a node's output_min_max
#include "etrt/kernels/util/parallel.h"
#include "etrt/kernels/util/sigmoid.h"
#include "etrt/kernels/util/vec.h"
#ifdef ETRT_NODE_PROFILE
#include "etrt/backends/xnnpack/node_profile.h"  // a developer's build only (bench/node_profile.py)
#endif

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
    e->kinds_.reserve(g.nodes.size());
    for (const Node& n : g.nodes) {
      const NodeKind* kind = node_kind(n.kind);  // parse_payload accepted only codes in the table
      if (!kind) return fail(Error::InvalidProgram, n.where(), ": unknown node kind ", int(n.kind));
      if (n.index != e->kinds_.size())  // NodeRun::prepared is indexed by Node::index
        return fail(Error::InvalidProgram, n.where(), ": node out of order");
      if (kind->check) ETRT_CHECK_OK(kind->check(g, n));
      ETRT_CHECK_OK(checks::common(g, n));
      e->kinds_.push_back(kind);
    }
    const std::vector<bool> folded = fold_clamps(g);  // Note [xnnpack clamp fusion]
    const std::vector<Fusion> fusable = e->fusable_readers(g);
    const std::vector<SiluFusion> silus = e->silu_fusions(g);
    std::vector<std::pair<uint32_t, size_t>> written_early;
    for (const Fusion& f : fusable) written_early.emplace_back(g.nodes[f.reader].output, f.writer);
    // Note [xnnpack silu]: x * sigmoid(x) overwrites x, which only the Sigmoid and the Multiply read, so the writer
    // stores one tensor, not two (an unfused pair multiplies element by element in place).
    std::vector<std::pair<uint32_t, uint32_t>> in_place;
    for (const SiluFusion& f : silus) {
      written_early.emplace_back(g.nodes[f.multiply].output, f.writer);
      if (float_intermediate(g, g.nodes[f.multiply].output))
        in_place.emplace_back(g.nodes[f.multiply].output, g.nodes[f.sigmoid].inputs[0]);
    }
    // Note [xnnpack reshape alias]: a StaticReshape or Copy between float intermediates, unclamped, leaves the bytes
    // as they are, so its output takes its input's bytes instead of a copy of them (a vit_b_32 forward copied 36
    // such tensors). After the SiLU pairs: a source one of them overwrites is lent already, and keeps its copy.
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const Node& n = g.nodes[i];
      if (!e->passes_bytes_through(n) || !float_intermediate(g, n.inputs[0]) || !float_intermediate(g, n.output))
        continue;
      in_place.emplace_back(n.output, n.inputs[0]);
    }
    // Note [xnnpack borrowed input]: a StaticReshape or Copy reading a float graph input likewise leaves its bytes
    // as they are; its output is the caller's tensor itself, bound at each call (vit_b_32's attention delegates
    // begin with such reshapes, 72 copies a forward). It is read only: no node writes over a value it reads
    // except a fused SiLU over its writer's output (`in_place`), which a reshape's output never is; the check
    // stands in case a later fusion makes one. It takes no place in the arena, and no pointer to it is taken at
    // load (a gated filter's x, whose bytes the Multiply's output takes there, is never one).
    e->borrowed_ = e->borrowed_inputs(g, in_place);
    e->chains_ = e->silu_chains(g);
    e->add_elementwise_chains(g, e->chains_);
    for (const ActivationChain& c : e->chains_) written_early.emplace_back(c.out, c.head);
    // Note [pointwise then depthwise]: the depthwise node's output is written from the pointwise node on, while that
    // node's input is still read.
    const std::vector<BandPair> bands = e->band_pairs(g, silus);
    for (const BandPair& b : bands) written_early.emplace_back(g.nodes[b.depthwise].output, b.pointwise);
    const std::vector<GatedFilter> gates = e->gated_filters(g);  // Note [xnnpack gated filter]
    std::vector<std::pair<uint32_t, size_t>> read_late;
    for (const GatedFilter& f : gates) read_late.emplace_back(f.x, f.conv);
    std::vector<uint32_t> borrowed_values;
    for (const auto& [value, input] : e->borrowed_) borrowed_values.push_back(value);
    ETRT_TRY(const IntermediatePlan plan,
             plan_intermediates(g, written_early, in_place, read_late, borrowed_values));
    uint64_t scratch = 0;  // Note [xnnpack scratch]
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (!e->kinds_[i]->scratch) continue;
      ETRT_TRY(const uint64_t need, e->kinds_[i]->scratch(g, g.nodes[i]));
      scratch = std::max(scratch, need);
    }
    e->stays_quantized_ = weights_read_in_blocks(g, e->kinds_);
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const Node& n = g.nodes[i];
      if (e->kinds_[i]->reads_weights_in_blocks && e->stays_quantized_[n.inputs[1]]) {
        const int64_t k = g.values[n.inputs[1]].dims[1];
        const int64_t rows = std::max(detail::weight_block_rows(k), quant::kGemvMaxRows);  // quantized_linear's buffer
        scratch = std::max<uint64_t>(scratch, static_cast<uint64_t>(rows * k));
        const int64_t m = g.values[n.inputs[0]].numel / std::max<int64_t>(k, 1);  // the integer path's packed rows
        scratch = std::max<uint64_t>(scratch, (quant::qd8_rows_bytes(m, k) + sizeof(float) - 1) / sizeof(float));
      }
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
    e->arena_ = make_aligned_array<float>(static_cast<size_t>(plan.arena_floats));
    if (!e->arena_) return fail(Error::MemoryAllocationFailed, "XNNPACK graph: cannot allocate ", total_bytes, " bytes");
    if (scratch > 0) {
      e->scratch_ = make_aligned_array<float>(static_cast<size_t>(scratch));
      if (!e->scratch_)
        return fail(Error::MemoryAllocationFailed, "XNNPACK graph: cannot allocate ", scratch * sizeof(float),
                    " bytes of scratch");
    }
    for (size_t id = 0; id < g.values.size(); ++id) {
      const Value& v = g.values[id];
      if (!v.present || e->stays_quantized_[id]) continue;
      if (v.datatype != Datatype::Fp32 && (!v.constant.empty() || (v.flags & kExternal))) {
        // Note [xnnpack quantized values]: held as the float each quantized element stands for.
        e->storage_[id] = make_aligned_array<float>(static_cast<size_t>(v.numel));
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
        e->storage_[id] = make_aligned_array<float>(static_cast<size_t>(v.numel));
        if (!e->storage_[id])
          return fail(Error::MemoryAllocationFailed, "XNNPACK value ", id, ": cannot allocate ", v.numel, " floats");
        std::memcpy(e->storage_[id].get(), v.constant.data(), v.constant.size());
        e->ptr_[id] = e->storage_[id].get();
      } else if (plan.offset[id] >= 0) {
        e->ptr_[id] = e->arena_.get() + plan.offset[id];
      }
    }
    // Note [xnnpack packed filters]: once the constants are in place.
    uint64_t budget = limit - total_bytes;
    e->prepared_.resize(g.nodes.size());
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (!e->kinds_[i]->prepare) continue;
      ETRT_TRY(e->prepared_[i], e->kinds_[i]->prepare(g, g.nodes[i], e->ptr_, budget));
    }
    e->fused_.assign(folded.begin(), folded.end());
    std::vector<bool> in_writer(g.nodes.size(), false);  // Note [xnnpack block finish]'s readers
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (!e->prepared_[i].packed_path) continue;
      BlockFinish& f = e->prepared_[i].finish;
      const uint32_t v = g.nodes[i].output;
      if (g.values[v].quant.kind == QuantKind::PerTensor) {
        f.round = true;
        f.grid = grid_of(g.values[v]);
      }
      const auto fusion = std::ranges::find(fusable, i, &Fusion::writer);
      if (fusion == fusable.end()) continue;
      const Node& next = g.nodes[fusion->reader];
      f.next = true;
      f.next_grid = grid_of(g.values[next.output]);
      if (next.has_min_max) {
        f.lo = next.out_min;
        f.hi = next.out_max;
      }
      f.ptr = &e->ptr_;
      f.src = v;
      f.dst = next.output;
      e->fused_[next.index] = in_writer[next.index] = true;
    }
    for (const SiluFusion& s : silus) {  // Note [xnnpack silu]
      PreparedNode& p = e->prepared_[s.writer];
      if (!p.packed_path || p.int8.active() || p.finish.any()) continue;
      const Node& mul = g.nodes[s.multiply];
      p.finish.silu = true;
      if (mul.has_min_max) {
        p.finish.lo = mul.out_min;
        p.finish.hi = mul.out_max;
      }
      p.finish.ptr = &e->ptr_;
      p.finish.src = g.nodes[s.writer].output;
      p.finish.dst = mul.output;
      e->fused_[s.sigmoid] = e->fused_[s.multiply] = true;
    }
    e->chain_at_.assign(g.nodes.size(), -1);
    for (size_t c = 0; c < e->chains_.size(); ++c) {  // Note [xnnpack activation chain]
      const ActivationChain& ch = e->chains_[c];
      if (e->fused_[ch.first]) continue;  // its writer computes it (Note [xnnpack silu])
      e->chain_at_[ch.head] = static_cast<int32_t>(c);
      for (size_t i : {ch.first, ch.last, ch.tail})
        if (i != ch.head && i != SIZE_MAX) e->fused_[i] = true;
    }
    e->hold_bytes(g, in_writer);
    for (const GatedFilter& f : gates) e->gate_filter(g, f, budget);
    e->band_at_.assign(g.nodes.size(), SIZE_MAX);
    for (const BandPair& b : bands)
      if (packed::band_pair_fits(e->prepared_[b.pointwise], e->prepared_[b.depthwise]) &&
          e->prepared_[b.pointwise].finish.silu == b.silu)
        e->band_at_[b.pointwise] = b.depthwise;
    e->release_packed_only_copies(g);
    e->unrounded_ = qd8_only_inputs(g, e->kinds_, e->prepared_, e->stays_quantized_);
    e->row_params_.resize(g.values.size());
    for (size_t id = 0; id < g.values.size(); ++id) {
      const Value& v = g.values[id];
      if (!v.present || v.quant.kind != QuantKind::DynamicPerToken) continue;
      const int64_t row = dynamic_row(v.quant, ValueShape::of(v.dims));
      if (row > 0) e->row_params_[id].resize(static_cast<size_t>(v.numel / row));
    }
    for (const Value& v : g.values) e->planned_shapes_.push_back(ValueShape::of(v.dims));
    e->shapes_ = e->planned_shapes_;
    e->g_ = std::move(g);
    for (ActivationChain& c : e->chains_)
      if (e->chain_at_[c.head] >= 0) ETRT_CHECK_OK(e->tabulate_chain(c));  // reads g_
    return e;
  }

  /// Note [xnnpack block finish]: a Clamp/Convert/Copy/StaticReshape node (`reader`) onto a per-tensor quantized
  /// grid whose input is an intermediate, float or per-tensor quantized, that only it reads, written by a node that
  /// may take the packed path (`writer`), which may then run the reader block by block. The reader's output then
  /// lives from the writer on.
  struct Fusion {
    size_t writer, reader;
  };
  std::vector<Fusion> fusable_readers(const Graph& g) const {
    std::vector<uint32_t> readers(g.values.size(), 0);
    std::vector<size_t> writer(g.values.size(), SIZE_MAX);
    for (const Node& n : g.nodes) {
      for (uint32_t id : n.inputs)
        if (id != kNoValue) ++readers[id];
      if (n.output != kNoValue) writer[n.output] = n.index;
    }
    std::vector<Fusion> out;
    for (const Node& n : g.nodes) {
      if (kinds_[n.index]->run != &run::copy || n.inputs.empty() || n.output == kNoValue) continue;
      const uint32_t v = n.inputs[0];
      if (v == kNoValue || writer[v] == SIZE_MAX || readers[v] != 1 || !kinds_[writer[v]]->prepare) continue;
      const Value& in = g.values[v];
      const Value& o = g.values[n.output];
      const bool in_grid = in.quant.kind == QuantKind::None || in.quant.kind == QuantKind::PerTensor;
      if (o.quant.kind == QuantKind::PerTensor && in_grid && in.constant.empty() && !(in.flags & kExternal) &&
          in.numel == o.numel)
        out.push_back({writer[v], n.index});
    }
    return out;
  }
  /// Note [xnnpack silu]: the exporter lowers SiLU (efficientnet's activation) to Sigmoid(x) and Multiply(x, s).
  /// Where x is a float intermediate that only those two read, s one that only the Multiply reads, and x's writer
  /// may take the packed path, that writer computes x * sigmoid(x) into the Multiply's output block by block as it
  /// finishes them (BlockFinish::silu), with the Multiply's clamp: one pass over data in cache in place of two
  /// over the whole tensor. The results are those of the two nodes. The Multiply's output then lives from the
  /// writer on, in x's bytes where it is an intermediate (plan_intermediates' in_place): nothing reads x after, so
  /// the layer stores one tensor rather than two (efficientnet_b0's 112 x 112 x 96 expansion wrote 4.8 MB twice;
  /// the model ran ~5% faster). A pair that does not fuse after all multiplies element by element in place.
  struct SiluFusion {
    size_t writer, sigmoid, multiply;
  };
  std::vector<SiluFusion> silu_fusions(const Graph& g) const {
    std::vector<SiluFusion> out;
    const Readers r = readers_of(g);
    for (const Node& sig : g.nodes) {
      const std::optional<size_t> mul = silu_multiply(g, r, sig);
      if (mul && kinds_[r.writer[sig.inputs[0]]]->prepare) out.push_back({r.writer[sig.inputs[0]], sig.index, *mul});
    }
    return out;
  }

  /// Note [pointwise then depthwise] (kernels/util/nhwc_pointwise_depthwise.h): a float Conv2d node whose output
  /// (or its SiLU's, Note [xnnpack silu]) only a DepthwiseConv2d node reads, the very next node to run, the tensor
  /// between them of at least kPointwiseDepthwiseMinBytes. Whether the pair runs as one is decided once the nodes
  /// are prepared (packed::band_pair_fits) and, each call, by its shapes.
  struct BandPair {
    size_t pointwise, depthwise;
    bool silu;  // the pointwise node's SiLU lies between them (its writer runs it: BlockFinish::silu)
  };
  std::vector<BandPair> band_pairs(const Graph& g, const std::vector<SiluFusion>& silus) const {
    std::vector<BandPair> out;
    const Readers r = readers_of(g);
    const auto is_float = [&](uint32_t id) {
      return id != kNoValue && g.values[id].datatype == Datatype::Fp32 && g.values[id].quant.kind == QuantKind::None;
    };
    for (const Node& c : g.nodes) {
      if (kinds_[c.index]->name != "XNNConv2d" || c.inputs.empty() || !is_float(c.inputs[0]) ||
          !float_intermediate(g, c.output))
        continue;
      uint32_t mid = c.output;
      size_t next = c.index + 1;  // the next node to run: past the SiLU's two nodes, which c runs
      const auto silu = std::ranges::find(silus, c.index, &SiluFusion::writer);
      if (silu != silus.end()) {
        mid = g.nodes[silu->multiply].output;
        if (std::max(silu->sigmoid, silu->multiply) != c.index + 2 || std::min(silu->sigmoid, silu->multiply) != c.index + 1)
          continue;
        next = c.index + 3;
      }
      if (!float_intermediate(g, mid) || r.count[mid] != 1 || r.reader[mid] != next) continue;
      const Node& d = g.nodes[next];
      if (kinds_[d.index]->name != "XNNDepthwiseConv2d" || d.inputs.empty() || d.inputs[0] != mid ||
          !is_float(d.output) || g.values[mid].numel * int64_t{sizeof(float)} < kernels::nhwc::kPointwiseDepthwiseMinBytes)
        continue;
      out.push_back({c.index, d.index, silu != silus.end()});
    }
    return out;
  }

  /// Note [xnnpack gated filter]: efficientnet's squeeze-and-excitation ends in Multiply(x, s), s [1, 1, 1, C] a
  /// gate per channel of x [1, H, W, C], whose output only a pointwise convolution reads. That convolution is linear
  /// in each input channel, so it takes x with its filter's row c scaled by s[c] instead: a pass over the C x O
  /// filter (packed, scale_rows) a call in place of the Multiply's pass over the H x W x C activation, from memory,
  /// that the convolution then read again. Taken where the activation is the larger (a 56 x 56 x 144 map projected
  /// to 24 channels; not 7 x 7 x 1152 to 320), the convolution packed, float, ungrouped. The Multiply's output then
  /// points at x's bytes, and x lives on to the convolution. Each output differs from the two nodes' by the
  /// rounding of x (s w) against (x s) w.
  struct GatedFilter {
    size_t multiply, conv;
    uint32_t x, gate;
  };
  /// A StaticReshape or Copy that clamps nothing: its output's bytes are its input's (Note [xnnpack reshape alias],
  /// Note [xnnpack borrowed input]).
  bool passes_bytes_through(const Node& n) const {
    return (kinds_[n.index]->name == "XNNStaticReshape" || kinds_[n.index]->name == "XNNCopy") && !clamps(n);
  }
  /// Note [xnnpack borrowed input]: (value, input) for each StaticReshape or Copy, unclamped, from a float graph
  /// input to a float intermediate that no node overwrites in place (the source of no `in_place` pair): the value
  /// is the input's bytes, bound per call.
  std::vector<std::pair<uint32_t, uint32_t>> borrowed_inputs(
      const Graph& g, std::span<const std::pair<uint32_t, uint32_t>> in_place) const {
    std::vector<std::pair<uint32_t, uint32_t>> out;
    for (const Node& n : g.nodes) {
      if (!passes_bytes_through(n)) continue;
      const Value& in = g.values[n.inputs[0]];
      const bool float_input = (in.flags & kExternal) == kValueExternalInput && in.datatype == Datatype::Fp32 &&
                               in.quant.kind == QuantKind::None && in.constant.empty();
      if (!float_input || !float_intermediate(g, n.output) || g.values[n.output].numel > in.numel)
        continue;
      if (std::ranges::any_of(in_place, [&](const auto& pair) { return pair.second == n.output; })) continue;
      out.emplace_back(n.output, n.inputs[0]);
    }
    return out;
  }
  bool borrows(uint32_t id) const {
    return std::ranges::any_of(borrowed_, [&](const auto& pair) { return pair.first == id; });
  }

  std::vector<GatedFilter> gated_filters(const Graph& g) const {
    std::vector<GatedFilter> out;
    const Readers r = readers_of(g);
    for (const Node& mul : g.nodes) {
      if (kinds_[mul.index]->run != &run::binary<kernels::mul_out<detail::F>, fast::Mul> || mul.inputs.size() != 2 ||
          mul.output == kNoValue || clamps(mul) || !float_intermediate(g, mul.output) || r.count[mul.output] != 1)
        continue;
      const Node& conv = g.nodes[r.reader[mul.output]];
      if (kinds_[conv.index]->run != &run::convolution<run::ConvFilter::Ohwi> || conv.inputs.size() < 2 ||
          conv.inputs[0] != mul.output)
        continue;
      const Value& filter = g.values[conv.inputs[1]];
      if (filter.dims.size() != 4 || filter.dims[1] != 1 || filter.dims[2] != 1) continue;
      const int64_t c = filter.dims[3], o = filter.dims[0];
      for (int k = 0; k < 2; ++k) {
        const uint32_t x = mul.inputs[k], s = mul.inputs[1 - k];
        if (x == kNoValue || s == kNoValue) break;
        const Value &xv = g.values[x], &sv = g.values[s];
        const bool gate = sv.datatype == Datatype::Fp32 && sv.quant.kind == QuantKind::None && sv.numel == c &&
                          !sv.dims.empty() && sv.dims.back() == c;
        if (!gate || !float_intermediate(g, x) || borrows(x) || xv.dims.size() != 4 || xv.dims[0] != 1 ||
            xv.dims[3] != c || xv.numel != g.values[mul.output].numel || xv.numel < c * o)
          continue;
        out.push_back({mul.index, conv.index, x, s});
        break;
      }
    }
    return out;
  }
  /// Takes a gated filter where the convolution's preparation allows it (see gated_filters): the scaled copy's
  /// buffer, within the graph's budget, and the Multiply's output on x's bytes; else the Multiply runs.
  void gate_filter(const Graph& g, const GatedFilter& f, uint64_t& budget) {
    PreparedNode& p = prepared_[f.conv];
    if (!p.packed_path || p.packed.size() != 1 || p.int8.active() || p.winograd.active() || p.bytes_in ||
        p.bytes_out || fused_[f.multiply] || chain_at_[f.multiply] >= 0 || p.packed[0].k != g.values[f.x].dims[3])
      return;
    const kernels::gemm::PackedB& b = p.packed[0];
    const uint64_t floats = static_cast<uint64_t>(b.panels() * b.nr * b.k);
    if (floats * sizeof(float) > budget) return;
    kernels::gemm::PackedB gated;
    gated.k = b.k, gated.n = b.n, gated.level = b.level, gated.nr = b.nr;
    gated.data = make_aligned_array<float>(static_cast<size_t>(floats));
    if (!gated.data) return;
    budget -= floats * sizeof(float);
    p.gated = std::move(gated);
    p.gate_ptr = &ptr_;
    p.gate = f.gate;
    fused_[f.multiply] = true;
    ptr_[g.nodes[f.multiply].output] = ptr_[f.x];
  }

  /// Who writes and reads each value: the writer's and the last reader's node index (SIZE_MAX for none), and the
  /// count of reads.
  struct Readers {
    std::vector<uint32_t> count;
    std::vector<size_t> writer, reader;
  };
  static Readers readers_of(const Graph& g) {
    Readers r{std::vector<uint32_t>(g.values.size(), 0), std::vector<size_t>(g.values.size(), SIZE_MAX),
              std::vector<size_t>(g.values.size(), SIZE_MAX)};
    for (const Node& n : g.nodes) {
      for (uint32_t id : n.inputs)
        if (id != kNoValue) ++r.count[id], r.reader[id] = n.index;
      if (n.output != kNoValue) r.writer[n.output] = n.index;
    }
    return r;
  }
  static bool float_intermediate(const Graph& g, uint32_t id) {
    const Value& v = g.values[id];
    return v.datatype == Datatype::Fp32 && v.quant.kind == QuantKind::None && v.constant.empty() &&
           !(v.flags & kExternal);
  }
  static bool clamps(const Node& n) {
    constexpr float kInf = std::numeric_limits<float>::infinity();
    return n.has_min_max && (n.out_min > -kInf || n.out_max < kInf);
  }
  /// The Multiply of SiLU's x * sigmoid(x) when `sig` is a Sigmoid whose input x (a float intermediate some node
  /// writes) only it and that Multiply read, and whose output only the Multiply reads; its output is float too.
  std::optional<size_t> silu_multiply(const Graph& g, const Readers& r, const Node& sig) const {
    if (kinds_[sig.index]->run != &run::sigmoid || sig.inputs.size() != 1 || sig.output == kNoValue || clamps(sig))
      return std::nullopt;
    const uint32_t x = sig.inputs[0], s = sig.output;
    if (x == kNoValue || r.writer[x] == SIZE_MAX || r.count[x] != 2 || r.count[s] != 1 || !float_intermediate(g, x) ||
        !float_intermediate(g, s))
      return std::nullopt;
    const Node& mul = g.nodes[r.reader[s]];
    const bool multiplies = kinds_[mul.index]->run == &run::binary<kernels::mul_out<detail::F>, fast::Mul> &&
                            mul.inputs.size() == 2 &&
                            ((mul.inputs[0] == x && mul.inputs[1] == s) || (mul.inputs[0] == s && mul.inputs[1] == x));
    if (!multiplies || mul.output == kNoValue || mul.index < sig.index) return std::nullopt;
    const Value& y = g.values[mul.output];
    if (y.datatype != Datatype::Fp32 || y.quant.kind != QuantKind::None || y.numel != g.values[x].numel)
      return std::nullopt;
    return mul.index;
  }

  /// Note [xnnpack activation chain]: an activation between quantized layers runs as one pass over the data at its
  /// first node. Two shapes:
  /// - SiLU, x * sigmoid(x), that its input's writer does not compute (Note [xnnpack silu]: the writer is no packed
  ///   float node, as a linear layer on dynamically quantized activations is not). Which writers take theirs is
  ///   known only once the nodes are prepared, after the memory plan, so every SiLU is a candidate chain whose
  ///   output lives from its head on. In a PT2E-quantized graph (efficientnet_b0's) the chain is a Convert off the
  ///   convolution's quantized output, the Sigmoid and Multiply in float, and a Convert back onto a quantized grid:
  ///   four passes over the activation from memory, now one.
  /// - An elementwise node (NodeKind::elementwise: GELU, tanh, hardswish...) between a Convert off a per-tensor grid
  ///   and a Convert onto one: the PT2E quantizer leaves a ViT's GELU in float between the two (three passes, a
  ///   tenth of vit_b_32_q8's time).
  /// `head` is that first Convert (a copy: quantized values are held as the floats they stand for, Note [xnnpack
  /// quantized values]) when it alone reads its input's copy, else the Sigmoid; `first` and `last` the float nodes
  /// (Sigmoid and Multiply, or the elementwise node twice); `tail` the Convert onto a per-tensor grid that alone
  /// reads the last node's output, or SIZE_MAX. The values in between are then never written; the chain's output
  /// lives from the head on. With its input and output held as bytes (Note [byte activations]) a chain is a
  /// function of one byte, computed once at load for all 256 through the same kernels (tabulate_chain).
  struct ActivationChain {
    size_t head, first, last, tail;
    uint32_t in, out;  // x (or the head Convert's input), and the last node's or the tail's output
    bool silu = true;  // else `first` is an elementwise node
    bool in_bytes = false, out_bytes = false;  // Note [byte activations]
    bool tabulated = false;
    std::array<uint8_t, 256> table{};
  };
  std::vector<ActivationChain> silu_chains(const Graph& g) const {
    std::vector<ActivationChain> out;
    const Readers r = readers_of(g);
    for (const Node& sig : g.nodes) {
      const std::optional<size_t> mul = silu_multiply(g, r, sig);
      if (!mul) continue;
      const uint32_t x = sig.inputs[0];
      const Node& w = g.nodes[r.writer[x]];
      ActivationChain c{sig.index, sig.index, *mul, SIZE_MAX, x, g.nodes[*mul].output};
      if (copies_on_grid(g, w, x, true)) c.head = w.index, c.in = w.inputs[0];
      const uint32_t y = g.nodes[*mul].output;
      if (float_intermediate(g, y) && r.count[y] == 1 && copies_on_grid(g, g.nodes[r.reader[y]], y, false))
        c.tail = r.reader[y], c.out = g.nodes[c.tail].output;
      out.push_back(c);
    }
    return out;
  }
  /// Whether node c is a Copy or Convert between value `v` and a value of its size quantized per tensor: with
  /// `reads`, c an unclamped copy into v off such a value (or off unquantized floats); else, c one out of v onto it.
  bool copies_on_grid(const Graph& g, const Node& c, uint32_t v, bool reads) const {
    if (kinds_[c.index]->run != &run::copy || c.inputs.size() != 1 || c.inputs[0] == kNoValue || c.output == kNoValue)
      return false;
    const Value& other = g.values[reads ? c.inputs[0] : c.output];
    if (other.numel != g.values[v].numel) return false;
    if (!reads) return other.quant.kind == QuantKind::PerTensor;
    return !clamps(c) && (other.quant.kind == QuantKind::None || other.quant.kind == QuantKind::PerTensor);
  }
  /// The elementwise chains (Note [xnnpack activation chain]) of nodes no SiLU chain holds: a Convert off a per-tensor
  /// grid into a float that only the elementwise node reads, whose float output only a Convert onto a per-tensor
  /// grid reads.
  void add_elementwise_chains(const Graph& g, std::vector<ActivationChain>& chains) const {
    const Readers r = readers_of(g);
    std::vector<bool> held(g.nodes.size(), false);
    for (const ActivationChain& c : chains)
      for (size_t i : {c.head, c.first, c.last, c.tail})
        if (i != SIZE_MAX) held[i] = true;
    for (const Node& u : g.nodes) {
      if (!kinds_[u.index]->elementwise || held[u.index] || u.inputs.size() != 1 || u.output == kNoValue) continue;
      const uint32_t x = u.inputs[0], y = u.output;
      if (x == kNoValue || r.writer[x] == SIZE_MAX || r.count[x] != 1 || r.count[y] != 1 ||
          !float_intermediate(g, x) || !float_intermediate(g, y) || g.values[x].numel != g.values[y].numel)
        continue;
      const Node &head = g.nodes[r.writer[x]], &tail = g.nodes[r.reader[y]];
      if (held[head.index] || held[tail.index] || !copies_on_grid(g, head, x, true) ||
          g.values[head.inputs[0]].quant.kind != QuantKind::PerTensor || !copies_on_grid(g, tail, y, false))
        continue;
      chains.push_back({head.index, u.index, u.index, tail.index, head.inputs[0], tail.output, false});
      held[head.index] = held[u.index] = held[tail.index] = true;
    }
  }

  /// One activation chain (Note [xnnpack activation chain]): blocks of the function, clamped as its last node
  /// clamps, then, with a tail, clamped as it clamps and rounded onto its grid while the block is in L1.
  Status run_chain(const ActivationChain& c) const {
    const float* x = ptr_[c.in];
    float* y = ptr_[c.out];
    const int64_t n = shapes_[c.out].numel();
    if (c.tabulated) {
      const auto* xb = reinterpret_cast<const uint8_t*>(x);
      auto* yb = reinterpret_cast<uint8_t*>(y);
      kernels::parallel_elements(n, 1, [&](int64_t b, int64_t e) {
        fast::lookup_bytes(xb + b, yb + b, e - b, c.table.data());
      });
      return {};
    }
    std::mutex mu;
    Status first_failure;
    kernels::parallel_elements(n, 16, [&](int64_t b, int64_t e) {
      constexpr int64_t kBlock = 2048;  // 8 KB: rounded while in L1
      for (int64_t i0 = b; i0 < e; i0 += kBlock) {
        Status s = chain_block(c, x, y, i0, std::min(kBlock, e - i0));
        if (s) continue;
        const std::lock_guard<std::mutex> lock(mu);
        if (first_failure) first_failure = s;
        return;
      }
    });
    return first_failure;
  }
  /// Elements [i0, i0 + len) of chain c, len <= 2048, x and y its input and output as ptr_ holds them. Note [byte
  /// activations]: an input held as bytes becomes the floats it stands for a block at a time; an output held as
  /// bytes is rounded from a block of floats.
  Status chain_block(const ActivationChain& c, const float* x, float* y, int64_t i0, int64_t len) const {
    constexpr float kInf = std::numeric_limits<float>::infinity();
    const Node& last = g_.nodes[c.last];
    const float lo = clamps(last) ? last.out_min : -kInf, hi = clamps(last) ? last.out_max : kInf;
    const Node* tail = c.tail == SIZE_MAX ? nullptr : &g_.nodes[c.tail];
    alignas(64) float xs[2048], ys[2048];
    const float* xi = x + i0;
    if (c.in_bytes) {
      const Value& xv = g_.values[c.in];
      fast::bytes_to_reals({nullptr, reinterpret_cast<const uint8_t*>(x), byte_zero(xv), xv.quant.scale, false}, i0,
                           len, xs);
      xi = xs;
    }
    float* yi = c.out_bytes ? ys : y + i0;
    if (c.silu) {
      kernels::silu_clamped(xi, yi, len, lo, hi);
    } else {  // the elementwise node's own kernel, then its clamp as the executor applies it to the node's output
      KernelContext ctx;
      const std::array<int64_t, 1> size{len};
      ETRT_TRY(const Tensor xt, Tensor::make(ScalarType::Float, size, {}, const_cast<float*>(xi)));
      ETRT_TRY(Tensor yt, Tensor::make(ScalarType::Float, size, {}, yi));
      ETRT_CHECK_OK(kinds_[c.first]->elementwise(ctx, last, xt, yt));
      if (clamps(last))
        ETRT_CHECK_OK(kernels::clamp_out<detail::F>(ctx, yt, std::optional<Scalar>(detail::fscalar(lo)),
                                                    std::optional<Scalar>(detail::fscalar(hi)), yt));
    }
    if (!tail) return {};
    const Value& q = g_.values[tail->output];
    const float tlo = clamps(*tail) ? tail->out_min : -kInf, thi = clamps(*tail) ? tail->out_max : kInf;
    if (c.out_bytes) {
      const QRange range = qrange(q.datatype);
      const fast::OutGrid grid{tlo, thi, 1.f / q.quant.scale, static_cast<float>(range.lo - q.quant.zero_point),
                               static_cast<float>(range.hi - q.quant.zero_point), q.quant.scale};
      fast::reals_to_bytes(ys, len, grid, byte_zero(q), reinterpret_cast<uint8_t*>(y) + i0);
    } else {
      quant::fake_quantize(yi, yi, len, q.quant.scale, q.quant.zero_point, qrange(q.datatype), tlo, thi);
    }
    return {};
  }
  /// Note [xnnpack activation chain]: a chain reading and writing bytes maps each of the 256 input bytes to one
  /// output byte; chain_block computes them all once (all in its 16-lane blocks) and a call looks them up, 64 a
  /// permute on AVX-512 VBMI. A SiLU's exp and division cost 5-6 cycles an element (a third of efficientnet_b0_q8's
  /// time), a GELU's erf more; the lookup, a few instructions per 64.
  Status tabulate_chain(ActivationChain& c) const {
    if (!c.in_bytes || !c.out_bytes || c.tail == SIZE_MAX) return {};
    alignas(64) uint8_t in[256 + 64] = {};
    for (int u = 0; u < 256; ++u) in[u] = static_cast<uint8_t>(u);
    ETRT_CHECK_OK(chain_block(c, reinterpret_cast<const float*>(in), reinterpret_cast<float*>(c.table.data()), 0, 256));
    c.tabulated = true;
    return {};
  }
  static Grid grid_of(const Value& v) { return {v.quant.scale, v.quant.zero_point, qrange(v.datatype)}; }

  /// Whether MaxPooling2d node n can pool bytes (Note [byte activations]): its input and output on one per-tensor
  /// grid, and an NHWC window the byte loop takes for the planned shapes.
  static bool max_pool_bytes_fit(const Graph& g, const Node& n) {
    if (n.inputs.empty() || n.inputs[0] == kNoValue || n.output == kNoValue) return false;
    const Value &in = g.values[n.inputs[0]], &out = g.values[n.output];
    if (in.datatype != out.datatype || in.quant.kind != QuantKind::PerTensor ||
        out.quant.kind != QuantKind::PerTensor || in.quant.scale != out.quant.scale ||
        in.quant.zero_point != out.quant.zero_point)
      return false;
    const auto geo = run::pooling_geometry(ValueShape::of(in.dims), ValueShape::of(out.dims), n);
    return geo && kernels::nhwc::max_pool_bytes_fits(*geo);
  }

  /// Note [byte activations]: which values are held as bytes, and each node's part in it (PreparedNode::bytes_in,
  /// bytes_out, BlockFinish::byte_zero). ETRT_BYTE_ACTIVATIONS=0 keeps every value a float (for comparisons).
  void hold_bytes(const Graph& g, const std::vector<bool>& in_writer) {
    static const bool off = [] {
      const char* v = std::getenv("ETRT_BYTE_ACTIVATIONS");
      return v && std::string_view(v) == "0";
    }();
    bytes_.assign(g.values.size(), false);
    if (off) return;
    std::vector<ByteForm> forms(g.nodes.size(), ByteForm::None);
    std::vector<uint32_t> stored(g.nodes.size(), kNoValue);
    std::vector<bool> inside(in_writer);
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const Node& n = g.nodes[i];
      const PreparedNode& p = prepared_[i];
      const ByteForm f = kinds_[i]->bytes;
      stored[i] = stored_output(g, p, i);
      if (chain_at_[i] >= 0) {  // an activation chain reads its input and writes its output as either (run_chain)
        const ActivationChain& c = chains_[static_cast<size_t>(chain_at_[i])];
        forms[i] = ByteForm::Gemm;
        stored[i] = c.out;
        for (size_t k : {c.first, c.last, c.tail})
          if (k != i && k != SIZE_MAX) inside[k] = true;
        continue;
      }
      if ((fused_[i] && !in_writer[i]) || p.finish.silu) continue;
      const bool grids = packed::grid_step(p.finish.grid) && packed::grid_step(p.finish.next_grid);
      if (f == ByteForm::Gemm && p.int8.active() && grids) forms[i] = f;
      // The byte depthwise kernel rounds onto its own output's grid first (ByteFinish): a quantized output only.
      if (f == ByteForm::Joint && p.packed_path && p.byte_dw.active() && grids && p.finish.round) forms[i] = f;
      if (f == ByteForm::Binary && n.inputs.size() == 2 && n.output != kNoValue) {
        // fast::binary_mixed: the output on a per-tensor 8-bit grid, operands its shape or a row repeated over it.
        const Value& o = g.values[n.output];
        const bool grid = (o.datatype == Datatype::QInt8 || o.datatype == Datatype::QUInt8) &&
                          o.quant.kind == QuantKind::PerTensor;
        const ValueShape os = ValueShape::of(o.dims);
        if (grid && fast::mixed_layout(ValueShape::of(g.values[n.inputs[0]].dims),
                                       ValueShape::of(g.values[n.inputs[1]].dims), os))
          forms[i] = f;
      }
      if (f == ByteForm::Reads) forms[i] = f;
      if (f == ByteForm::Writes && n.inputs.size() == 1 && !clamps(n)) {
        const Value &in = g.values[n.inputs[0]], &out = g.values[n.output];
        if (in.datatype == Datatype::Fp32 && in.quant.kind == QuantKind::None) forms[i] = f;  // floats onto a grid
        if (in.quant.kind == QuantKind::PerTensor && out.datatype == Datatype::Fp32 &&
            out.quant.kind == QuantKind::None)
          forms[i] = ByteForm::Reads;  // a grid's values as floats
      }
      if (f == ByteForm::Joint && kinds_[i]->run == &run::max_pooling && !clamps(n) && max_pool_bytes_fit(g, n))
        forms[i] = f;  // the largest byte is the byte of the largest real, on one grid
      if (f == ByteForm::Joint && kinds_[i]->run == &run::transpose && !clamps(n)) {  // bytes moved as bytes
        const Value &in = g.values[n.inputs[0]], &out = g.values[n.output];
        if (in.datatype == out.datatype && in.quant.kind == QuantKind::PerTensor &&
            out.quant.kind == QuantKind::PerTensor && in.quant.scale == out.quant.scale &&
            in.quant.zero_point == out.quant.zero_point)
          forms[i] = f;
      }
    }
    const std::vector<bool> bytes = byte_values(g, forms, stored, inside);
    for (ActivationChain& c : chains_) {
      if (chain_at_[c.head] < 0) continue;
      c.in_bytes = bytes[c.in];
      c.out_bytes = bytes[c.out];
    }
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const Node& n = g.nodes[i];
      PreparedNode& p = prepared_[i];
      if (forms[i] != ByteForm::None && chain_at_[i] < 0) {
        for (size_t k = 0; k < byte_inputs(n, forms[i]); ++k)
          if (n.inputs[k] != kNoValue && bytes[n.inputs[k]]) p.bytes_in |= static_cast<uint8_t>(1u << k);
        const uint32_t out = stored_output(g, p, i);
        p.bytes_out = bytes[out];
        if (p.bytes_out) p.finish.byte_zero = byte_zero(g.values[out]);
      }
      if (!p.bytes_out) p.byte_dw = {};  // runs the float depthwise loop
    }
    bytes_ = bytes;
  }

  /// A float copy of a constant (a dequantized or realigned filter) that only packed nodes read is not kept beside
  /// their packed copies: those nodes read the filter (input 1) from their panels alone.
  void release_packed_only_copies(const Graph& g) {
    std::vector<bool> read_as_floats(g.values.size(), false);
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const Node& n = g.nodes[i];
      const bool filter_packed = prepared_[i].filter_prepared();
      for (size_t k = 0; k < n.inputs.size(); ++k)
        if (n.inputs[k] != kNoValue && !(filter_packed && k == 1)) read_as_floats[n.inputs[k]] = true;
    }
    for (size_t id = 0; id < g.values.size(); ++id)
      if (storage_[id] && !g.values[id].constant.empty() && !read_as_floats[id]) {
        storage_[id].reset();
        ptr_[id] = nullptr;
      }
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
    for (const auto& [value, input] : borrowed_) ptr_[value] = ptr_[input];  // Note [xnnpack borrowed input]
    if (dynamic) {
      for (size_t i = 0; i < g_.nodes.size(); ++i) {
        const Node& n = g_.nodes[i];
        if (n.output == kNoValue) continue;  // a Clamp folded into its input's writer (Note [xnnpack clamp fusion])
        ETRT_TRY(const ValueShape o, kinds_[i]->shape(g_, n, shapes_));
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
    const kernels::PoolScope threads(kernels::thread_pool());  // the calling thread's workers, shared by its graphs
    const NodeRun r{ctx, g_, ptr_, shapes_, scratch_.get(), stays_quantized_, prepared_, row_params_};
    size_t ran_with_band = SIZE_MAX;  // a depthwise node already run by the pointwise node before it
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (fused_[i] || i == ran_with_band) continue;  // run by the node before it (Note [xnnpack block finish])
#ifdef ETRT_NODE_PROFILE
      const profile::NodeTimer timer(this, i, g_.nodes[i], planned_shapes_);
#endif
      if (band_at_[i] != SIZE_MAX) {
        ETRT_TRY(const bool ran, run_band_pair(i, band_at_[i]));
        if (ran) {
          ran_with_band = band_at_[i];
          continue;
        }
      }
      if (chain_at_[i] >= 0) {
        const ActivationChain& c = chains_[static_cast<size_t>(chain_at_[i])];
        Status s = run_chain(c);
        if (!s) return fail(s.error().code, g_.nodes[c.first].where(), ": ", s.error().what);
        continue;
      }
      const Node& n = g_.nodes[i];
      const bool clamps = n.has_min_max && !prepared_[i].packed_path &&
                          (n.out_min > -std::numeric_limits<float>::infinity() ||
                           n.out_max < std::numeric_limits<float>::infinity());
      const Quant& oq = g_.values[n.output].quant;
      if (kinds_[i]->run == &run::copy && (prepared_[i].bytes_in & 1)) {  // a Convert of bytes into floats (Reads)
        const Value& in = g_.values[n.inputs[0]];
        const fast::MixedOperand a{nullptr, reinterpret_cast<const uint8_t*>(ptr_[n.inputs[0]]), byte_zero(in),
                                   in.quant.scale, false};
        float* out = ptr_[n.output];
        kernels::parallel_elements(shapes_[n.output].numel(), 16, [&](int64_t b, int64_t e) {
          fast::bytes_to_reals(a, b, e - b, out + b);
        });
        continue;
      }
      if (oq.kind == QuantKind::PerTensor && kinds_[i]->run == &run::copy) {
        // A Clamp, Convert or Copy onto a quantized grid: the copy, the clamp and the rounding in one pass.
        constexpr float kInf = std::numeric_limits<float>::infinity();
        const float* in = ptr_[n.inputs[0]];
        float* out = ptr_[n.output];
        const QRange range = qrange(g_.values[n.output].datatype);
        if (prepared_[i].bytes_out) {  // Note [byte activations]: a Convert whose readers take bytes writes them
          const fast::OutGrid grid = *r.out_grid(n);  // a byte grid; the Writes form excludes clamped Converts
          uint8_t* bytes = reinterpret_cast<uint8_t*>(out);
          const float zero = byte_zero(g_.values[n.output]);
          kernels::parallel_elements(shapes_[n.output].numel(), 4, [&](int64_t b, int64_t e) {
            fast::reals_to_bytes(in + b, e - b, grid, zero, bytes + b);
          });
          continue;
        }
        kernels::parallel_elements(shapes_[n.output].numel(), 4, [&](int64_t b, int64_t e) {
          quant::fake_quantize(in + b, out + b, e - b, oq.scale, oq.zero_point, range, clamps ? n.out_min : -kInf,
                               clamps ? n.out_max : kInf);
        });
        continue;
      }
      r.output_on_grid = false;
      Status s = kinds_[i]->run(r, n);
      if (!s) return fail(s.error().code, n.where(), ": ", s.error().what);
      if (r.output_on_grid) continue;  // clamped and rounded as it was written (fast::OutGrid)
      if (clamps && oq.kind == QuantKind::PerTensor) {
        requantize_output(n, n.out_min, n.out_max);  // the clamp and the rounding in one pass
        continue;
      }
      if (clamps) {
        ETRT_TRY(Tensor o, r.flat(n.output));
        ETRT_CHECK_OK(kernels::clamp_out<detail::F>(ctx, o, std::optional<Scalar>(detail::fscalar(n.out_min)),
                                                    std::optional<Scalar>(detail::fscalar(n.out_max)), o));
      }
      if (!prepared_[i].finish.round) requantize_output(n);  // else done block by block (Note [xnnpack block finish])
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
  /// Whether node `i` (by position) runs on its filter packed at load (packed_filters.h).
  bool packed_path(size_t i) const { return i < prepared_.size() && prepared_[i].packed_path; }
  /// Whether node `i` multiplies by its filter kept as bytes, in the int8 GEMM (Note [xnnpack int8 filters]).
  bool int8_path(size_t i) const { return i < prepared_.size() && prepared_[i].int8.active(); }
  /// The output tile of node i's Winograd transform (4 or 2; Note [xnnpack winograd]), 0 when it runs none.
  int winograd_tile(size_t i) const { return i < prepared_.size() ? prepared_[i].winograd.plan.m : 0; }
  /// The nodes of the activation chain node i heads (Note [xnnpack activation chain]): head, first, last (a SiLU's
  /// Sigmoid and Multiply, or the elementwise node twice), tail (SIZE_MAX for none); nullopt when it heads none.
  std::optional<std::array<size_t, 4>> chain_at(size_t i) const {
    if (i >= chain_at_.size() || chain_at_[i] < 0) return std::nullopt;
    const ActivationChain& c = chains_[static_cast<size_t>(chain_at_[i])];
    return std::array<size_t, 4>{c.head, c.first, c.last, c.tail};
  }
  /// Whether the activation chain headed by node i runs as a table of its 256 input bytes (tabulate_chain).
  bool chain_tabulated(size_t i) const {
    return i < chain_at_.size() && chain_at_[i] >= 0 && chains_[static_cast<size_t>(chain_at_[i])].tabulated;
  }
  /// The DepthwiseConv2d node that pointwise node i runs band by band with (Note [pointwise then depthwise]), or
  /// SIZE_MAX.
  size_t band_with(size_t i) const { return i < band_at_.size() ? band_at_[i] : SIZE_MAX; }
  /// Whether node i runs inside the node writing its input (Note [xnnpack block finish]).
  bool runs_in_writer(size_t i) const { return i < fused_.size() && fused_[i]; }
  /// Where value `id`'s floats are kept (null for an external value, bound per call): tests check the plan's
  /// sharing with it (Note [xnnpack silu]).
  const float* value_data(uint32_t id) const { return id < ptr_.size() ? ptr_[id] : nullptr; }
  /// (value, graph input) pairs whose value reads the input's bytes (Note [xnnpack borrowed input]).
  std::span<const std::pair<uint32_t, uint32_t>> borrowed_inputs() const { return borrowed_; }
  /// Whether value `id` is held as bytes (Note [byte activations]).
  bool holds_bytes(uint32_t id) const { return id < bytes_.size() && bytes_[id]; }
  /// True while the executor holds a float copy of value `id` (a dequantized or realigned constant).
  bool holds_float_copy(uint32_t id) const { return id < storage_.size() && storage_[id] != nullptr; }

 private:
  static constexpr uint32_t kExternal = kValueExternalInput | kValueExternalOutput;
  Executor() = default;

  /// Note [qd8 inputs left unrounded]: a dynamically quantized value whose every reader is a fully-connected node
  /// on the integer path (its input 0, a qd8 plan, a weight kept quantized) is not rounded onto its grid: those
  /// kernels turn each float into its byte with the row's parameters (round(x / scale) + zero point, clamped), which
  /// gives the same byte for x as for x rounded onto the grid, NaN and infinities included (qd8_gemm.h,
  /// pack_qd8_rows). Only the parameters are computed, when the row count fits the planned one: otherwise the readers
  /// take the float path and the value is rounded as any other.
  static std::vector<bool> qd8_only_inputs(const Graph& g, std::span<const NodeKind* const> kinds,
                                           std::span<const PreparedNode> prepared, const std::vector<bool>& kept) {
    std::vector<bool> only(g.values.size(), false), seen(g.values.size(), false);
    std::vector<bool> other(g.values.size(), false);
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const Node& n = g.nodes[i];
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        const uint32_t id = n.inputs[k];
        if (id == kNoValue || id >= g.values.size()) continue;
        seen[id] = true;
        const bool integer_fc = k == 0 && kinds[i]->run == &run::fully_connected && !prepared[i].packed_path &&
                                prepared[i].qd8.weight != quant::Qd8Weight::None && n.inputs.size() > 1 &&
                                n.inputs[1] < kept.size() && kept[n.inputs[1]];
        if (!integer_fc) other[id] = true;
      }
    }
    for (size_t id = 0; id < g.values.size(); ++id) {
      const Value& v = g.values[id];
      only[id] = v.present && v.quant.kind == QuantKind::DynamicPerToken && !(v.flags & kExternal) && seen[id] &&
                 !other[id];
    }
    return only;
  }

  /// The quantized weights that only fully-connected nodes read, as their (untransposed, 2-D) filter: these stay
  /// quantized in memory and are dequantized a block of rows at a time (run::quantized_linear), so a 4-bit LLM's weights
  /// take their file size, not eight times it.
  static std::vector<bool> weights_read_in_blocks(const Graph& g, std::span<const NodeKind* const> kinds) {
    std::vector<bool> keep(g.values.size(), false);
    for (size_t id = 0; id < g.values.size(); ++id) {
      const Value& v = g.values[id];
      keep[id] = v.present && !v.constant.empty() && v.dims.size() == 2 &&
                 (v.datatype == Datatype::QCInt8 || v.datatype == Datatype::QCInt4 || v.datatype == Datatype::QBInt4);
    }
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const Node& n = g.nodes[i];
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        const uint32_t id = n.inputs[k];
        if (id == kNoValue || !keep[id]) continue;
        if (!kinds[i]->reads_weights_in_blocks || k != 1 || (n.flags & kFlagTransposeWeights)) keep[id] = false;
        // An 8-bit weight behind a statically quantized activation (a PT2E int8 CNN or transformer, whose
        // fully-connected layers see many rows per call) is dequantized once and packed like a float filter:
        // dequantizing blocks of it on every call cost vit_b_32 five times its GEMM time. The float copy takes
        // four times the int8 weight, as the float model would.
        else if (g.values[id].datatype == Datatype::QCInt8 && n.inputs[0] != kNoValue &&
                 g.values[n.inputs[0]].datatype != Datatype::QDInt8)
          keep[id] = false;
      }
    }
    return keep;
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

  /// Nodes c and d of a BandPair in one pass (Note [pointwise then depthwise]); false where this call's shapes do
  /// not fit it, and the two then run apart.
  Result<bool> run_band_pair(size_t c, size_t d) {
    const Node &pw = g_.nodes[c], &dw = g_.nodes[d];
    const auto bias = [&](const Node& n) { return n.inputs.size() > 2 && n.inputs[2] != kNoValue ? ptr_[n.inputs[2]] : nullptr; };
    Result<bool> r = packed::pointwise_depthwise(
        prepared_[c], pw, prepared_[d], dw, ptr_[pw.inputs[0]], shapes_[pw.inputs[0]], shapes_[dw.inputs[0]],
        g_.values[pw.inputs[1]].dims, ptr_[dw.inputs[1]], g_.values[dw.inputs[1]].dims, ptr_[dw.output],
        shapes_[dw.output], bias(pw), bias(dw));
    if (!r) return fail(r.error().code, pw.where(), ": ", r.error().what);
    return r;
  }

  /// Note [xnnpack quantized values]: a node's quantized output is rounded onto its grid where it is written; a
  /// per-tensor one is clamped to [lo, hi] first, in the same pass.
  void requantize_output(const Node& n, float lo = -std::numeric_limits<float>::infinity(),
                         float hi = std::numeric_limits<float>::infinity()) {
    const Value& v = g_.values[n.output];
    const ValueShape& shape = shapes_[n.output];
    float* x = ptr_[n.output];
    switch (v.quant.kind) {
      case QuantKind::PerTensor:
        kernels::parallel_elements(shape.numel(), 4, [&](int64_t b, int64_t e) {
          quant::fake_quantize(x + b, x + b, e - b, v.quant.scale, v.quant.zero_point, qrange(v.datatype), lo, hi);
        });
        break;
      case QuantKind::DynamicPerToken: {
        const int64_t row = dynamic_row(v.quant, shape);
        std::vector<quant::DynamicParams>& params = row_params_[n.output];
        // Planned at load for the largest shape; a row length other than the planned one records nothing.
        const bool fits = row > 0 && static_cast<size_t>(shape.numel() / row) <= params.size();
        quant::fake_quantize_dynamic(x, shape.numel(), row, fits ? params.data() : nullptr,
                                     !(fits && unrounded_[n.output]));
        break;
      }
      default:
        break;  // per-channel values are constants (parse_value)
    }
  }

  /// Elements per row of a dynamically quantized value of this shape: the trailing num_nonbatch_dims share one set of
  /// parameters.
  static int64_t dynamic_row(const Quant& q, const ValueShape& shape) {
    int64_t row = 1;
    const uint32_t trailing = std::min<uint32_t>(static_cast<uint32_t>(std::max(q.num_nonbatch_dims, 0)), shape.rank);
    for (uint32_t k = shape.rank - trailing; k < shape.rank; ++k) row *= shape.d[k];
    return row;
  }

  Graph g_;
  std::vector<const NodeKind*> kinds_;               // each node's entry in kNodeKinds
  std::vector<AlignedArray<float>> storage_;  // constants, by value id
  AlignedArray<float> arena_;                  // intermediates, placed by plan_intermediates
  AlignedArray<float> scratch_;                // node temporaries (Note [xnnpack scratch])
  std::vector<float*> ptr_;
  std::vector<std::pair<uint32_t, uint32_t>> borrowed_;  // (value, graph input): Note [xnnpack borrowed input]
  std::vector<ValueShape> planned_shapes_, shapes_;  // the payload's dims; this call's (shape_inference.h)
  bool shapes_dynamic_ = false;                      // shapes_ differs from planned_shapes_
  std::vector<bool> stays_quantized_;                // weights_read_in_blocks
  std::vector<bool> bytes_;                          // by value id: held as bytes (Note [byte activations])
  std::vector<bool> unrounded_;                      // qd8_only_inputs
  std::vector<PreparedNode> prepared_;               // by node position: packed filters (packed_filters.h)
  std::vector<bool> fused_;                          // by node position: run by the node writing its input
  std::vector<ActivationChain> chains_;              // Note [xnnpack activation chain]
  std::vector<int32_t> chain_at_;                    // by node position: the chain it heads, or -1
  std::vector<size_t> band_at_;  // by node position: the depthwise node it runs with (BandPair), or SIZE_MAX
  std::vector<std::vector<quant::DynamicParams>> row_params_;  // by value id: NodeRun::row_params
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
