// GraphExecutor: runs a parsed ECU1 payload over device memory through an Ops policy (CudaOps on a GPU, HostOps on
// host memory for tests).
//
// init (create): uploads the constants in one copy, plans one scratch buffer for every intermediate (first fit by
// liveness, 256-byte aligned offsets) and precomputes each node's launch parameters, so execute only binds the
// argument pointers and launches. Inside the delegate every tensor is contiguous; arguments whose layout (dim_order)
// is not are converted at the boundary through scratch with a strided copy.
//
// The Ops policy:
//   static Result<Ops> create(int device_index);
//   Result<Guard> activate();  // makes the device current for one execute; the guard restores the caller's
//   Status unary(fn::UnaryKind, float param, const float* x, float* y, int64_t n);
//   Status binary(fn::BinaryKind, float alpha, const fn::Strided<3>& walk, const float* a, const float* b, float* y);
//   template <class T> Status copy(const fn::Strided<2>& walk, const T* src, T* dst);  // T float or uint8_t;
//                                                                                       // operand 0 is dst, 1 src
//   Status gemm(const GemmShape&, float alpha, const float* a, const float* b, float beta, float* c);
//   Status softmax(const float* x, float* y, int64_t outer, int64_t len, int64_t inner);
//   Status layer_norm(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd,
//                     int64_t rows, int64_t cols, float eps);  // w, b may be null
//   Status eq_scalar(float s, const float* x, uint8_t* y, int64_t n);
//   Status logical_not(const uint8_t* x, uint8_t* y, int64_t n);
//   Status any(const uint8_t* x, uint8_t* y, int64_t outer, int64_t len, int64_t inner);  // over len, per output
//   template <class T> Status fill(T value, T* y, int64_t n);  // T float or uint8_t
//   Status where(const fn::Strided<4>& walk, const uint8_t* cond, const float* a, const float* b, float* y);
// Bool tensors are one byte per element; kernels write 0 or 1 and read any nonzero byte as true.
// Ops may assume what the payload parser checked: sizes are consistent, n > 0 and no output aliases an input.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "etrt/backends/cuda/op_steps.h"
#include "etrt/backends/cuda/op_table.h"
#include "etrt/backends/cuda/payload.h"
#include "etrt/kernels/util/functors.h"
#include "etrt/core/evalue.h"
#include "etrt/device/device_interface.h"

namespace etrt::cuda {

inline constexpr size_t kScratchAlign = 256;

/// One block of scratch memory live from node `first` to node `last` inclusive (-1: before node 0, as converted
/// inputs are; num_nodes: after the last node, as converted outputs are).
struct LiveRange {
  int64_t first = 0, last = 0;
  size_t nbytes = 0;
};

/// Scratch larger than this is refused before any arithmetic can wrap (each value is at most 2^58 bytes).
inline constexpr size_t kMaxScratchBytes = size_t{1} << 62;

/// First-fit placement: ranges are placed in order of `first`, each at the lowest 256-aligned offset that does
/// not overlap a block whose live range intersects its own. Returns each offset and the total size in `total`.
inline Result<std::vector<size_t>> plan_scratch(std::span<const LiveRange> ranges, size_t& total) {
  std::vector<size_t> order(ranges.size()), offset(ranges.size(), 0);
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ranges[a].first < ranges[b].first; });
  // Placed blocks still live at the current `first`, sorted by offset. Blocks that died are dropped, so the work
  // is proportional to what is live at once rather than to the whole graph.
  struct Block {
    size_t begin, end;
    int64_t last;
  };
  std::vector<Block> live;
  total = 0;
  for (size_t i : order) {
    const LiveRange& r = ranges[i];
    if (r.nbytes == 0) continue;
    std::erase_if(live, [&](const Block& b) { return b.last < r.first; });
    if (r.nbytes > kMaxScratchBytes)
      return fail(Error::MemoryAllocationFailed, "EtrtCudaBackend: an intermediate of ", r.nbytes,
                  " bytes is too large");
    const size_t need = (r.nbytes + kScratchAlign - 1) / kScratchAlign * kScratchAlign;
    size_t at = 0;
    auto pos = live.begin();
    for (; pos != live.end(); ++pos) {
      if (pos->begin >= at && pos->begin - at >= need) break;
      at = std::max(at, pos->end);
    }
    if (at > kMaxScratchBytes - need)  // every end stays below 2^62, so this cannot wrap either
      return fail(Error::MemoryAllocationFailed, "EtrtCudaBackend: the intermediates need more than 2^62 bytes of "
                  "scratch memory");
    live.insert(pos, Block{at, at + need, r.last});
    offset[i] = at;
    total = std::max(total, at + need);
  }
  return offset;
}

