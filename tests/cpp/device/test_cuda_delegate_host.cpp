// The CUDA delegate's executor and BackendInterface run through HostOps on a host-emulated device: every op
// against a double-precision reference, layouts at the boundary, constants, scratch planning and argument checks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "etrt/backends/cuda/cuda_backend.h"
#include "etrt/backends/cuda/host_ops.h"
#include "etrt/device/host_emulated_device.h"
#include "payload_builder.h"

using namespace etrt;
using namespace etrt::cuda;
using etrt::cuda::test::Attr;
using etrt::cuda::test::PayloadBuilder;
using etrt::cuda::test::random_values;

namespace {

using Exec = GraphExecutor<HostOps>;
using Shape = std::vector<int64_t>;
constexpr Device kCuda0{DeviceType::CUDA, 0};

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t v : s) n *= v;
  return n;
}

/// Contiguous strides of `s`.
std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size());
  int64_t k = 1;
  for (size_t d = s.size(); d-- > 0;) {
    st[d] = k;
    k *= std::max<int64_t>(s[d], 1);
  }
  return st;
}

/// Coordinates of row-major element `i` of shape `s`.
std::vector<int64_t> coords(int64_t i, const Shape& s) {
  std::vector<int64_t> c(s.size());
  for (size_t d = s.size(); d-- > 0;) {
    c[d] = i % s[d];
    i /= s[d];
  }
  return c;
}

/// Element of `v` (contiguous over `s`) that broadcasts to coordinates `c` of a larger shape.
double at_broadcast(const std::vector<float>& v, const Shape& s, const std::vector<int64_t>& c) {
  const auto st = strides_of(s);
  int64_t off = 0;
  const size_t shift = c.size() - s.size();
  for (size_t d = 0; d < s.size(); ++d) off += (s[d] == 1 ? 0 : c[d + shift]) * st[d];
  return v[static_cast<size_t>(off)];
}

/// Memory of a tensor laid out by `order` holding `logical` (row-major) values.
std::vector<float> to_layout(const std::vector<float>& logical, const Shape& s, const std::vector<uint8_t>& order) {
  std::vector<int64_t> st(s.size());
  strides_from_dim_order(s, order, st);
  std::vector<float> mem(logical.size());
  for (int64_t i = 0; i < numel(s); ++i) {
    const auto c = coords(i, s);
    int64_t off = 0;
    for (size_t d = 0; d < s.size(); ++d) off += c[d] * st[d];
    mem[static_cast<size_t>(off)] = logical[static_cast<size_t>(i)];
  }
  return mem;
}

void check_close(const std::vector<float>& got, const std::vector<double>& want, double rtol = 1e-5,
                 double atol = 1e-6) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << ", want " << want[i]);
    if (std::isnan(want[i])) {
      CHECK(std::isnan(got[i]));
    } else {
      CHECK(std::abs(got[i] - want[i]) <= atol + rtol * std::abs(want[i]));
    }
  }
}

Tensor device_tensor(std::vector<float>& mem, const Shape& s, std::vector<uint8_t> order = {},
                     Device dev = kCuda0, ScalarType st = ScalarType::Float) {
  auto t = Tensor::make(st, s, order, mem.data(), ShapeDynamism::Static, dev);
  REQUIRE(t.has_value());
  return *t;
}

/// Builds the executor for `g` on `dev` (failing the test if it does not build).
std::unique_ptr<Exec> build(PayloadBuilder& g, const HostEmulatedDevice& dev) {
  const auto bytes = g.bytes();
  auto p = parse_payload(bytes);
  INFO((p ? std::string() : p.error().what));
  REQUIRE(p.has_value());
  auto e = Exec::create(std::move(*p), dev, 0);
  INFO((e ? std::string() : e.error().what));
  REQUIRE(e.has_value());
  return std::move(*e);
}

Tensor bool_tensor(std::vector<uint8_t>& mem, const Shape& s, std::vector<uint8_t> order = {}) {
  auto t = Tensor::make(ScalarType::Bool, s, order, mem.data(), ShapeDynamism::Static, kCuda0);
  REQUIRE(t.has_value());
  return *t;
}

/// Runs `g` over contiguous arguments: `inputs` in order; returns the outputs (row-major). Bool arguments are
/// passed as bytes (the float's value cast to a byte, so 2 or 255 test "nonzero is true") and come back as 0/1
/// floats (an unwritten byte reads 0xAB).
std::vector<std::vector<float>> run(PayloadBuilder& g, std::vector<std::vector<float>> inputs) {
  HostEmulatedDevice dev;
  auto exec = build(g, dev);
  std::vector<std::vector<float>> outputs;
  for (uint32_t id : g.outputs) outputs.emplace_back(static_cast<size_t>(numel(g.values[id].sizes)), -777.f);
  std::vector<std::vector<uint8_t>> bytes(g.inputs.size() + g.outputs.size());
  std::vector<EValue> args;
  const auto add = [&](size_t slot, uint32_t id, std::vector<float>& mem, bool is_input) {
    const auto& v = g.values[id];
    if (v.dtype != 11) {
      args.emplace_back(device_tensor(mem, v.sizes));
      return;
    }
    auto& b = bytes[slot];
    b.assign(mem.size(), 0xAB);
    if (is_input)
      for (size_t k = 0; k < mem.size(); ++k) b[k] = static_cast<uint8_t>(mem[k]);
    args.emplace_back(bool_tensor(b, v.sizes));
  };
  for (size_t i = 0; i < g.inputs.size(); ++i) add(i, g.inputs[i], inputs[i], true);
  for (size_t i = 0; i < g.outputs.size(); ++i) add(g.inputs.size() + i, g.outputs[i], outputs[i], false);
  std::vector<EValue*> ptrs;
  for (auto& a : args) ptrs.push_back(&a);
  auto s = exec->execute(ptrs);
  INFO((s ? std::string() : s.error().what));
  REQUIRE(s.has_value());
  for (size_t i = 0; i < g.outputs.size(); ++i)
    if (g.values[g.outputs[i]].dtype == 11)
      for (size_t k = 0; k < outputs[i].size(); ++k) outputs[i][k] = bytes[g.inputs.size() + i][k];
  return outputs;
}

double ref_unary(uint16_t op, int64_t approximate, double s, double x) {
  switch (op) {
    case op_code("RELU"): return x < 0 ? 0 : x;
    case op_code("GELU"):
      return approximate ? 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)))
                         : 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case op_code("SIGMOID"): return 1 / (1 + std::exp(-x));
    case op_code("TANH"): return std::tanh(x);
    case op_code("EXP"): return std::exp(x);
    case op_code("NEG"): return -x;
    case op_code("SQRT"): return std::sqrt(x);
    case op_code("RSQRT"): return 1 / std::sqrt(x);
    case op_code("ADD_SCALAR"): return x + s;
    case op_code("MUL_SCALAR"): return x * s;
    default: FAIL("not unary"); return 0;
  }
}

}  // namespace

