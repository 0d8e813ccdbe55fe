// The reduction engine the reduction kernels share: which dims a call reduces, how the input's dims are walked,
// and the per-dtype accumulators.
//
// Note [reduction plan]: the input's dims split into kept dims (walked in logical order, so outputs are written by
// logical index whatever the layouts) and reduced dims (sorted by input stride and merged where contiguous, so a
// dense reduction becomes one strided line per output). When the innermost kept dim is the input's stride-1 dim and
// the reduced line is not, a "column" pass accumulates whole rows of outputs at once so the inner loop stays
// contiguous. Floating sums accumulate in double (float blocks of 256 for float input), so 16M-element float sums
// stay accurate to ~1e-7 relative.
#pragma once

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "etrt/kernels/util/pointwise_util.h"

namespace etrt::kernels {

namespace detail {

struct ReduceMask {
  std::array<bool, kMaxDims> reduce{};
  int count = 0;
};

/// Dims to reduce: `dims` None or empty means all dims; negative dims wrap; duplicates fail.
inline Result<ReduceMask> reduce_mask(std::string_view op, int rank, std::optional<std::span<const int64_t>> dims) {
  ReduceMask m;
  if (!dims || dims->empty()) {
    for (int d = 0; d < rank; ++d) m.reduce[d] = true;
    m.count = rank;
    return m;
  }
  for (int64_t v : *dims) {
    ETRT_TRY(const int d, wrap_dim(op, v, rank));
    if (rank == 0) continue;
    if (m.reduce[d]) return fail(Error::InvalidArgument, op, ": dim ", d, " appears multiple times in the list of dims");
    m.reduce[d] = true;
    ++m.count;
  }
  return m;
}

/// The output shape of reducing `sizes` over `m`.
inline Shape reduced_shape(std::span<const int64_t> sizes, const ReduceMask& m, bool keepdim) {
  Shape s;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (!m.reduce[d]) s.sizes[s.rank++] = sizes[d];
    else if (keepdim) s.sizes[s.rank++] = 1;
  }
  return s;
}

/// Note [reduction plan]
struct ReducePlan {
  Shape kept;
  std::array<int64_t, kMaxDims> kin{}, kout{}, kout2{};
  Shape outer;  // reduced dims other than the innermost line
  std::array<int64_t, kMaxDims> rin{};
  int64_t line_n = 1, line_s = 0;
  int64_t count = 1;  // reduced elements per output
};

/// `out` (and `out2`, a second output of the same shape, if any) must already be resized to the reduced shape.
inline ReducePlan make_plan(std::span<const int64_t> sizes, const std::array<int64_t, kMaxDims>& in_strides,
                            const ReduceMask& m, bool keepdim, const Tensor& out, const Tensor* out2 = nullptr) {
  struct D {
    int64_t size, sin, sout, sout2;
  };
  ReducePlan p;
  std::array<D, kMaxDims> kept{}, red{};
  int nk = 0, nr = 0, od = 0;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (m.reduce[d]) {
      p.count *= sizes[d];
      if (keepdim) ++od;
      if (sizes[d] != 1) red[nr++] = {sizes[d], in_strides[d], 0, 0};
    } else {
      const int64_t so = out.stride(od), so2 = out2 ? out2->stride(od) : 0;
      ++od;
      if (sizes[d] != 1) kept[nk++] = {sizes[d], in_strides[d], so, so2};
    }
  }
  // Merge kept dims that are contiguous in the input and in every output.
  int w = 0;
  for (int i = 0; i < nk; ++i) {
    if (w > 0) {
      D& prev = kept[w - 1];
      const D& cur = kept[i];
      if (prev.sin == cur.sin * cur.size && prev.sout == cur.sout * cur.size && prev.sout2 == cur.sout2 * cur.size) {
        prev = {prev.size * cur.size, cur.sin, cur.sout, cur.sout2};
        continue;
      }
    }
    kept[w++] = kept[i];
  }
  nk = w;
  // Reduced dims: order by input stride (largest first), then merge.
  std::stable_sort(red.begin(), red.begin() + nr, [](const D& a, const D& b) { return a.sin > b.sin; });
  w = 0;
  for (int i = 0; i < nr; ++i) {
    if (w > 0 && red[w - 1].sin == red[i].sin * red[i].size) {
      red[w - 1] = {red[w - 1].size * red[i].size, red[i].sin, 0, 0};
      continue;
    }
    red[w++] = red[i];
  }
  nr = w;
  p.kept.rank = nk;
  for (int i = 0; i < nk; ++i) {
    p.kept.sizes[i] = kept[i].size;
    p.kin[i] = kept[i].sin;
    p.kout[i] = kept[i].sout;
    p.kout2[i] = kept[i].sout2;
  }
  if (nr > 0) {
    p.line_n = red[nr - 1].size;
    p.line_s = red[nr - 1].sin;
    p.outer.rank = nr - 1;
    for (int i = 0; i < nr - 1; ++i) {
      p.outer.sizes[i] = red[i].size;
      p.rin[i] = red[i].sin;
    }
  }
  if (p.count == 0) p.line_n = 0;
  return p;
}