template <class Ops>
class GraphExecutor {
 public:
  /// Builds the executor for device `index` of `dev`; `p.constants` must still view the payload's bytes.
  /// `max_bytes` > 0: constants plus scratch may not exceed it (LoadOptions::max_planned_bytes).
  static Result<std::unique_ptr<GraphExecutor>> create(Payload p, const DeviceInterface& dev, int index,
                                                       uint64_t max_bytes = 0) {
    ETRT_TRY(Ops ops, Ops::create(index));
    std::unique_ptr<GraphExecutor> g(new GraphExecutor(std::move(p), dev, index, std::move(ops)));
    g->max_bytes_ = max_bytes;
    if (max_bytes > 0 && g->p_.constants.size() > max_bytes)
      return fail(Error::MemoryAllocationFailed, "EtrtCudaBackend: constants of ", g->p_.constants.size(),
                  " bytes exceed the load option's cap of ", max_bytes, " bytes");
    ETRT_CHECK_OK(g->upload_constants());
    g->plan_boundaries();
    ETRT_CHECK_OK(g->plan_memory());
    g->plan_steps();
    // Spelled out: nvcc's front end lacks C++20's implicit move into a converting constructor.
    return Result<std::unique_ptr<GraphExecutor>>(std::move(g));
  }

  /// Runs the graph: `args` are the inputs then the outputs, device tensors on this executor's device.
  Status execute(std::span<EValue* const> args) {
    const std::lock_guard<std::mutex> lock(mu_);  // scratch and the bound pointers are per executor
    const size_t ni = p_.inputs.size(), no = p_.outputs.size();
    if (args.size() != ni + no)
      return fail(Error::InvalidArgument, "EtrtCudaBackend: got ", args.size(), " arguments, expected ", ni,
                  " inputs + ", no, " outputs");
    for (size_t i = 0; i < args.size(); ++i) ETRT_CHECK_OK(bind(i, args[i]));
    ETRT_TRY([[maybe_unused]] auto guard, ops_.activate());
    for (const Boundary& b : boundaries_)
      if (b.is_input && b.convert) ETRT_CHECK_OK(copy_any(b.is_bool, b.walk, b.arg, ptr_[b.value]));
    for (size_t i = 0; i < steps_.size(); ++i)
      if (auto s = run(steps_[i]); !s)
        return fail(s.error().code, "EtrtCudaBackend node ", i, " (", p_.nodes[i].kind->name, "): ", s.error().what);
    for (const Boundary& b : boundaries_)
      if (!b.is_input && b.convert) ETRT_CHECK_OK(copy_any(b.is_bool, b.walk, ptr_[b.value], b.arg));
    return {};
  }

  size_t scratch_bytes() const { return scratch_.size(); }
  size_t constant_bytes() const { return constants_.size(); }
  /// Where value `id` lives in scratch, or -1 when it does not (arguments, constants, empty values).
  int64_t scratch_offset(uint32_t id) const { return id < scratch_off_.size() ? scratch_off_[id] : -1; }
  const Ops& ops() const { return ops_; }

 private:
  GraphExecutor(Payload p, const DeviceInterface& dev, int index, Ops ops)
      : p_(std::move(p)), dev_(dev), index_(index), ops_(std::move(ops)) {}

  /// An input or output argument; `convert` when its layout is not contiguous, so it is staged in scratch.
  struct Boundary {
    uint32_t value = 0;
    bool is_input = false;
    bool convert = false;
    bool is_bool = false;
    fn::Strided<2> walk{};  // operand 0 the destination, 1 the source
    void* arg = nullptr;    // bound per execute
  };

  /// Strides of `v`'s argument layout; true when that layout is the contiguous one in memory (size-1 dimensions
  /// do not count, so a channels-last [N, C, 1, 1] needs no conversion).
  static bool arg_strides(const ValueDesc& v, int64_t* strides) {
    strides_from_dim_order(v.shape(), v.order(), std::span<int64_t>(strides, v.rank));
    int64_t contiguous[kMaxDims];
    steps::contiguous_strides(v.shape(), contiguous);
    for (int d = 0; d < v.rank; ++d)
      if (v.sizes[d] > 1 && strides[d] != contiguous[d]) return false;
    return true;
  }

  Status upload_constants() {
    if (p_.constants.empty()) return {};
    ETRT_TRY(constants_, DeviceBuffer::allocate(dev_, p_.constants.size(), index_));
    ETRT_CHECK_OK(dev_.copy(constants_.data(), p_.constants.data(), p_.constants.size(), CopyKind::HostToDevice,
                            index_));
    p_.constants = {};  // the payload's bytes are not ours to keep
    return {};
  }