TEST_CASE("CUDA delegate (host ops): unary ops", "[cuda][delegate]") {
  struct Case {
    uint16_t op;
    int64_t approximate;
    double s;
  };
  const Case cases[] = {{op_code("RELU"), 0, 0},  {op_code("GELU"), 0, 0}, {op_code("GELU"), 1, 0},      {op_code("SIGMOID"), 0, 0},
                        {op_code("TANH"), 0, 0},  {op_code("EXP"), 0, 0},  {op_code("NEG"), 0, 0},       {op_code("SQRT"), 0, 0},
                        {op_code("RSQRT"), 0, 0}, {op_code("ADD_SCALAR"), 0, -1.25}, {op_code("MUL_SCALAR"), 0, 0.125}};
  for (const Case& c : cases) {
    INFO(op_name(c.op) << " approximate " << c.approximate);
    PayloadBuilder g;
    const Shape s{3, 5, 7};
    const uint32_t x = g.input(s), o = g.output(s);
    std::vector<Attr> attrs;
    if (c.op == op_code("GELU")) attrs = {Attr::i(c.approximate)};
    if (c.op == op_code("ADD_SCALAR") || c.op == op_code("MUL_SCALAR")) attrs = {Attr::f(c.s)};
    g.node(c.op, {x}, {o}, attrs);
    const bool positive = c.op == op_code("SQRT") || c.op == op_code("RSQRT");
    auto in = random_values(numel(s), 1, positive ? 0.05f : -4.f, 4.f);
    const auto out = run(g, {in});
    std::vector<double> want;
    for (float v : in) want.push_back(ref_unary(c.op, c.approximate, c.s, v));
    check_close(out[0], want);
  }
}

TEST_CASE("CUDA delegate (host ops): binary ops with broadcasting", "[cuda][delegate]") {
  struct Case {
    Shape a, b, out;
  };
  const Case shapes[] = {{{2, 3, 4}, {2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {4}, {2, 3, 4}}, {{2, 1, 4}, {3, 1}, {2, 3, 4}},
                         {{}, {2, 3}, {2, 3}},              {{5, 1, 1}, {1, 6, 1}, {5, 6, 1}}, {{1}, {}, {1}}};
  for (uint16_t op : {op_code("ADD"), op_code("SUB"), op_code("MUL"), op_code("DIV")})
    for (const Case& c : shapes) {
      INFO(op_name(op) << " " << shape_str(c.a) << " x " << shape_str(c.b));
      PayloadBuilder g;
      const uint32_t a = g.input(c.a), b = g.input(c.b), o = g.output(c.out);
      const double alpha = op == op_code("SUB") ? -0.75 : 2.5;
      std::vector<Attr> attrs;
      if (op == op_code("ADD") || op == op_code("SUB")) attrs = {Attr::f(alpha)};
      g.node(op, {a, b}, {o}, attrs);
      auto va = random_values(numel(c.a), 2), vb = random_values(numel(c.b), 3, 0.5f, 3.f);
      const auto out = run(g, {va, vb});
      std::vector<double> want;
      for (int64_t i = 0; i < numel(c.out); ++i) {
        const auto co = coords(i, c.out);
        const double x = at_broadcast(va, c.a, co), y = at_broadcast(vb, c.b, co);
        want.push_back(op == op_code("ADD") ? x + alpha * y : op == op_code("SUB") ? x - alpha * y : op == op_code("MUL") ? x * y : x / y);
      }
      check_close(out[0], want);
    }
}

namespace {
std::vector<double> ref_matmul(const std::vector<float>& a, const std::vector<float>& b, int64_t batch, int64_t m,
                               int64_t n, int64_t k) {
  std::vector<double> c(static_cast<size_t>(batch * m * n), 0.0);
  for (int64_t z = 0; z < batch; ++z)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += double(a[z * m * k + i * k + p]) * b[z * k * n + p * n + j];
        c[z * m * n + i * n + j] = s;
      }
  return c;
}
}  // namespace

TEST_CASE("CUDA delegate (host ops): MM, BMM, ADDMM", "[cuda][delegate]") {
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{2, 3, 4}, {33, 47, 29}, {1, 1, 1}, {64, 8, 128}}) {
    INFO("m " << m << " n " << n << " k " << k);
    {
      PayloadBuilder g;
      const uint32_t a = g.input({m, k}), b = g.input({k, n}), o = g.output({m, n});
      g.node(op_code("MM"), {a, b}, {o});
      auto va = random_values(m * k, 4), vb = random_values(k * n, 5);
      check_close(run(g, {va, vb})[0], ref_matmul(va, vb, 1, m, n, k), 1e-4, 1e-4);
    }
    {
      PayloadBuilder g;
      const int64_t batch = 3;
      const uint32_t a = g.input({batch, m, k}), b = g.input({batch, k, n}), o = g.output({batch, m, n});
      g.node(op_code("BMM"), {a, b}, {o});
      auto va = random_values(batch * m * k, 6), vb = random_values(batch * k * n, 7);
      check_close(run(g, {va, vb})[0], ref_matmul(va, vb, batch, m, n, k), 1e-4, 1e-4);
    }
    for (const Shape& bias : {Shape{n}, Shape{m, 1}, Shape{m, n}, Shape{}, Shape{1, n}}) {
      INFO("bias " << shape_str(bias));
      PayloadBuilder g;
      const uint32_t c = g.input(bias), a = g.input({m, k}), b = g.input({k, n}), o = g.output({m, n});
      const double beta = 0.5, alpha = -1.5;
      g.node(op_code("ADDMM"), {c, a, b}, {o}, {Attr::f(beta), Attr::f(alpha)});
      auto vc = random_values(numel(bias), 8), va = random_values(m * k, 9), vb = random_values(k * n, 10);
      auto want = ref_matmul(va, vb, 1, m, n, k);
      for (int64_t i = 0; i < m * n; ++i)
        want[i] = alpha * want[i] + beta * at_broadcast(vc, bias, coords(i, {m, n}));
      check_close(run(g, {vc, va, vb})[0], want, 1e-4, 1e-4);
    }
  }
  SECTION("beta 0 ignores the bias, NaN included") {
    PayloadBuilder g;
    const uint32_t c = g.input({2}), a = g.input({2, 2}), b = g.input({2, 2}), o = g.output({2, 2});
    g.node(op_code("ADDMM"), {c, a, b}, {o}, {Attr::f(0.0), Attr::f(1.0)});
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const auto out = run(g, {{nan, nan}, {1, 2, 3, 4}, {1, 0, 0, 1}});
    check_close(out[0], {1, 2, 3, 4});
  }
  SECTION("K = 0 gives zeros (MM) and beta * bias (ADDMM)") {
    PayloadBuilder g;
    const uint32_t a = g.input({2, 0}), b = g.input({0, 3}), c = g.input({3});
    const uint32_t o = g.output({2, 3}), o2 = g.output({2, 3});
    g.node(op_code("MM"), {a, b}, {o});
    g.node(op_code("ADDMM"), {c, a, b}, {o2}, {Attr::f(2.0), Attr::f(1.0)});
    const auto out = run(g, {{}, {}, {1, 2, 3}});
    check_close(out[0], {0, 0, 0, 0, 0, 0});
    check_close(out[1], {2, 4, 6, 2, 4, 6});
  }
}