/// Runs a combinable reducer (Note [reduction plan]); outputs are stored as Out.
template <class Out, class In, class R>
void run_plan(const ReducePlan& p, const In* in, Out* out, const R& r) {
  using A = typename R::Acc;
  const int nk = p.kept.rank;
  if (nk > 0 && p.kin[nk - 1] == 1 && p.line_s != 1 && p.count > 1) {
    const int64_t K = p.kept.sizes[nk - 1];
    const int64_t ks = p.kout[nk - 1];
    Shape ko = p.kept;
    ko.rank = nk - 1;
    Shape rs = p.outer;
    std::array<std::array<int64_t, kMaxDims>, 1> rst{p.rin};
    rs.sizes[rs.rank] = p.line_n;
    rst[0][rs.rank] = p.line_s;
    ++rs.rank;
    std::unique_ptr<A[]> acc = std::make_unique<A[]>(static_cast<size_t>(K));  // A may be bool
    const std::array<std::array<int64_t, kMaxDims>, 2> kst{p.kin, p.kout};
    for_each_offset<2>(ko, kst, [&](const std::array<int64_t, 2>& off) {
      std::fill(acc.get(), acc.get() + K, r.init());
      for_each_offset<1>(rs, rst, [&](const std::array<int64_t, 1>& roff) {
        r.columns(acc.get(), in + off[0] + roff[0], K);
      });
      for (int64_t j = 0; j < K; ++j) out[off[1] + j * ks] = convert<Out>(r.finalize(acc[j]));
    });
    return;
  }
  const std::array<std::array<int64_t, kMaxDims>, 2> kst{p.kin, p.kout};
  const std::array<std::array<int64_t, kMaxDims>, 1> rst{p.rin};
  for_each_offset<2>(p.kept, kst, [&](const std::array<int64_t, 2>& off) {
    A acc = r.init();
    for_each_offset<1>(p.outer, rst, [&](const std::array<int64_t, 1>& roff) {
      acc = r.combine(acc, r.line(in + off[0] + roff[0], p.line_n, p.line_s));
    });
    out[off[1]] = convert<Out>(r.finalize(acc));
  });
}

/// Floating accumulation type: double for every floating dtype; int64 for integers and bool.
template <class T>
using sum_acc_t = std::conditional_t<std::is_floating_point_v<compute_t<T>>, double, int64_t>;

template <class In>
struct SumR {
  using A = sum_acc_t<In>;
  using Acc = A;
  double scale = 1.0;  // mean: 1/count
  bool is_mean = false;
  A init() const { return A(0); }
  A combine(A a, A b) const { return a + b; }
  auto finalize(A a) const {
    if constexpr (std::is_floating_point_v<A>) return is_mean ? a * scale : a;
    else return a;
  }
  A line(const In* p, int64_t n, int64_t s) const {
    if constexpr (std::is_same_v<In, float>) {
      if (s == 1) {
        constexpr int L = 16, B = 16;
        double total = 0;
        int64_t i = 0;
        for (; i + L * B <= n; i += L * B) {
          float lane[L] = {};
          for (int b = 0; b < B; ++b)
            for (int l = 0; l < L; ++l) lane[l] += p[i + b * L + l];
          for (int h = L / 2; h > 0; h /= 2)
            for (int l = 0; l < h; ++l) lane[l] += lane[l + h];
          total += lane[0];
        }
        float tail = 0;
        for (; i < n; ++i) tail += p[i];
        return total + tail;
      }
    }
    if constexpr (std::is_same_v<In, double>) {
      if (s == 1) {
        constexpr int L = 8;
        double lane[L] = {};
        int64_t i = 0;
        for (; i + L <= n; i += L)
          for (int l = 0; l < L; ++l) lane[l] += p[i + l];
        double total = 0;
        for (int l = 0; l < L; ++l) total += lane[l];
        for (; i < n; ++i) total += p[i];
        return total;
      }
    }
    A total = 0;
    for (int64_t i = 0; i < n; ++i) total += static_cast<A>(static_cast<compute_t<In>>(p[i * s]));
    return total;
  }
  void columns(A* acc, const In* p, int64_t k) const {
    for (int64_t j = 0; j < k; ++j) acc[j] += static_cast<A>(static_cast<compute_t<In>>(p[j]));
  }
};