  void plan_boundaries() {
    const auto add = [&](uint32_t id, bool is_input) {
      const ValueDesc& v = p_.values[id];
      Boundary b;
      b.value = id;
      b.is_input = is_input;
      b.is_bool = v.is_bool();
      int64_t strided[kMaxDims];
      b.convert = !arg_strides(v, strided) && v.numel > 0;
      if (b.convert) {
        fn::Strided<2>& w = b.walk;
        w.rank = v.rank;
        w.numel = v.numel;
        for (int d = 0; d < v.rank; ++d) w.sizes[d] = v.sizes[d];
        // Scratch is contiguous; the argument has the payload's layout.
        steps::contiguous_strides(v.shape(), w.strides[is_input ? 0 : 1]);
        for (int d = 0; d < v.rank; ++d) w.strides[is_input ? 1 : 0][d] = strided[d];
        fn::coalesce(w);
      }
      boundaries_.push_back(b);
    };
    for (uint32_t id : p_.inputs) add(id, true);
    for (uint32_t id : p_.outputs) add(id, false);
  }

  Status plan_memory() {
    const size_t nv = p_.values.size();
    const int64_t nn = static_cast<int64_t>(p_.nodes.size());
    std::vector<LiveRange> ranges(nv);
    std::vector<bool> in_scratch(nv, false);
    for (uint32_t id = 0; id < nv; ++id) {
      const ValueDesc& v = p_.values[id];
      in_scratch[id] = !v.is_input() && !v.is_constant() && !v.is_output();
      ranges[id] = {v.is_input() ? -1 : 0, -1, v.nbytes()};
    }
    for (const Boundary& b : boundaries_) {
      if (!b.convert) continue;
      in_scratch[b.value] = true;
      if (!b.is_input) ranges[b.value].last = nn;  // read by the conversion after the last node
    }
    for (int64_t i = 0; i < nn; ++i) {
      const NodeDesc& n = p_.nodes[i];
      for (int k = 0; k < n.num_in; ++k)
        if (n.in[k] != kAbsent) ranges[n.in[k]].last = std::max(ranges[n.in[k]].last, i);
      for (int k = 0; k < n.num_out; ++k) ranges[n.out[k]].first = i;
    }
    std::vector<LiveRange> used;
    std::vector<uint32_t> ids;
    for (uint32_t id = 0; id < nv; ++id) {
      if (!in_scratch[id] || ranges[id].nbytes == 0) continue;
      LiveRange r = ranges[id];
      r.last = std::max(r.last, r.first);  // written but never read: still needs room while it is written
      used.push_back(r);
      ids.push_back(id);
    }
    size_t total = 0;
    ETRT_TRY(const std::vector<size_t> off, plan_scratch(used, total));
    if (max_bytes_ > 0 && total > max_bytes_ - std::min<uint64_t>(max_bytes_, constants_.size()))
      return fail(Error::MemoryAllocationFailed, "EtrtCudaBackend: scratch of ", total, " bytes plus constants of ",
                  constants_.size(), " bytes exceed the load option's cap of ", max_bytes_, " bytes");
    ETRT_TRY(scratch_, DeviceBuffer::allocate(dev_, total, index_));
    scratch_off_.assign(nv, -1);
    ptr_.assign(nv, nullptr);
    auto* base = static_cast<uint8_t*>(scratch_.data());
    for (size_t k = 0; k < ids.size(); ++k) {
      scratch_off_[ids[k]] = static_cast<int64_t>(off[k]);
      ptr_[ids[k]] = base + off[k];
    }
    auto* cbase = static_cast<uint8_t*>(constants_.data());
    for (uint32_t id = 0; id < nv; ++id)
      if (p_.values[id].is_constant() && p_.values[id].numel > 0)
        ptr_[id] = cbase + p_.values[id].constant_offset;
    return {};
  }

  void plan_steps() {
    steps_.resize(p_.nodes.size());
    for (size_t i = 0; i < p_.nodes.size(); ++i) {
      const NodeDesc& n = p_.nodes[i];
      Step& s = steps_[i];
      s.node = &n;
      bool empty = true;
      for (int k = 0; k < n.num_out; ++k) empty = empty && p_.values[n.out[k]].numel == 0;
      if (empty) continue;  // nothing to write (kernels are never launched over zero elements)
      n.kind->plan(n, p_.values, s);
    }
  }