TEST_CASE("CUDA delegate (host ops): SOFTMAX over every dim", "[cuda][delegate]") {
  const Shape s{3, 4, 5};
  for (int64_t dim = 0; dim < 3; ++dim) {
    INFO("dim " << dim);
    PayloadBuilder g;
    const uint32_t x = g.input(s), o = g.output(s);
    g.node(op_code("SOFTMAX"), {x}, {o}, {Attr::i(dim)});
    auto in = random_values(numel(s), 11, -30.f, 30.f);  // large logits: needs the max subtraction
    const auto out = run(g, {in});
    std::vector<double> want(in.size());
    const auto st = strides_of(s);
    for (int64_t i = 0; i < numel(s); ++i) {
      auto c = coords(i, s);
      double mx = -INFINITY, sum = 0;
      for (int64_t k = 0; k < s[dim]; ++k) {
        c[dim] = k;
        int64_t off = 0;
        for (size_t d = 0; d < 3; ++d) off += c[d] * st[d];
        mx = std::max<double>(mx, in[off]);
      }
      for (int64_t k = 0; k < s[dim]; ++k) {
        c[dim] = k;
        int64_t off = 0;
        for (size_t d = 0; d < 3; ++d) off += c[d] * st[d];
        sum += std::exp(double(in[off]) - mx);
      }
      want[i] = std::exp(double(in[i]) - mx) / sum;
    }
    check_close(out[0], want, 1e-5, 1e-7);
  }
  SECTION("rank 0") {
    PayloadBuilder g;
    const uint32_t x = g.input({}), o = g.output({});
    g.node(op_code("SOFTMAX"), {x}, {o}, {Attr::i(0)});
    check_close(run(g, {{3.5f}})[0], {1.0});
  }
}

TEST_CASE("CUDA delegate (host ops): LAYER_NORM with and without weight and bias", "[cuda][delegate]") {
  const Shape s{2, 3, 8};
  for (int64_t nd : {1, 2}) {
    for (int present = 0; present < 4; ++present) {
      const bool has_w = present & 1, has_b = present & 2;
      INFO("normalized_ndim " << nd << " weight " << has_w << " bias " << has_b);
      const Shape norm(s.end() - nd, s.end());
      Shape stat = s;
      for (int64_t d = 3 - nd; d < 3; ++d) stat[d] = 1;
      PayloadBuilder g;
      const uint32_t x = g.input(s);
      const uint32_t w = has_w ? g.input(norm) : kAbsent, b = has_b ? g.input(norm) : kAbsent;
      const uint32_t o = g.output(s), mean = g.output(stat), rstd = g.output(stat);
      const double eps = 1e-3;
      g.node(op_code("LAYER_NORM"), {x, w, b}, {o, mean, rstd}, {Attr::f(eps), Attr::i(nd)});
      auto vx = random_values(numel(s), 12, 5.f, 9.f);  // a large mean: a one-pass variance would cancel
      auto vw = random_values(numel(norm), 13), vb = random_values(numel(norm), 14);
      std::vector<std::vector<float>> inputs{vx};
      if (has_w) inputs.push_back(vw);
      if (has_b) inputs.push_back(vb);
      const auto out = run(g, inputs);
      const int64_t cols = numel(norm), rows = numel(s) / cols;
      std::vector<double> wy, wm, wr;
      for (int64_t r = 0; r < rows; ++r) {
        double mu = 0, var = 0;
        for (int64_t k = 0; k < cols; ++k) mu += vx[r * cols + k];
        mu /= double(cols);
        for (int64_t k = 0; k < cols; ++k) var += (vx[r * cols + k] - mu) * (vx[r * cols + k] - mu);
        var /= double(cols);
        const double rs = 1 / std::sqrt(var + eps);
        for (int64_t k = 0; k < cols; ++k)
          wy.push_back((vx[r * cols + k] - mu) * rs * (has_w ? vw[k] : 1.0) + (has_b ? vb[k] : 0.0));
        wm.push_back(mu);
        wr.push_back(rs);
      }
      check_close(out[0], wy, 1e-4, 1e-5);
      check_close(out[1], wm, 1e-5, 1e-6);
      check_close(out[2], wr, 1e-4, 1e-6);
    }
  }
}

TEST_CASE("CUDA delegate (host ops): COPY, PERMUTE, EXPAND", "[cuda][delegate]") {
  {
    PayloadBuilder g;
    const uint32_t x = g.input({2, 6}), o = g.output({3, 1, 4});
    g.node(op_code("COPY"), {x}, {o});
    auto in = random_values(12, 15);
    check_close(run(g, {in})[0], std::vector<double>(in.begin(), in.end()));
  }
  {
    const Shape s{2, 3, 4, 5};
    const std::vector<int64_t> perm{2, 0, 3, 1};
    Shape os;
    for (int64_t p : perm) os.push_back(s[p]);
    PayloadBuilder g;
    const uint32_t x = g.input(s), o = g.output(os);
    std::vector<Attr> attrs;
    for (int64_t p : perm) attrs.push_back(Attr::i(p));
    g.node(op_code("PERMUTE"), {x}, {o}, attrs);
    auto in = random_values(numel(s), 16);
    std::vector<double> want;
    const auto st = strides_of(s);
    for (int64_t i = 0; i < numel(os); ++i) {
      const auto c = coords(i, os);
      int64_t off = 0;
      for (size_t d = 0; d < 4; ++d) off += c[d] * st[perm[d]];
      want.push_back(in[off]);
    }
    check_close(run(g, {in})[0], want);
  }
  {
    const Shape s{3, 1}, os{2, 3, 4};
    PayloadBuilder g;
    const uint32_t x = g.input(s), o = g.output(os);
    g.node(op_code("EXPAND"), {x}, {o});
    auto in = random_values(3, 17);
    std::vector<double> want;
    for (int64_t i = 0; i < numel(os); ++i) want.push_back(at_broadcast(in, s, coords(i, os)));
    check_close(run(g, {in})[0], want);
  }
}

