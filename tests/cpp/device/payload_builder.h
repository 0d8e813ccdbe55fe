// A small ECU1 payload writer for the CUDA delegate's tests (the exporter's preprocess is the real writer).
//
// It writes exactly the layout of PAYLOAD.md and records where each record starts, so malformed-payload tests can
// patch one field of a valid payload and check the parser names it.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <vector>

#include "etrt/backends/cuda/payload.h"

namespace etrt::cuda::test {

/// An attribute's 8 bytes: i64 or f64 as the op's row says.
struct Attr {
  uint64_t bits;
  static Attr i(int64_t v) { return {std::bit_cast<uint64_t>(v)}; }
  static Attr f(double v) { return {std::bit_cast<uint64_t>(v)}; }
};

class PayloadBuilder {
 public:
  struct Value {
    uint8_t dtype = 6;
    uint8_t flags = 0;
    std::vector<int64_t> sizes;
    std::vector<uint8_t> dim_order;
    std::vector<float> data;  // constants
  };
  struct Node {
    uint16_t op;
    std::vector<uint32_t> in, out;
    std::vector<Attr> attrs;
  };

  uint32_t value(std::vector<int64_t> sizes, uint8_t flags = 0, std::vector<uint8_t> dim_order = {}) {
    if (dim_order.empty())
      for (size_t d = 0; d < sizes.size(); ++d) dim_order.push_back(static_cast<uint8_t>(d));
    values.push_back({6, flags, std::move(sizes), std::move(dim_order), {}});
    return static_cast<uint32_t>(values.size() - 1);
  }
  uint32_t input(std::vector<int64_t> sizes, std::vector<uint8_t> dim_order = {}) {
    const uint32_t id = value(std::move(sizes), kFlagInput, std::move(dim_order));
    inputs.push_back(id);
    return id;
  }
  uint32_t output(std::vector<int64_t> sizes, std::vector<uint8_t> dim_order = {}) {
    const uint32_t id = value(std::move(sizes), kFlagOutput, std::move(dim_order));
    outputs.push_back(id);
    return id;
  }
  uint32_t temp(std::vector<int64_t> sizes) { return value(std::move(sizes)); }
  uint32_t constant(std::vector<int64_t> sizes, std::vector<float> data) {
    const uint32_t id = value(std::move(sizes), kFlagConstant);
    values[id].data = std::move(data);
    return id;
  }
  /// Makes value `id` a bool (dtype 11); returns `id`.
  uint32_t as_bool(uint32_t id) {
    values[id].dtype = 11;
    return id;
  }
  void node(uint16_t op, std::vector<uint32_t> in, std::vector<uint32_t> out, std::vector<Attr> attrs = {}) {
    nodes.push_back({static_cast<uint16_t>(op), std::move(in), std::move(out), std::move(attrs)});
  }