template <class In>
struct ProdR {
  using Acc = sum_acc_t<In>;
  Acc init() const { return Acc(1); }
  Acc combine(Acc a, Acc b) const { return a * b; }
  Acc finalize(Acc a) const { return a; }
  Acc line(const In* p, int64_t n, int64_t s) const {
    Acc t = 1;
    for (int64_t i = 0; i < n; ++i) t *= static_cast<Acc>(static_cast<compute_t<In>>(p[i * s]));
    return t;
  }
  void columns(Acc* acc, const In* p, int64_t k) const {
    for (int64_t j = 0; j < k; ++j) acc[j] *= static_cast<Acc>(static_cast<compute_t<In>>(p[j]));
  }
};

/// max (IsMax) or min with NaN propagation.
template <class In, bool IsMax>
struct ExtremeR {
  using Acc = compute_t<In>;
  static Acc step(Acc a, Acc x) {
    if constexpr (std::is_floating_point_v<Acc>) {
      if (x != x) return x;
    }
    if constexpr (IsMax) return x > a ? x : a;
    else return x < a ? x : a;
  }
  Acc init() const {
    if constexpr (std::is_floating_point_v<Acc>)
      return IsMax ? -std::numeric_limits<Acc>::infinity() : std::numeric_limits<Acc>::infinity();
    else
      return IsMax ? std::numeric_limits<Acc>::lowest() : std::numeric_limits<Acc>::max();
  }
  Acc combine(Acc a, Acc b) const { return step(a, b); }
  Acc finalize(Acc a) const { return a; }
  Acc line(const In* p, int64_t n, int64_t s) const {
    Acc a = init();
    int64_t i = 0;
    if constexpr (std::is_same_v<In, Acc> && !std::is_same_v<Acc, bool>) {
      if (s == 1 && n >= 32) {  // independent lanes (vectorizable); NaN tracked separately
        constexpr int L = 16;
        Acc lane[L];
        for (int l = 0; l < L; ++l) lane[l] = a;
        bool nan = false;
        for (; i + L <= n; i += L)
          for (int l = 0; l < L; ++l) {
            const Acc v = p[i + l];
            if constexpr (IsMax) lane[l] = v > lane[l] ? v : lane[l];
            else lane[l] = v < lane[l] ? v : lane[l];
            if constexpr (std::is_floating_point_v<Acc>) nan |= (v != v);
          }
        if constexpr (std::is_floating_point_v<Acc>) {
          if (nan) return std::numeric_limits<Acc>::quiet_NaN();
        }
        for (int l = 0; l < L; ++l) a = step(a, lane[l]);
      }
    }
    for (; i < n; ++i) a = step(a, static_cast<Acc>(p[i * s]));
    return a;
  }
  void columns(Acc* acc, const In* p, int64_t k) const {
    for (int64_t j = 0; j < k; ++j) acc[j] = step(acc[j], static_cast<Acc>(p[j]));
  }
};

template <class In>
struct AnyR {
  using Acc = bool;
  Acc init() const { return false; }
  Acc combine(Acc a, Acc b) const { return a || b; }
  Acc finalize(Acc a) const { return a; }
  Acc line(const In* p, int64_t n, int64_t s) const {
    for (int64_t i = 0; i < n; ++i)
      if (static_cast<compute_t<In>>(p[i * s]) != compute_t<In>(0)) return true;
    return false;
  }
  void columns(Acc* acc, const In* p, int64_t k) const {
    for (int64_t j = 0; j < k; ++j) acc[j] = acc[j] || (static_cast<compute_t<In>>(p[j]) != compute_t<In>(0));
  }
};

}  // namespace detail

}  // namespace etrt::kernels