TEST_CASE("CUDA delegate (host ops): constants are uploaded once and used", "[cuda][delegate]") {
  PayloadBuilder g;
  const uint32_t x = g.input({2, 3});
  const uint32_t w = g.constant({3, 2}, {1, 2, 3, 4, 5, 6}), b = g.constant({2}, {0.5f, -0.5f});
  const uint32_t o = g.output({2, 2});
  g.node(op_code("ADDMM"), {b, x, w}, {o}, {Attr::f(1.0), Attr::f(1.0)});
  HostEmulatedDevice dev;
  auto exec = build(g, dev);
  CHECK(dev.copies[static_cast<int>(CopyKind::HostToDevice)] == 1);
  CHECK(exec->constant_bytes() == 64 + 8);  // the second constant starts 64-aligned
  std::vector<float> in{1, 0, 0, 0, 1, 1}, out(4);
  EValue a0(device_tensor(in, {2, 3})), a1(device_tensor(out, {2, 2}));
  EValue* args[] = {&a0, &a1};
  for (int rep = 0; rep < 2; ++rep) {
    REQUIRE(exec->execute(args).has_value());
    check_close(out, {1.5, 1.5, 8.5, 9.5});
  }
  CHECK(dev.copies[static_cast<int>(CopyKind::HostToDevice)] == 1);
}

TEST_CASE("CUDA delegate (host ops): channels-last arguments are converted at the boundary", "[cuda][delegate]") {
  const Shape s{2, 3, 4, 5};
  const std::vector<uint8_t> cl{0, 2, 3, 1};
  PayloadBuilder g;
  const uint32_t x = g.input(s, cl), y = g.input({5});
  const uint32_t o = g.output(s, cl), o2 = g.output(s);
  const uint32_t t = g.temp(s);
  g.node(op_code("ADD"), {x, y}, {t}, {Attr::f(1.0)});
  g.node(op_code("RELU"), {t}, {o});
  g.node(op_code("NEG"), {t}, {o2});
  HostEmulatedDevice dev;
  auto exec = build(g, dev);
  // The channels-last input and output are staged in scratch; the contiguous ones are used in place.
  CHECK(exec->scratch_offset(x) >= 0);
  CHECK(exec->scratch_offset(o) >= 0);
  CHECK(exec->scratch_offset(o2) == -1);
  CHECK(exec->scratch_offset(y) == -1);
  const auto logical = random_values(numel(s), 18);
  const auto vy = random_values(5, 19);
  auto in_mem = to_layout(logical, s, cl), y_mem = vy;
  std::vector<float> out_mem(logical.size(), -1.f), out2(logical.size(), -1.f);
  EValue a0(device_tensor(in_mem, s, cl)), a1(device_tensor(y_mem, {5})), a2(device_tensor(out_mem, s, cl)),
      a3(device_tensor(out2, s));
  EValue* args[] = {&a0, &a1, &a2, &a3};
  auto st = exec->execute(args);
  INFO((st ? std::string() : st.error().what));
  REQUIRE(st.has_value());
  std::vector<float> want_logical, want_neg;
  for (int64_t i = 0; i < numel(s); ++i) {
    const float v = logical[i] + vy[i % 5];
    want_logical.push_back(v < 0 ? 0.f : v);
    want_neg.push_back(-v);
  }
  const auto want_mem = to_layout(want_logical, s, cl);
  check_close(out_mem, std::vector<double>(want_mem.begin(), want_mem.end()));
  check_close(out2, std::vector<double>(want_neg.begin(), want_neg.end()));

  SECTION("a layout that differs from the payload's is rejected") {
    std::vector<float> plain(logical.size());
    EValue bad(device_tensor(plain, s));
    EValue* args2[] = {&bad, &a1, &a2, &a3};
    auto r = exec->execute(args2);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == Error::InvalidArgument);
    CHECK(r.error().what.find("argument 0 (input 0, value 0) has dim_order [0, 1, 2, 3], whose layout differs "
                              "from the payload's dim_order [0, 2, 3, 1]") != std::string::npos);
  }
}

TEST_CASE("CUDA delegate (host ops): channels-last with unit spatial sizes needs no conversion", "[cuda][delegate]") {
  PayloadBuilder g;
  const Shape s{2, 3, 1, 1};
  const uint32_t x = g.input(s, {0, 2, 3, 1}), o = g.output(s, {0, 2, 3, 1});
  g.node(op_code("SIGMOID"), {x}, {o});
  HostEmulatedDevice dev;
  auto exec = build(g, dev);
  CHECK(exec->scratch_bytes() == 0);
  // A contiguous argument has the same memory layout here, so it is accepted too.
  std::vector<float> in{0, 1, 2, 3, 4, 5}, out(6);
  EValue a0(device_tensor(in, s)), a1(device_tensor(out, s, {0, 2, 3, 1}));
  EValue* args[] = {&a0, &a1};
  REQUIRE(exec->execute(args).has_value());
  CHECK(out[5] == Approx(1 / (1 + std::exp(-5.0))));
}