  std::vector<uint8_t> bytes() {
    std::vector<uint8_t> b;
    value_at.clear();
    node_at.clear();
    put<uint32_t>(b, 0x31554345u);  // "ECU1"
    put<uint32_t>(b, version);
    put<uint32_t>(b, static_cast<uint32_t>(values.size()));
    put<uint32_t>(b, static_cast<uint32_t>(inputs.size()));
    put<uint32_t>(b, static_cast<uint32_t>(outputs.size()));
    put<uint32_t>(b, static_cast<uint32_t>(nodes.size()));
    const size_t header_consts = b.size();
    put<uint32_t>(b, 0);
    put<uint32_t>(b, 0);
    // Constant data, 64-aligned, in value order.
    std::vector<uint8_t> consts;
    std::vector<uint64_t> const_off(values.size(), 0);
    for (size_t i = 0; i < values.size(); ++i) {
      if (!(values[i].flags & kFlagConstant)) continue;
      while (consts.size() % 64) consts.push_back(0);
      const_off[i] = consts.size();
      const auto* p = reinterpret_cast<const uint8_t*>(values[i].data.data());
      consts.insert(consts.end(), p, p + values[i].data.size() * sizeof(float));
    }
    for (size_t i = 0; i < values.size(); ++i) {
      const Value& v = values[i];
      value_at.push_back(b.size());
      b.push_back(v.dtype);
      b.push_back(static_cast<uint8_t>(v.sizes.size()));
      b.push_back(v.flags);
      b.push_back(0);
      put<uint32_t>(b, 0);
      put<uint64_t>(b, const_off[i]);
      for (int64_t s : v.sizes) put<int64_t>(b, s);
      for (uint8_t d : v.dim_order) b.push_back(d);
      pad8(b);
    }
    io_at = b.size();
    for (uint32_t id : inputs) put<uint32_t>(b, id);
    for (uint32_t id : outputs) put<uint32_t>(b, id);
    pad8(b);
    for (const Node& n : nodes) {
      node_at.push_back(b.size());
      put<uint16_t>(b, n.op);
      b.push_back(static_cast<uint8_t>(n.in.size()));
      b.push_back(static_cast<uint8_t>(n.out.size()));
      put<uint16_t>(b, static_cast<uint16_t>(n.attrs.size()));
      put<uint16_t>(b, 0);
      for (uint32_t id : n.in) put<uint32_t>(b, id);
      for (uint32_t id : n.out) put<uint32_t>(b, id);
      pad8(b);
      for (Attr a : n.attrs) put<uint64_t>(b, a.bits);
    }
    records_end = b.size();
    if (!consts.empty()) {
      while (b.size() % 64) b.push_back(0);
      const uint32_t off = static_cast<uint32_t>(b.size()), size = static_cast<uint32_t>(consts.size());
      std::memcpy(b.data() + header_consts, &off, 4);
      std::memcpy(b.data() + header_consts + 4, &size, 4);
      b.insert(b.end(), consts.begin(), consts.end());
    }
    return b;
  }

  std::vector<Value> values;
  std::vector<uint32_t> inputs, outputs;
  std::vector<Node> nodes;
  uint32_t version = 1;
  // Filled by bytes(): where each record starts.
  std::vector<size_t> value_at, node_at;
  size_t io_at = 0, records_end = 0;

 private:
  template <class T>
  static void put(std::vector<uint8_t>& b, T v) {
    uint8_t tmp[sizeof(T)];
    std::memcpy(tmp, &v, sizeof(T));
    b.insert(b.end(), tmp, tmp + sizeof(T));
  }
  static void pad8(std::vector<uint8_t>& b) {
    while (b.size() % 8) b.push_back(0);
  }
};

/// Overwrites sizeof(T) bytes at `at`.
template <class T>
inline void patch(std::vector<uint8_t>& b, size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof(T));
}