  /// Checks argument `i` against its value and binds its memory.
  Status bind(size_t i, EValue* ev) {
    Boundary& b = boundaries_[i];
    const ValueDesc& v = p_.values[b.value];
    const auto where = [&] {
      return cat("EtrtCudaBackend argument ", i, " (", b.is_input ? "input " : "output ",
                 b.is_input ? i : i - p_.inputs.size(), ", value ", b.value, ")");
    };
    if (!ev || !ev->is_tensor())
      return fail(Error::InvalidArgument, where(), " is ", ev ? tag_name(ev->tag()) : "missing", ", expected a ",
                  numpy_name(v.dtype), " tensor");
    const Tensor& t = ev->tensor_unchecked();
    if (t.dtype() != v.dtype)
      return fail(Error::InvalidArgument, where(), " has dtype ", numpy_name(t.dtype()), ", expected ",
                  numpy_name(v.dtype));
    if (!payload_detail::same(t.sizes(), v.shape()))
      return fail(Error::InvalidArgument, where(), " has sizes ", shape_str(t.sizes()), ", expected ",
                  shape_str(v.shape()));
    const Device expected{DeviceType::CUDA, static_cast<int8_t>(index_)};
    if (t.device() != expected)
      return fail(Error::InvalidArgument, where(), " is on ", t.device().str(), ", expected ", expected.str());
    if (v.numel > 0) {
      int64_t strides[kMaxDims];
      arg_strides(v, strides);
      for (int d = 0; d < v.rank; ++d)
        if (v.sizes[d] > 1 && t.strides()[d] != strides[d])
          return fail(Error::InvalidArgument, where(), " has dim_order ", payload_detail::order_str(t.dim_order()),
                      ", whose layout differs from the payload's dim_order ",
                      payload_detail::order_str(v.order()));
      if (!t.data()) return fail(Error::InvalidArgument, where(), " has no data");
    }
    b.arg = t.data();
    if (!b.convert) ptr_[b.value] = b.arg;
    return {};
  }

  Status copy_any(bool bytes, const fn::Strided<2>& w, const void* src, void* dst) {
    if (bytes) return ops_.copy(w, static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst));
    return ops_.copy(w, static_cast<const float*>(src), static_cast<float*>(dst));
  }

  Status run(const Step& s) {
    const NodeDesc& n = *s.node;
    // The parser checked every operand's dtype, so these casts name what the memory holds.
    const auto in = [&](int k) -> const float* {
      return n.in[k] == kAbsent ? nullptr : static_cast<const float*>(ptr_[n.in[k]]);
    };
    const auto in_b = [&](int k) { return static_cast<const uint8_t*>(ptr_[n.in[k]]); };
    float* out = static_cast<float*>(ptr_[n.out[0]]);
    uint8_t* out_b = static_cast<uint8_t*>(ptr_[n.out[0]]);
    const int64_t numel = p_.values[n.out[0]].numel;
    switch (s.kind) {
      case StepKind::Skip: return {};
      case StepKind::Unary: return ops_.unary(s.unary, s.param, in(0), out, numel);
      case StepKind::Binary: return ops_.binary(s.binary, s.alpha, s.walk3, in(0), in(1), out);
      case StepKind::Copy:
        if (s.bytes) return ops_.copy(s.walk2, in_b(0) + s.src_offset, out_b);
        return ops_.copy(s.walk2, in(0) + s.src_offset, out);
      case StepKind::Gemm:
        if (s.bias_copy) ETRT_CHECK_OK(ops_.copy(s.walk2, in(0), out));
        return ops_.gemm(s.gemm, s.alpha, in(s.lhs), in(s.lhs + 1), s.beta, out);
      case StepKind::Softmax: return ops_.softmax(in(0), out, s.outer, s.len, s.inner);
      case StepKind::LayerNorm:
        return ops_.layer_norm(in(0), in(1), in(2), out, static_cast<float*>(ptr_[n.out[1]]),
                               static_cast<float*>(ptr_[n.out[2]]), s.outer, s.len, s.eps);
      case StepKind::EqScalar: return ops_.eq_scalar(s.param, in(0), out_b, numel);
      case StepKind::LogicalNot: return ops_.logical_not(in_b(0), out_b, numel);
      case StepKind::Any: return ops_.any(in_b(0), out_b, s.outer, s.len, s.inner);
      case StepKind::Fill:
        if (s.bytes) return ops_.fill(static_cast<uint8_t>(s.param != 0.f), out_b, numel);
        return ops_.fill(s.param, out, numel);
      case StepKind::Where: return ops_.where(s.walk4, in_b(0), in(1), in(2), out);
    }
    return fail(Error::Internal, "unknown step kind");
  }

  Payload p_;
  const DeviceInterface& dev_;
  int index_;
  Ops ops_;
  DeviceBuffer constants_, scratch_;
  uint64_t max_bytes_ = 0;  // create's max_bytes
  std::vector<Boundary> boundaries_;  // inputs then outputs, in argument order
  std::vector<Step> steps_;
  std::vector<int64_t> scratch_off_;
  std::vector<void*> ptr_;  // each value's memory (float or bool by its dtype); arguments rebound at every execute
  std::mutex mu_;
};

}  // namespace etrt::cuda