TEST_CASE("CUDA delegate (host ops): scratch is reused by liveness", "[cuda][delegate]") {
  SECTION("plan_scratch") {
    // a [0, 1], b [1, 2], c [2, 3] (a is dead by then), d [0, 3] long-lived.
    const LiveRange r[] = {{0, 1, 100}, {1, 2, 300}, {2, 3, 256}, {0, 3, 10}};
    size_t total = 0;
    auto planned = plan_scratch(r, total);
    REQUIRE(planned.has_value());
    const auto& off = *planned;
    CHECK(off[0] == 0);
    CHECK(off[3] == 256);
    CHECK(off[1] == 512);
    CHECK(off[2] == 0);  // a's block is free again at time 2
    CHECK(total == 512 + 512);
    for (size_t o : off) CHECK(o % kScratchAlign == 0);
  }
  SECTION("sizes that would overflow are refused") {
    std::vector<LiveRange> huge(80, LiveRange{0, 5, size_t{1} << 58});
    size_t total = 0;
    auto planned = plan_scratch(huge, total);
    REQUIRE_FALSE(planned.has_value());
    CHECK(planned.error().what.find("more than 2^62 bytes") != std::string::npos);
    // The same through a payload: channels-last outputs live in scratch until the end.
    PayloadBuilder g;
    const uint32_t x = g.input({1, 1});
    for (int i = 0; i < 80; ++i) {
      const uint32_t o = g.output({int64_t{1} << 28, int64_t{1} << 28}, {1, 0});
      g.node(op_code("EXPAND"), {x}, {o});
    }
    const auto bytes = g.bytes();
    auto p = parse_payload(bytes);
    REQUIRE(p.has_value());
    HostEmulatedDevice dev;
    auto e = Exec::create(std::move(*p), dev, 0);
    REQUIRE_FALSE(e.has_value());
    CHECK(e.error().code == Error::MemoryAllocationFailed);
  }
  SECTION("a chain of unary ops uses two blocks") {
    PayloadBuilder g;
    const Shape s{64};  // 256 bytes
    uint32_t prev = g.input(s);
    std::vector<uint32_t> temps;
    for (int i = 0; i < 6; ++i) {
      const uint32_t t = g.temp(s);
      g.node(i % 2 ? op_code("NEG") : op_code("ADD_SCALAR"), {prev}, {t}, i % 2 ? std::vector<Attr>{} : std::vector<Attr>{Attr::f(1.0)});
      temps.push_back(t);
      prev = t;
    }
    const uint32_t o = g.output(s);
    g.node(op_code("RELU"), {prev}, {o});
    HostEmulatedDevice dev;
    auto exec = build(g, dev);
    CHECK(exec->scratch_bytes() == 512);
    for (size_t i = 1; i < temps.size(); ++i)
      CHECK(exec->scratch_offset(temps[i]) != exec->scratch_offset(temps[i - 1]));
    auto in = random_values(64, 20);
    const auto out = run(g, {in});
    std::vector<double> want;
    for (float v : in) want.push_back(std::max(0.0, -(-(-(double(v) + 1) + 1) + 1)));
    check_close(out[0], want);
  }
  SECTION("outputs of one node never share memory") {
    PayloadBuilder g;
    const uint32_t x = g.input({4, 8});
    const uint32_t y = g.temp({4, 8}), m = g.temp({4, 1}), r = g.temp({4, 1}), o = g.output({4, 8});
    g.node(op_code("LAYER_NORM"), {x, kAbsent, kAbsent}, {y, m, r}, {Attr::f(1e-5), Attr::i(1)});
    g.node(op_code("MUL"), {y, r}, {o});
    HostEmulatedDevice dev;
    auto exec = build(g, dev);
    CHECK(exec->scratch_offset(y) != exec->scratch_offset(m));
    CHECK(exec->scratch_offset(m) != exec->scratch_offset(r));
    CHECK(exec->scratch_offset(y) != exec->scratch_offset(r));
  }
}

TEST_CASE("CUDA delegate (host ops): the all-ops graph runs", "[cuda][delegate]") {
  auto g = test::all_ops_graph();
  auto out = run(g, {random_values(24, 21, 0.5f, 2.f), random_values(4, 22, 0.5f, 2.f)});
  for (float v : out[2]) CHECK(v > 0.f);  // rstd
  for (const auto& o : out)
    for (float v : o) CHECK(std::isfinite(v));
}

TEST_CASE("CUDA delegate (host ops): empty tensors", "[cuda][delegate]") {
  PayloadBuilder g;
  const uint32_t x = g.input({0, 3}), o = g.output({0, 3}), y = g.input({3}), o2 = g.output({0, 3});
  g.node(op_code("GELU"), {x}, {o}, {Attr::i(0)});
  g.node(op_code("ADD"), {x, y}, {o2}, {Attr::f(1.0)});
  const auto out = run(g, {{}, {1, 2, 3}});
  CHECK(out[0].empty());
  CHECK(out[1].empty());
}

TEST_CASE("CUDA delegate (host ops): arguments are checked", "[cuda][delegate]") {
  PayloadBuilder g;
  const uint32_t x = g.input({2, 3}), o = g.output({2, 3});
  g.node(op_code("RELU"), {x}, {o});
  HostEmulatedDevice dev(DeviceType::CUDA, 2);
  auto exec = build(g, dev);
  std::vector<float> in(6, 1.f), out(6);
  EValue good_in(device_tensor(in, {2, 3})), good_out(device_tensor(out, {2, 3}));
  const auto expect = [&](EValue* a0, EValue* a1, std::string_view msg) {
    EValue* args[] = {a0, a1};
    auto s = exec->execute(args);
    REQUIRE_FALSE(s.has_value());
    INFO(s.error().what);
    CHECK(s.error().code == Error::InvalidArgument);
    CHECK(s.error().what.find(msg) != std::string::npos);
  };
  {
    EValue* one[] = {&good_in};
    auto s = exec->execute(one);
    REQUIRE_FALSE(s.has_value());
    CHECK(s.error().what.find("got 1 arguments, expected 1 inputs + 1 outputs") != std::string::npos);
  }
  EValue an_int(int64_t{3});
  expect(&an_int, &good_out, "argument 0 (input 0, value 0) is Int, expected a float32 tensor");
  std::vector<int64_t> ints(6);
  auto ti = Tensor::make(ScalarType::Long, std::vector<int64_t>{2, 3}, {}, ints.data(), ShapeDynamism::Static, kCuda0);
  EValue long_in(*ti);
  expect(&long_in, &good_out, "argument 0 (input 0, value 0) has dtype int64, expected float32");
  std::vector<float> small(3);
  EValue wrong_size(device_tensor(small, {3}));
  expect(&good_in, &wrong_size, "argument 1 (output 0, value 1) has sizes [3], expected [2, 3]");
  EValue on_cpu(device_tensor(in, {2, 3}, {}, Device{}));
  expect(&on_cpu, &good_out, "argument 0 (input 0, value 0) is on cpu, expected cuda:0");
  EValue on_cuda1(device_tensor(in, {2, 3}, {}, Device{DeviceType::CUDA, 1}));
  expect(&on_cuda1, &good_out, "is on cuda:1, expected cuda:0");
  auto tn = Tensor::make(ScalarType::Float, std::vector<int64_t>{2, 3}, {}, nullptr, ShapeDynamism::Static, kCuda0);
  EValue null_data(*tn);
  expect(&good_in, &null_data, "argument 1 (output 0, value 1) has no data");
  expect(nullptr, &good_out, "argument 0 (input 0, value 0) is missing");
  // A failed call leaves the executor usable.
  EValue* args[] = {&good_in, &good_out};
  REQUIRE(exec->execute(args).has_value());
  CHECK(out[0] == 1.f);
}