/// A graph with every op of version 1 (and optional inputs, constants, a multi-output node, bool values), for parser
/// and fuzz tests. Inputs: x [2, 3, 4] (positive values keep DIV finite), y [4]. Outputs: LAYER_NORM's out, mean,
/// rstd, then the mask ops' WHERE result [3, 2, 2].
inline PayloadBuilder all_ops_graph() {
  PayloadBuilder g;
  const uint32_t x = g.input({2, 3, 4}), y = g.input({4});
  const uint32_t c1 = g.constant({4, 5}, {0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f, 0.7f, -0.8f, 0.9f, 1.0f,
                                          -0.1f, 0.2f, -0.3f, 0.4f, 0.5f, 0.6f, -0.7f, 0.8f, 0.9f, -1.0f});
  const uint32_t c2 = g.constant({5}, {1.f, 2.f, 3.f, 4.f, 5.f});
  const uint32_t c3 = g.constant({5, 2}, {0.5f, -0.5f, 0.25f, 1.f, -1.f, 0.75f, 0.1f, 0.2f, 0.3f, 0.4f});
  const uint32_t c4 = g.constant({2, 2}, {1.f, 0.5f, 2.f, -1.f});
  auto t = [&](std::vector<int64_t> s) { return g.temp(std::move(s)); };
  const uint32_t t0 = t({2, 3, 4}), t1 = t({2, 3, 4}), t2 = t({2, 3, 4}), t3 = t({2, 3, 4});
  g.node(op_code("ADD"), {x, y}, {t0}, {Attr::f(0.5)});
  g.node(op_code("SUB"), {t0, y}, {t1}, {Attr::f(2.0)});
  g.node(op_code("MUL"), {t1, x}, {t2});
  g.node(op_code("DIV"), {t2, y}, {t3});
  uint32_t prev = t3;
  const uint16_t chain[] = {op_code("ADD_SCALAR"), op_code("MUL_SCALAR"), op_code("RELU"), op_code("GELU"), op_code("GELU"), op_code("SIGMOID"),
                      op_code("TANH"),      op_code("EXP"),       op_code("SQRT"), op_code("RSQRT"), op_code("NEG")};
  for (size_t i = 0; i < std::size(chain); ++i) {
    const uint32_t next = t({2, 3, 4});
    std::vector<Attr> attrs;
    if (chain[i] == op_code("ADD_SCALAR")) attrs = {Attr::f(1.5)};
    if (chain[i] == op_code("MUL_SCALAR")) attrs = {Attr::f(0.25)};
    if (chain[i] == op_code("GELU")) attrs = {Attr::i(i == 3 ? 0 : 1)};
    g.node(chain[i], {prev}, {next}, attrs);
    prev = next;
  }
  const uint32_t t15 = t({6, 4}), t16 = t({6, 5}), t17 = t({6, 5}), t18 = t({2, 3, 5}), t19 = t({3, 2, 5});
  const uint32_t t20 = t({3, 5, 2}), t21 = t({3, 2, 2}), t22 = t({3, 2, 2});
  g.node(op_code("COPY"), {prev}, {t15});
  g.node(op_code("MM"), {t15, c1}, {t16});  // never read: a value may be written and left unused
  g.node(op_code("ADDMM"), {c2, t15, c1}, {t17}, {Attr::f(0.5), Attr::f(2.0)});
  g.node(op_code("COPY"), {t17}, {t18});
  g.node(op_code("PERMUTE"), {t18}, {t19}, {Attr::i(1), Attr::i(0), Attr::i(2)});
  g.node(op_code("EXPAND"), {c3}, {t20});
  g.node(op_code("BMM"), {t19, t20}, {t21});
  g.node(op_code("SOFTMAX"), {t21}, {t22}, {Attr::i(1)});
  const uint32_t out = g.output({3, 2, 2}), mean = g.output({3, 1, 1}), rstd = g.output({3, 1, 1});
  const uint32_t masked = g.output({3, 2, 2});
  // The exporter's NaN guard on attention weights, plus a bool FULL and a bool COPY.
  const uint32_t sel = t({2, 2}), eq = g.as_bool(t({3, 2, 2})), ne = g.as_bool(t({3, 2, 2}));
  const uint32_t any = g.as_bool(t({3, 2, 1})), none = g.as_bool(t({3, 2, 1})), zeros = t({3, 2, 2});
  const uint32_t guarded = t({3, 2, 2}), ones = g.as_bool(t({2, 1})), flat = g.as_bool(t({6}));
  g.node(op_code("SELECT"), {t22}, {sel}, {Attr::i(0), Attr::i(2)});
  g.node(op_code("EQ_SCALAR"), {t22}, {eq}, {Attr::f(-INFINITY)});
  g.node(op_code("LOGICAL_NOT"), {eq}, {ne});
  g.node(op_code("ANY"), {ne}, {any}, {Attr::i(2), Attr::i(1)});
  g.node(op_code("LOGICAL_NOT"), {any}, {none});
  g.node(op_code("FULL"), {}, {zeros}, {Attr::f(0.0)});
  g.node(op_code("WHERE"), {none, zeros, t22}, {guarded});
  g.node(op_code("FULL"), {}, {ones}, {Attr::f(1.0)});
  g.node(op_code("COPY"), {none}, {flat});  // never read
  g.node(op_code("WHERE"), {ones, sel, guarded}, {masked});
  g.node(op_code("LAYER_NORM"), {t22, c4, kAbsent}, {out, mean, rstd}, {Attr::f(1e-5), Attr::i(2)});
  return g;
}

/// Deterministic values in [lo, hi) (an LCG), the same on every platform and compiler: test inputs for host and
/// device runs that must see identical data.
inline std::vector<float> random_values(int64_t n, uint32_t seed, float lo = -2.f, float hi = 2.f) {
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t s = seed * 2654435761u + 12345u;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = lo + (hi - lo) * static_cast<float>(s >> 8) / static_cast<float>(1u << 24);
  }
  return v;
}

}  // namespace etrt::cuda::test