TEST_CASE("CUDA delegate (host ops): BackendInterface init and execute", "[cuda][delegate]") {
  CHECK(kCudaBackendId == "EtrtCudaBackend");
  PayloadBuilder g;
  const uint32_t x = g.input({3}), o = g.output({3});
  g.node(op_code("EXP"), {x}, {o});
  const auto bytes = g.bytes();
  const auto spec = [](std::string_view v) {
    return CompileSpec{"target_device", {reinterpret_cast<const uint8_t*>(v.data()), v.size()}};
  };
  HostEmulatedDevice dev(DeviceType::CUDA, 2);
  const CudaDelegate<HostOps> delegate(dev);
  CHECK(delegate.is_available());
  {
    auto h = delegate.init(bytes, {});
    REQUIRE(h.has_value());
    std::vector<float> in{0, 1, 2}, out(3);
    EValue a0(device_tensor(in, {3})), a1(device_tensor(out, {3}));
    EValue* args[] = {&a0, &a1};
    REQUIRE(delegate.execute(h->get(), args).has_value());
    CHECK(out[1] == Approx(std::exp(1.0)));
  }
  {
    const CompileSpec specs[] = {CompileSpec{"other", {}}, spec("cuda:1")};
    auto h = delegate.init(bytes, specs);
    REQUIRE(h.has_value());
    std::vector<float> in{0, 1, 2}, out(3);
    EValue a0(device_tensor(in, {3}, {}, Device{DeviceType::CUDA, 1})),
        a1(device_tensor(out, {3}, {}, Device{DeviceType::CUDA, 1}));
    EValue* args[] = {&a0, &a1};
    REQUIRE(delegate.execute(h->get(), args).has_value());
    EValue b0(device_tensor(in, {3})), b1(device_tensor(out, {3}));
    EValue* wrong[] = {&b0, &b1};
    CHECK_FALSE(delegate.execute(h->get(), wrong).has_value());
  }
  const auto init_fails = [&](const CudaDelegate<HostOps>& d, std::string_view target, Error code,
                              std::string_view msg) {
    const CompileSpec specs[] = {spec(target)};
    auto h = d.init(bytes, specs);
    REQUIRE_FALSE(h.has_value());
    INFO(h.error().what);
    CHECK(h.error().code == code);
    CHECK(h.error().what.find(msg) != std::string::npos);
  };
  CHECK(delegate.init(bytes, std::array{spec("cuda")}).has_value());
  init_fails(delegate, "cuda:2", Error::NotFound, "target_device is cuda:2 but only 2 CUDA devices are present");
  init_fails(delegate, "cpu", Error::NotSupported, "names device type 'cpu'; this delegate runs on cuda only");
  init_fails(delegate, "mps:0", Error::NotSupported, "device type 'mps'");
  init_fails(delegate, "cuda:x", Error::InvalidProgram, "is not 'cuda:N' with N in 0..127");
  init_fails(delegate, "cuda:", Error::InvalidProgram, "is not 'cuda:N'");
  init_fails(delegate, "cuda:1000", Error::InvalidProgram, "is not 'cuda:N'");
  // Corrupt files reach this too: long digit runs, signs and trailing bytes are refused without overflow.
  init_fails(delegate, "cuda:99999999999999999999999", Error::InvalidProgram, "is not 'cuda:N'");
  init_fails(delegate, "cuda:-1", Error::InvalidProgram, "is not 'cuda:N'");
  init_fails(delegate, "cuda:1x", Error::InvalidProgram, "is not 'cuda:N'");
  init_fails(delegate, "cuda:+1", Error::InvalidProgram, "is not 'cuda:N'");
  {
    auto bad = bytes;
    bad[0] = 'X';
    auto h = delegate.init(bad, {});
    REQUIRE_FALSE(h.has_value());
    CHECK(h.error().what.find("bad magic") != std::string::npos);
  }
  CHECK(delegate.execute(nullptr, {}).error().code == Error::DelegateInvalidHandle);

  HostEmulatedDevice none(DeviceType::CUDA, 0);
  const CudaDelegate<HostOps> absent(none);
  CHECK_FALSE(absent.is_available());
  init_fails(absent, "cuda:0", Error::NotFound, "no CUDA device is present");
  HostEmulatedDevice cpu(DeviceType::CPU, 1);
  const CudaDelegate<HostOps> wrong_type(cpu);
  CHECK_FALSE(wrong_type.is_available());
  init_fails(wrong_type, "cuda:0", Error::NotSupported, "not a CUDA device");
  // Handles release their device memory.
  CHECK(dev.live_allocations == 0);
}

TEST_CASE("CUDA delegate (host ops): corrupt payloads that parse still run safely", "[cuda][delegate]") {
  auto g = test::all_ops_graph();
  const auto ok = g.bytes();
  uint64_t state = 0x243f6a8885a308d3ull;
  const auto next = [&] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  HostEmulatedDevice dev;
  int ran = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    auto b = ok;
    b[next() % b.size()] ^= static_cast<uint8_t>(1u << (next() % 8));
    auto p = parse_payload(b);
    if (!p) continue;
    int64_t total = 0;
    bool small = true;
    for (const auto& v : p->values) {
      total += v.numel;
      small = small && v.numel < (1 << 16);
    }
    if (!small || total > (1 << 20)) continue;
    const Payload copy_for_args = *p;  // sizes for the arguments
    auto e = Exec::create(std::move(*p), dev, 0);
    if (!e) continue;
    std::vector<std::vector<float>> mem;
    std::vector<EValue> args;
    const auto add = [&](uint32_t id) {
      const ValueDesc& v = copy_for_args.values[id];
      mem.emplace_back(static_cast<size_t>(v.numel), 0.5f);
      Shape s(v.shape().begin(), v.shape().end());
      args.emplace_back(device_tensor(mem.back(), s, std::vector<uint8_t>(v.order().begin(), v.order().end()), kCuda0,
                                      v.dtype));
    };
    mem.reserve(copy_for_args.inputs.size() + copy_for_args.outputs.size());
    for (uint32_t id : copy_for_args.inputs) add(id);  // (bool ones read the float bytes: nonzero is true)
    for (uint32_t id : copy_for_args.outputs) add(id);
    std::vector<EValue*> ptrs;
    for (auto& a : args) ptrs.push_back(&a);
    if ((*e)->execute(ptrs)) ++ran;
  }
  CHECK(ran > 0);
  CHECK(dev.live_allocations == 0);
}

TEST_CASE("CUDA delegate (host ops): SELECT every dim and index", "[cuda][delegate]") {
  const Shape s{3, 4, 5};
  const auto in = random_values(numel(s), 23);
  const auto st = strides_of(s);
  for (int64_t dim = 0; dim < 3; ++dim)
    for (int64_t index : {int64_t{0}, s[dim] - 1, s[dim] / 2}) {
      INFO("dim " << dim << " index " << index);
      Shape os;
      for (int64_t d = 0; d < 3; ++d)
        if (d != dim) os.push_back(s[d]);
      PayloadBuilder g;
      const uint32_t x = g.input(s), o = g.output(os);
      g.node(op_code("SELECT"), {x}, {o}, {Attr::i(dim), Attr::i(index)});
      std::vector<double> want;
      for (int64_t i = 0; i < numel(os); ++i) {
        auto c = coords(i, os);
        c.insert(c.begin() + dim, index);
        int64_t off = 0;
        for (size_t d = 0; d < 3; ++d) off += c[d] * st[d];
        want.push_back(in[off]);
      }
      check_close(run(g, {in})[0], want);
    }
  SECTION("rank 1 to rank 0") {
    PayloadBuilder g;
    const uint32_t x = g.input({4}), o = g.output({});
    g.node(op_code("SELECT"), {x}, {o}, {Attr::i(0), Attr::i(3)});
    check_close(run(g, {{1, 2, 3, 4}})[0], {4});
  }
}

TEST_CASE("CUDA delegate (host ops): EQ_SCALAR, LOGICAL_NOT and FULL", "[cuda][delegate]") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x{-inf, inf, nan, 0.f, -0.f, 1.5f, -1.5f, 1.f + 1e-7f};
  const Shape s{2, 4};
  for (double scalar : std::initializer_list<double>{-INFINITY, INFINITY, 0.0, 1.5, NAN, 1.0 + 1e-9}) {
    INFO("s " << scalar);
    PayloadBuilder g;
    const uint32_t a = g.input(s), eq = g.as_bool(g.output(s)), ne = g.as_bool(g.output(s));
    g.node(op_code("EQ_SCALAR"), {a}, {eq}, {Attr::f(scalar)});
    g.node(op_code("LOGICAL_NOT"), {eq}, {ne});
    const auto out = run(g, {x});
    std::vector<double> want_eq, want_ne;
    const float sf = static_cast<float>(scalar);  // torch compares a float tensor with the scalar in float
    for (float v : x) {
      want_eq.push_back(v == sf ? 1 : 0);
      want_ne.push_back(v == sf ? 0 : 1);
    }
    check_close(out[0], want_eq, 0, 0);
    check_close(out[1], want_ne, 0, 0);
  }
  SECTION("LOGICAL_NOT reads any nonzero byte as true and writes 0 or 1") {
    PayloadBuilder g;
    const uint32_t a = g.as_bool(g.input({5})), o = g.as_bool(g.output({5}));
    g.node(op_code("LOGICAL_NOT"), {a}, {o});
    check_close(run(g, {{0, 1, 2, 128, 255}})[0], {1, 0, 0, 0, 0}, 0, 0);
  }
  SECTION("FULL into float32 and bool") {
    PayloadBuilder g;
    const uint32_t f = g.output({2, 3}), z = g.output({}), b1 = g.as_bool(g.output({3})), b0 = g.as_bool(g.output({2}));
    const uint32_t empty = g.output({0, 4});
    g.node(op_code("FULL"), {}, {f}, {Attr::f(-INFINITY)});
    g.node(op_code("FULL"), {}, {z}, {Attr::f(0.1)});
    g.node(op_code("FULL"), {}, {b1}, {Attr::f(1.0)});
    g.node(op_code("FULL"), {}, {b0}, {Attr::f(0.0)});
    g.node(op_code("FULL"), {}, {empty}, {Attr::f(2.0)});
    const auto out = run(g, {});
    for (float v : out[0]) CHECK(v == -inf);
    CHECK(out[1][0] == 0.1f);  // the value rounded to float32
    check_close(out[2], {1, 1, 1}, 0, 0);
    check_close(out[3], {0, 0}, 0, 0);
    CHECK(out[4].empty());
  }
}

TEST_CASE("CUDA delegate (host ops): ANY over every dim, with and without keepdim", "[cuda][delegate]") {
  const Shape s{3, 4, 5};
  // Sparse trues, so some rows along every dim are all false.
  std::vector<float> in(static_cast<size_t>(numel(s)), 0.f);
  for (size_t i = 0; i < in.size(); i += 7) in[i] = (i % 3) ? 1.f : 9.f;
  const auto st = strides_of(s);
  for (int64_t dim = 0; dim < 3; ++dim)
    for (int64_t keepdim : {0, 1}) {
      INFO("dim " << dim << " keepdim " << keepdim);
      Shape os = s;
      if (keepdim) os[dim] = 1;
      else os.erase(os.begin() + dim);
      PayloadBuilder g;
      const uint32_t x = g.as_bool(g.input(s)), o = g.as_bool(g.output(os));
      g.node(op_code("ANY"), {x}, {o}, {Attr::i(dim), Attr::i(keepdim)});
      Shape kept = s;
      kept[dim] = 1;
      std::vector<double> want;
      for (int64_t i = 0; i < numel(kept); ++i) {
        auto c = coords(i, kept);
        bool r = false;
        for (int64_t k = 0; k < s[dim]; ++k) {
          c[dim] = k;
          int64_t off = 0;
          for (size_t d = 0; d < 3; ++d) off += c[d] * st[d];
          r = r || in[off] != 0;
        }
        want.push_back(r);
      }
      const auto out = run(g, {in});
      check_close(out[0], want, 0, 0);
      CHECK(std::count(want.begin(), want.end(), 0.0) > 0);
    }
  SECTION("an empty reduced dim gives false; rank 0 is itself") {
    PayloadBuilder g;
    const uint32_t x = g.as_bool(g.input({2, 0})), o = g.as_bool(g.output({2, 1}));
    const uint32_t y = g.as_bool(g.input({})), o2 = g.as_bool(g.output({}));
    g.node(op_code("ANY"), {x}, {o}, {Attr::i(1), Attr::i(1)});
    g.node(op_code("ANY"), {y}, {o2}, {Attr::i(0), Attr::i(0)});
    const auto out = run(g, {{}, {3}});
    check_close(out[0], {0, 0}, 0, 0);
    check_close(out[1], {1}, 0, 0);
  }
}

TEST_CASE("CUDA delegate (host ops): WHERE with broadcasting", "[cuda][delegate]") {
  struct Case {
    Shape c, a, b, out;
  };
  const Case cases[] = {{{2, 3, 4}, {2, 3, 4}, {2, 3, 4}, {2, 3, 4}}, {{2, 1, 1}, {3, 1}, {4}, {2, 3, 4}},
                        {{4}, {2, 3, 4}, {}, {2, 3, 4}},             {{}, {3}, {2, 1}, {2, 3}},
                        {{3, 1}, {1, 5}, {3, 5}, {3, 5}}};
  for (const Case& c : cases) {
    INFO(shape_str(c.c) << " ? " << shape_str(c.a) << " : " << shape_str(c.b));
    PayloadBuilder g;
    const uint32_t ci = g.as_bool(g.input(c.c)), ai = g.input(c.a), bi = g.input(c.b), o = g.output(c.out);
    g.node(op_code("WHERE"), {ci, ai, bi}, {o});
    std::vector<float> vc(static_cast<size_t>(numel(c.c)));
    for (size_t i = 0; i < vc.size(); ++i) vc[i] = static_cast<float>((i * 5 + 1) % 3);  // 0, 1 and 2
    const auto va = random_values(numel(c.a), 24), vb = random_values(numel(c.b), 25);
    std::vector<double> want;
    for (int64_t i = 0; i < numel(c.out); ++i) {
      const auto co = coords(i, c.out);
      want.push_back(at_broadcast(vc, c.c, co) != 0 ? at_broadcast(va, c.a, co) : at_broadcast(vb, c.b, co));
    }
    check_close(run(g, {vc, va, vb})[0], want, 0, 0);
  }
}

TEST_CASE("CUDA delegate (host ops): the attention NaN guard", "[cuda][delegate]") {
  // What the exporter emits after softmax: rows whose scores were all -inf become zeros instead of NaN.
  const float ninf = -std::numeric_limits<float>::infinity();
  PayloadBuilder g;
  const Shape s{2, 3};
  const uint32_t scores = g.input(s), w = g.input(s);
  const uint32_t eq = g.as_bool(g.temp(s)), ne = g.as_bool(g.temp(s)), any = g.as_bool(g.temp({2, 1}));
  const uint32_t all_masked = g.as_bool(g.temp({2, 1})), zeros = g.temp(s), o = g.output(s);
  g.node(op_code("EQ_SCALAR"), {scores}, {eq}, {Attr::f(-INFINITY)});
  g.node(op_code("LOGICAL_NOT"), {eq}, {ne});
  g.node(op_code("ANY"), {ne}, {any}, {Attr::i(1), Attr::i(1)});
  g.node(op_code("LOGICAL_NOT"), {any}, {all_masked});
  g.node(op_code("FULL"), {}, {zeros}, {Attr::f(0.0)});
  g.node(op_code("WHERE"), {all_masked, zeros, w}, {o});
  HostEmulatedDevice dev;
  auto exec = build(g, dev);
  // Bool intermediates take their byte size in scratch: 6 + 6 + 2 + 2 bytes, each 256-aligned, and 24 for zeros.
  CHECK(exec->scratch_bytes() <= 5 * kScratchAlign);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto out = run(g, {{ninf, ninf, ninf, 0.5f, ninf, 1.f}, {nan, nan, nan, 0.25f, 0.f, 0.75f}});
  check_close(out[0], {0, 0, 0, 0.25, 0, 0.75}, 0, 0);
}

TEST_CASE("CUDA delegate (host ops): bool arguments", "[cuda][delegate]") {
  const Shape s{2, 3, 2, 2};
  const std::vector<uint8_t> cl{0, 2, 3, 1};
  PayloadBuilder g;
  const uint32_t m = g.as_bool(g.input(s, cl)), x = g.input(s);
  const uint32_t o = g.output(s), nm = g.as_bool(g.output(s, cl));
  g.node(op_code("WHERE"), {m, x, x}, {o});  // a no-op, but it reads the mask through the boundary conversion
  g.node(op_code("LOGICAL_NOT"), {m}, {nm});
  HostEmulatedDevice dev;
  auto exec = build(g, dev);
  CHECK(exec->scratch_offset(m) >= 0);   // channels-last bool input staged in scratch
  CHECK(exec->scratch_offset(nm) >= 0);  // and the channels-last bool output
  std::vector<float> logical_mask(static_cast<size_t>(numel(s)));
  for (size_t i = 0; i < logical_mask.size(); ++i) logical_mask[i] = static_cast<float>(i % 3 == 0);
  const auto mask_mem_f = to_layout(logical_mask, s, cl);
  std::vector<uint8_t> mask_mem(mask_mem_f.begin(), mask_mem_f.end()), out_mask(mask_mem.size(), 0xAB);
  auto vx = random_values(numel(s), 26);
  std::vector<float> out(vx.size());
  EValue a0(bool_tensor(mask_mem, s, cl)), a1(device_tensor(vx, s)), a2(device_tensor(out, s)),
      a3(bool_tensor(out_mask, s, cl));
  EValue* args[] = {&a0, &a1, &a2, &a3};
  auto st = exec->execute(args);
  INFO((st ? std::string() : st.error().what));
  REQUIRE(st.has_value());
  check_close(out, std::vector<double>(vx.begin(), vx.end()), 0, 0);
  std::vector<float> want_logical;
  for (float v : logical_mask) want_logical.push_back(v == 0.f);
  const auto want_mem = to_layout(want_logical, s, cl);
  for (size_t i = 0; i < out_mask.size(); ++i) CHECK(out_mask[i] == static_cast<uint8_t>(want_mem[i]));

  SECTION("a float tensor for a bool argument, and a bool one for a float argument, are refused") {
    std::vector<float> fmem(out.size());
    EValue wrong(device_tensor(fmem, s, cl));
    EValue* bad[] = {&wrong, &a1, &a2, &a3};
    auto r = exec->execute(bad);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == Error::InvalidArgument);
    CHECK(r.error().what.find("argument 0 (input 0, value 0) has dtype float32, expected bool") != std::string::npos);
    std::vector<uint8_t> bmem(out.size());
    EValue wrong2(bool_tensor(bmem, s));
    EValue* bad2[] = {&a0, &a1, &wrong2, &a3};
    r = exec->execute(bad2);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().what.find("argument 2 (output 0, value 2) has dtype bool, expected float32") != std::string::npos);
    EValue an_int(int64_t{1});
    EValue* bad3[] = {&an_int, &a1, &a2, &a3};
    r = exec->execute(bad3);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().what.find("is Int, expected a bool tensor") != std::string::npos);
  }
}
