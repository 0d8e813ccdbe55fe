// The ECU1 parser: what a valid payload decodes to, and that every malformed field is rejected by name.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>

#include "etrt/backends/cuda/payload.h"
#include "payload_builder.h"

using namespace etrt;
using namespace etrt::cuda;
using etrt::cuda::test::Attr;
using etrt::cuda::test::PayloadBuilder;
using etrt::cuda::test::patch;

namespace {

/// Parses `b` and requires a failure with `code` whose message contains every piece.
void expect_fail(const std::vector<uint8_t>& b, Error code, std::initializer_list<std::string_view> pieces) {
  auto r = parse_payload(b);
  REQUIRE_FALSE(r.has_value());
  INFO(r.error().what);
  CHECK(r.error().code == code);
  for (std::string_view p : pieces) CHECK(r.error().what.find(p) != std::string::npos);
}

/// x [2, 3] + y [3] -> out [2, 3]: the smallest graph, patched by the field tests below.
PayloadBuilder add_graph() {
  PayloadBuilder g;
  const uint32_t x = g.input({2, 3}), y = g.input({3});
  const uint32_t out = g.output({2, 3});
  g.node(op_code("ADD"), {x, y}, {out}, {Attr::f(1.0)});
  return g;
}

}  // namespace

TEST_CASE("ECU1: a graph with every op decodes", "[cuda][payload]") {
  auto g = test::all_ops_graph();
  const auto bytes = g.bytes();
  auto r = parse_payload(bytes);
  INFO((r ? std::string() : r.error().what));
  REQUIRE(r.has_value());
  const Payload& p = *r;
  CHECK(p.values.size() == g.values.size());
  CHECK(p.inputs == std::vector<uint32_t>{0, 1});
  CHECK(p.outputs.size() == 4);
  CHECK(p.nodes.size() == g.nodes.size());
  CHECK(p.nodes[0].op == op_code("ADD"));
  CHECK(p.nodes[0].alpha == 0.5);
  CHECK(p.nodes[1].alpha == 2.0);
  CHECK(p.nodes[4].scalar == 1.5);
  CHECK(p.nodes[7].approximate == 0);
  CHECK(p.nodes[8].approximate == 1);
  const NodeDesc& addmm = p.nodes[17];
  REQUIRE(addmm.op == op_code("ADDMM"));
  CHECK(addmm.beta == 0.5);
  CHECK(addmm.alpha == 2.0);
  const NodeDesc& perm = p.nodes[19];
  REQUIRE(perm.op == op_code("PERMUTE"));
  CHECK(perm.perm[0] == 1);
  CHECK(perm.perm[1] == 0);
  CHECK(perm.perm[2] == 2);
  const NodeDesc& ln = p.nodes.back();
  REQUIRE(ln.op == op_code("LAYER_NORM"));
  CHECK(ln.in[2] == kAbsent);
  CHECK(ln.eps == 1e-5);
  CHECK(ln.normalized_ndim == 2);
  CHECK(ln.num_out == 3);
  // The mask ops and their bool values.
  const NodeDesc& sel = p.nodes[p.nodes.size() - 11];
  REQUIRE(sel.op == op_code("SELECT"));
  CHECK(sel.dim == 0);
  CHECK(sel.index == 2);
  const NodeDesc& eq = p.nodes[p.nodes.size() - 10];
  REQUIRE(eq.op == op_code("EQ_SCALAR"));
  CHECK(eq.scalar == -INFINITY);
  CHECK(p.values[eq.in[0]].dtype == ScalarType::Float);
  CHECK(p.values[eq.out[0]].dtype == ScalarType::Bool);
  CHECK(p.values[eq.out[0]].nbytes() == 12);
  const NodeDesc& any = p.nodes[p.nodes.size() - 8];
  REQUIRE(any.op == op_code("ANY"));
  CHECK(any.dim == 2);
  CHECK(any.keepdim == 1);
  const NodeDesc& full = p.nodes[p.nodes.size() - 4];
  REQUIRE(full.op == op_code("FULL"));
  CHECK(full.num_in == 0);
  CHECK(full.value == 1.0);
  CHECK(p.values[full.out[0]].is_bool());
  CHECK(p.nodes[p.nodes.size() - 2].op == op_code("WHERE"));
  // Constants: 64-aligned inside the region, which views the payload.
  CHECK(p.constants.size() > 0);
  CHECK(p.constants.data() >= bytes.data());
  CHECK(p.constants.data() + p.constants.size() == bytes.data() + bytes.size());
  CHECK(p.values[2].is_constant());
  CHECK(p.values[2].constant_offset == 0);
  CHECK(p.values[3].constant_offset == 128);  // 20 floats = 80 bytes, rounded up to 64
  CHECK(p.values[0].numel == 24);
}

TEST_CASE("ECU1: every truncation fails cleanly", "[cuda][payload]") {
  auto g = test::all_ops_graph();
  const auto bytes = g.bytes();
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    auto r = parse_payload(cut);
    INFO("prefix of " << n << " bytes");
    REQUIRE_FALSE(r.has_value());
    const std::string& w = r.error().what;
    INFO(w);
    CHECK(r.error().code == Error::InvalidProgram);
    CHECK((w.find("truncated") != std::string::npos || w.find("magic") != std::string::npos ||
           w.find("needs more bytes") != std::string::npos));
  }
  // Trailing bytes after the constants are tolerated (segments may be padded).
  auto longer = bytes;
  longer.resize(bytes.size() + 13, 0);
  CHECK(parse_payload(longer).has_value());
}

TEST_CASE("ECU1: header fields", "[cuda][payload]") {
  auto g = add_graph();
  const auto ok = g.bytes();
  REQUIRE(parse_payload(ok).has_value());
  {
    auto b = ok;
    b[3] = '2';
    expect_fail(b, Error::InvalidProgram, {"bad magic"});
  }
  {
    auto b = ok;
    patch<uint32_t>(b, 4, 2);
    expect_fail(b, Error::NotSupported, {"version 2"});
  }
  {
    auto b = ok;
    patch<uint32_t>(b, 8, 0xFFFFFFF0u);
    expect_fail(b, Error::InvalidProgram, {"num_values 4294967280", "needs more bytes"});
  }
  {
    auto b = ok;
    patch<uint32_t>(b, 12, 3);  // 3 inputs + 1 output > 3 values
    expect_fail(b, Error::InvalidProgram, {"num_inputs 3", "exceed num_values 3"});
  }
  {
    auto b = ok;
    patch<uint32_t>(b, 20, 0x10000000u);
    expect_fail(b, Error::InvalidProgram, {"num_nodes 268435456"});
  }
  {
    auto b = ok;
    patch<uint32_t>(b, 28, 64);  // size without an offset
    expect_fail(b, Error::InvalidProgram, {"constants_size 64 with constants_offset 0"});
  }
}

TEST_CASE("ECU1: value records", "[cuda][payload]") {
  auto g = add_graph();
  const auto ok = g.bytes();
  const size_t v1 = g.value_at[1];  // y [3]
  const auto with = [&](size_t at, uint8_t byte) {
    auto b = ok;
    b[at] = byte;
    return b;
  };
  expect_fail(with(v1, 5), Error::NotSupported, {"value 1", "float16", "float32 and bool only"});
  expect_fail(with(v1, 15), Error::NotSupported, {"value 1", "bfloat16"});
  expect_fail(with(v1, 4), Error::NotSupported, {"value 1", "int64"});
  expect_fail(with(v1, 3), Error::NotSupported, {"value 1", "int32"});
  expect_fail(with(v1, 99), Error::InvalidProgram, {"value 1", "unknown dtype code 99"});
  // bool is a value dtype, but ADD reads float32 only, and constants are float32.
  expect_fail(with(v1, 11), Error::InvalidProgram, {"node 0 (ADD)", "input 1 (value 1) is bool, expected float32"});
  expect_fail(with(g.value_at[2], 11), Error::InvalidProgram,
              {"node 0 (ADD)", "output 0 (value 2) is bool, expected float32"});
  {
    PayloadBuilder h;
    const uint32_t x = h.input({2});
    const uint32_t c = h.as_bool(h.constant({2}, {1.f, 0.f}));
    const uint32_t o = h.output({2});
    h.node(op_code("WHERE"), {c, x, x}, {o});
    expect_fail(h.bytes(), Error::InvalidProgram, {"value 1 is a bool constant"});
  }
  expect_fail(with(v1 + 1, 17), Error::InvalidProgram, {"value 1", "rank 17"});
  expect_fail(with(v1 + 2, 8 | kFlagInput), Error::InvalidProgram, {"value 1", "flags 9"});
  expect_fail(with(v1 + 2, kFlagInput | kFlagConstant), Error::InvalidProgram, {"value 1", "exclude each other"});
  expect_fail(with(v1 + 2, kFlagInput | kFlagOutput), Error::InvalidProgram, {"value 1", "exclude each other"});
  expect_fail(with(v1 + 3, 1), Error::InvalidProgram, {"value 1", "reserved"});
  expect_fail(with(v1 + 5, 1), Error::InvalidProgram, {"value 1", "reserved"});
  expect_fail(with(v1 + 8, 64), Error::InvalidProgram, {"value 1", "not a constant but has data offset 64"});
  {
    auto b = ok;
    patch<int64_t>(b, v1 + 16, -3);
    expect_fail(b, Error::InvalidProgram, {"value 1", "negative size in [-3]"});
  }
  {
    // x [2, 3] -> [2^40, 2^40]: numel overflows.
    auto b = ok;
    const size_t v0 = g.value_at[0];
    patch<int64_t>(b, v0 + 16, int64_t{1} << 40);
    patch<int64_t>(b, v0 + 24, int64_t{1} << 40);
    expect_fail(b, Error::InvalidProgram, {"value 0", "too many elements"});
  }
  {
    auto b = ok;
    const size_t v0 = g.value_at[0];  // rank 2: sizes at +16, dim_order at +32
    b[v0 + 32] = 1;
    b[v0 + 33] = 1;
    expect_fail(b, Error::InvalidProgram, {"value 0", "dim_order [1, 1]", "not a permutation"});
    b[v0 + 33] = 2;
    expect_fail(b, Error::InvalidProgram, {"value 0", "dim_order [1, 2]"});
  }
  {
    auto b = ok;
    b[g.value_at[0] + 34] = 7;  // padding after the dim_order
    expect_fail(b, Error::InvalidProgram, {"nonzero padding", "value 0 dim_order"});
  }
}

TEST_CASE("ECU1: input and output lists", "[cuda][payload]") {
  auto g = add_graph();
  const auto ok = g.bytes();
  const size_t io = g.io_at;  // inputs 0, 1 then output 2
  {
    auto b = ok;
    patch<uint32_t>(b, io + 4, 9);
    expect_fail(b, Error::InvalidProgram, {"input 1 is value 9, out of range"});
  }
  {
    auto b = ok;
    patch<uint32_t>(b, io + 4, 2);
    expect_fail(b, Error::InvalidProgram, {"input 1 is value 2", "not flagged as input"});
  }
  {
    auto b = ok;
    patch<uint32_t>(b, io + 4, 0);
    expect_fail(b, Error::InvalidProgram, {"value 0 is listed twice"});
  }
  {
    auto b = ok;
    patch<uint32_t>(b, io + 8, 1);
    expect_fail(b, Error::InvalidProgram, {"output 0 is value 1", "not flagged as output"});
  }
  {
    // A third value flagged as an input that the list does not name.
    PayloadBuilder h = add_graph();
    h.value({1}, kFlagInput);
    expect_fail(h.bytes(), Error::InvalidProgram, {"value 3 is flagged as an input but is not in the input list"});
  }
  {
    auto b = ok;
    b[io + 12] = 1;  // padding after the 3 ids
    expect_fail(b, Error::InvalidProgram, {"nonzero padding", "input/output lists"});
  }
}

TEST_CASE("ECU1: node records and dataflow", "[cuda][payload]") {
  auto g = add_graph();
  const auto ok = g.bytes();
  const size_t n0 = g.node_at[0];  // ADD: ids at +8 (x), +12 (y), +16 (out), padding +20, alpha at +24
  {
    auto b = ok;
    patch<uint16_t>(b, n0, 99);
    expect_fail(b, Error::NotSupported, {"node 0", "op code 99", "version 1 does not define"});
  }
  {
    auto b = ok;
    patch<uint16_t>(b, n0, 7);  // a gap in the table
    expect_fail(b, Error::NotSupported, {"node 0", "op code 7"});
  }
  {
    auto b = ok;
    b[n0 + 2] = 1;
    expect_fail(b, Error::InvalidProgram, {"node 0 (ADD)", "has 1 inputs and 1 outputs, expected 2 and 1"});
  }
  {
    auto b = ok;
    b[n0 + 3] = 2;
    expect_fail(b, Error::InvalidProgram, {"node 0 (ADD)", "expected 2 and 1"});
  }
  {
    auto b = ok;
    patch<uint16_t>(b, n0 + 4, 0);
    expect_fail(b, Error::InvalidProgram, {"node 0 (ADD)", "has 0 attributes, expected 1"});
  }
  {
    auto b = ok;
    patch<uint16_t>(b, n0 + 6, 1);
    expect_fail(b, Error::InvalidProgram, {"node 0 (ADD)", "reserved"});
  }
  {
    auto b = ok;
    patch<uint32_t>(b, n0 + 12, 77);
    expect_fail(b, Error::InvalidProgram, {"node 0 (ADD)", "input 1 is value 77, out of range"});
  }
  {
    auto b = ok;
    patch<uint32_t>(b, n0 + 12, kAbsent);
    expect_fail(b, Error::InvalidProgram, {"node 0 (ADD)", "input 1 is absent but required"});
  }
  {
    auto b = ok;
    patch<uint32_t>(b, n0 + 12, 2);  // reads its own output
    expect_fail(b, Error::InvalidProgram, {"node 0 (ADD)", "input 1 reads value 2 before any node writes it"});
  }
  {
    auto b = ok;
    patch<uint32_t>(b, n0 + 16, 1);
    expect_fail(b, Error::InvalidProgram, {"node 0 (ADD)", "output 0 writes value 1, which is an input"});
  }
  {
    auto b = ok;
    patch<uint32_t>(b, n0 + 16, 50);
    expect_fail(b, Error::InvalidProgram, {"node 0 (ADD)", "output 0 is value 50, out of range"});
  }
  {
    auto b = ok;
    b[n0 + 21] = 1;
    expect_fail(b, Error::InvalidProgram, {"nonzero padding", "node 0 value ids"});
  }
  {
    // Two writers of one value; a value nobody writes; a constant as an output.
    PayloadBuilder h = add_graph();
    h.node(op_code("RELU"), {0}, {2});
    expect_fail(h.bytes(), Error::InvalidProgram, {"node 1 (RELU)", "writes value 2, which an earlier output"});
    PayloadBuilder u = add_graph();
    u.temp({4});
    expect_fail(u.bytes(), Error::InvalidProgram, {"value 3 is neither an input nor a constant and no node writes it"});
    PayloadBuilder c = add_graph();
    const uint32_t k = c.constant({2, 3}, {1, 2, 3, 4, 5, 6});
    c.node(op_code("RELU"), {0}, {k});
    expect_fail(c.bytes(), Error::InvalidProgram, {"node 1 (RELU)", "which is a constant"});
  }
}

TEST_CASE("ECU1: attributes", "[cuda][payload]") {
  const auto one = [](uint16_t op, std::vector<int64_t> in, std::vector<int64_t> out, std::vector<Attr> attrs) {
    PayloadBuilder g;
    const uint32_t x = g.input(std::move(in));
    const uint32_t o = g.output(std::move(out));
    g.node(op, {x}, {o}, std::move(attrs));
    return g.bytes();
  };
  expect_fail(one(op_code("GELU"), {4}, {4}, {Attr::i(2)}), Error::InvalidProgram,
              {"node 0 (GELU)", "approximate is 2, expected 0 (none) or 1 (tanh)"});
  expect_fail(one(op_code("SOFTMAX"), {2, 3}, {2, 3}, {Attr::i(2)}), Error::InvalidProgram,
              {"node 0 (SOFTMAX)", "dim 2 is out of range for rank 2"});
  expect_fail(one(op_code("SOFTMAX"), {2, 3}, {2, 3}, {Attr::i(-1)}), Error::InvalidProgram,
              {"node 0 (SOFTMAX)", "dim -1"});
  CHECK(parse_payload(one(op_code("SOFTMAX"), {}, {}, {Attr::i(0)})).has_value());  // rank 0: one element, dim 0
  expect_fail(one(op_code("PERMUTE"), {2, 3}, {3, 2}, {Attr::i(1), Attr::i(1)}), Error::InvalidProgram,
              {"node 0 (PERMUTE)", "dims [1, 1] are not a permutation of 0..1"});
  expect_fail(one(op_code("PERMUTE"), {2, 3}, {3, 2}, {Attr::i(-1), Attr::i(0)}), Error::InvalidProgram,
              {"node 0 (PERMUTE)", "dims [-1, 0]"});
  expect_fail(one(op_code("PERMUTE"), {2, 3}, {3, 2}, {Attr::i(1)}), Error::InvalidProgram,
              {"node 0 (PERMUTE)", "has 1 attributes, expected 2"});
  expect_fail(one(op_code("ADD_SCALAR"), {2}, {2}, {}), Error::InvalidProgram,
              {"node 0 (ADD_SCALAR)", "has 0 attributes, expected 1"});
  expect_fail(one(op_code("RELU"), {2}, {2}, {Attr::i(0)}), Error::InvalidProgram,
              {"node 0 (RELU)", "has 1 attributes, expected 0"});

  const auto ln = [](double eps, int64_t nd) {
    PayloadBuilder g;
    const uint32_t x = g.input({2, 3});
    const uint32_t o = g.output({2, 3}), m = g.output({2, 1}), r = g.output({2, 1});
    g.node(op_code("LAYER_NORM"), {x, kAbsent, kAbsent}, {o, m, r}, {Attr::f(eps), Attr::i(nd)});
    return g.bytes();
  };
  CHECK(parse_payload(ln(1e-5, 1)).has_value());
  expect_fail(ln(-1.0, 1), Error::InvalidProgram, {"node 0 (LAYER_NORM)", "eps -1"});
  expect_fail(ln(std::numeric_limits<double>::quiet_NaN(), 1), Error::InvalidProgram,
              {"node 0 (LAYER_NORM)", "not a finite non-negative number"});
  expect_fail(ln(1e-5, 0), Error::InvalidProgram, {"node 0 (LAYER_NORM)", "normalized_ndim 0 must be in 1..2"});
  expect_fail(ln(1e-5, 3), Error::InvalidProgram, {"node 0 (LAYER_NORM)", "normalized_ndim 3"});
}

TEST_CASE("ECU1: shape rules per op", "[cuda][payload]") {
  const auto bin = [](uint16_t op, std::vector<int64_t> a, std::vector<int64_t> b, std::vector<int64_t> out) {
    PayloadBuilder g;
    const uint32_t x = g.input(std::move(a)), y = g.input(std::move(b));
    const uint32_t o = g.output(std::move(out));
    std::vector<Attr> attrs;
    if (op == op_code("ADD") || op == op_code("SUB")) attrs = {Attr::f(1.0)};
    g.node(op, {x, y}, {o}, attrs);
    return g.bytes();
  };
  CHECK(parse_payload(bin(op_code("MUL"), {2, 1, 4}, {3, 1}, {2, 3, 4})).has_value());
  CHECK(parse_payload(bin(op_code("DIV"), {}, {5}, {5})).has_value());
  expect_fail(bin(op_code("ADD"), {2, 3}, {3}, {3, 3}), Error::InvalidProgram,
              {"node 0 (ADD)", "output has sizes [3, 3], expected [2, 3]"});
  expect_fail(bin(op_code("SUB"), {2, 3}, {2}, {2, 3}), Error::InvalidProgram,
              {"node 0 (SUB)", "input sizes [2, 3] and [2] do not broadcast"});
  expect_fail(bin(op_code("MM"), {2, 3}, {4, 5}, {2, 5}), Error::InvalidProgram,
              {"node 0 (MM)", "[2, 3] and [4, 5] cannot be multiplied"});
  expect_fail(bin(op_code("MM"), {2, 3}, {3, 5}, {5, 2}), Error::InvalidProgram,
              {"node 0 (MM)", "output has sizes [5, 2], expected [2, 5]"});
  expect_fail(bin(op_code("MM"), {1, 2, 3}, {3, 5}, {2, 5}), Error::InvalidProgram,
              {"node 0 (MM)", "operands must have rank 2"});
  expect_fail(bin(op_code("BMM"), {2, 2, 3}, {3, 3, 5}, {2, 2, 5}), Error::InvalidProgram,
              {"node 0 (BMM)", "cannot be multiplied"});
  CHECK(parse_payload(bin(op_code("BMM"), {4, 2, 3}, {4, 3, 5}, {4, 2, 5})).has_value());

  const auto addmm = [](std::vector<int64_t> bias) {
    PayloadBuilder g;
    const uint32_t c = g.input(std::move(bias)), a = g.input({2, 3}), b = g.input({3, 4});
    const uint32_t o = g.output({2, 4});
    g.node(op_code("ADDMM"), {c, a, b}, {o}, {Attr::f(1.0), Attr::f(1.0)});
    return g.bytes();
  };
  for (auto ok : {std::vector<int64_t>{4}, {2, 1}, {2, 4}, {}, {1, 4}}) CHECK(parse_payload(addmm(ok)).has_value());
  expect_fail(addmm({3}), Error::InvalidProgram, {"node 0 (ADDMM)", "bias sizes [3] do not broadcast to [2, 4]"});
  expect_fail(addmm({1, 2, 4}), Error::InvalidProgram, {"node 0 (ADDMM)", "bias sizes [1, 2, 4]"});

  const auto unary = [](uint16_t op, std::vector<int64_t> in, std::vector<int64_t> out, std::vector<Attr> attrs = {}) {
    PayloadBuilder g;
    const uint32_t x = g.input(std::move(in));
    const uint32_t o = g.output(std::move(out));
    g.node(op, {x}, {o}, std::move(attrs));
    return g.bytes();
  };
  expect_fail(unary(op_code("SIGMOID"), {2, 3}, {3, 2}), Error::InvalidProgram,
              {"node 0 (SIGMOID)", "output has sizes [3, 2], expected [2, 3]"});
  expect_fail(unary(op_code("MUL_SCALAR"), {2, 3}, {6}, {Attr::f(2.0)}), Error::InvalidProgram, {"node 0 (MUL_SCALAR)"});
  CHECK(parse_payload(unary(op_code("COPY"), {2, 3}, {3, 1, 2})).has_value());
  expect_fail(unary(op_code("COPY"), {2, 3}, {5}), Error::InvalidProgram,
              {"node 0 (COPY)", "output sizes [5] have a different element count than the input's [2, 3]"});
  expect_fail(unary(op_code("PERMUTE"), {2, 3, 4}, {3, 2, 4}, {Attr::i(2), Attr::i(0), Attr::i(1)}), Error::InvalidProgram,
              {"node 0 (PERMUTE)", "output has sizes [3, 2, 4], expected [4, 2, 3]"});
  CHECK(parse_payload(unary(op_code("EXPAND"), {3, 1}, {2, 3, 4})).has_value());
  expect_fail(unary(op_code("EXPAND"), {3, 2}, {2, 3, 4}), Error::InvalidProgram,
              {"node 0 (EXPAND)", "input sizes [3, 2] do not expand to the output's [2, 3, 4]"});
  expect_fail(unary(op_code("EXPAND"), {2, 3, 4}, {3, 4}), Error::InvalidProgram, {"node 0 (EXPAND)"});

  const auto ln = [](std::vector<int64_t> w, std::vector<int64_t> mean) {
    PayloadBuilder g;
    const uint32_t x = g.input({2, 3, 4}), wt = g.input(std::move(w));
    const uint32_t o = g.output({2, 3, 4}), m = g.output(std::move(mean)), r = g.output({2, 1, 1});
    g.node(op_code("LAYER_NORM"), {x, wt, kAbsent}, {o, m, r}, {Attr::f(1e-5), Attr::i(2)});
    return g.bytes();
  };
  CHECK(parse_payload(ln({3, 4}, {2, 1, 1})).has_value());
  expect_fail(ln({4}, {2, 1, 1}), Error::InvalidProgram,
              {"node 0 (LAYER_NORM)", "weight has sizes [4], expected the normalized sizes [3, 4]"});
  expect_fail(ln({3, 4}, {2}), Error::InvalidProgram,
              {"node 0 (LAYER_NORM)", "output 1 (mean) has sizes [2], expected [2, 1, 1]"});
}

TEST_CASE("ECU1: constants", "[cuda][payload]") {
  PayloadBuilder g;
  const uint32_t x = g.input({2, 2});
  const uint32_t c = g.constant({2, 2}, {1, 2, 3, 4});
  const uint32_t o = g.output({2, 2});
  g.node(op_code("MUL"), {x, c}, {o});
  const auto ok = g.bytes();
  auto r = parse_payload(ok);
  REQUIRE(r.has_value());
  REQUIRE(r->constants.size() == 16);
  CHECK(reinterpret_cast<const float*>(r->constants.data())[3] == 4.f);
  const size_t vc = g.value_at[c];
  {
    auto b = ok;
    patch<uint64_t>(b, vc + 8, 8);
    expect_fail(b, Error::InvalidProgram, {"constant value 1 data offset 8 is not 64-byte aligned"});
  }
  {
    auto b = ok;
    patch<uint64_t>(b, vc + 8, 64);
    expect_fail(b, Error::InvalidProgram, {"constant value 1 data [64, +16) is outside the constants region (16 bytes)"});
  }
  {
    auto b = ok;
    patch<uint32_t>(b, 28, 12);  // region smaller than the constant
    expect_fail(b, Error::InvalidProgram, {"constant value 1", "outside the constants region (12 bytes)"});
  }
  {
    auto b = ok;
    uint32_t off;
    std::memcpy(&off, b.data() + 24, 4);
    patch<uint32_t>(b, 24, off + 4);
    expect_fail(b, Error::InvalidProgram, {"constants_offset", "not 64-byte aligned"});
    patch<uint32_t>(b, 24, 0x40);  // inside the records
    expect_fail(b, Error::InvalidProgram, {"constants_offset 64 overlaps the records"});
    patch<uint32_t>(b, 24, off + 64);
    expect_fail(b, Error::InvalidProgram, {"truncated", "constants region"});
  }
}

TEST_CASE("ECU1: random corruption never crashes the parser", "[cuda][payload]") {
  auto g = test::all_ops_graph();
  const auto ok = g.bytes();
  uint64_t state = 0x9e3779b97f4a7c15ull;
  const auto next = [&] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  int parsed = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    auto b = ok;
    const int flips = 1 + static_cast<int>(next() % 4);
    for (int k = 0; k < flips; ++k) b[next() % b.size()] ^= static_cast<uint8_t>(1u << (next() % 8));
    auto r = parse_payload(b);
    if (r.has_value()) {
      ++parsed;
      // What parses satisfies the invariants the executor relies on.
      for (const NodeDesc& n : r->nodes)
        for (int k = 0; k < n.num_out; ++k) REQUIRE(n.out[k] < r->values.size());
    } else {
      REQUIRE_FALSE(r.error().what.empty());
    }
  }
  CHECK(parsed > 0);  // flips in constant data and attribute values still parse
}

TEST_CASE("ECU1: dtype rules of the mask ops", "[cuda][payload]") {
  // One node: inputs with the given dtypes (true: bool) and sizes, one output.
  struct In {
    std::vector<int64_t> sizes;
    bool is_bool;
  };
  const auto one = [](uint16_t op, std::vector<In> ins, std::vector<int64_t> out, bool out_bool, std::vector<Attr> attrs) {
    PayloadBuilder g;
    std::vector<uint32_t> ids;
    for (auto& in : ins) {
      const uint32_t id = g.input(in.sizes);
      if (in.is_bool) g.as_bool(id);
      ids.push_back(id);
    }
    const uint32_t o = g.output(std::move(out));
    if (out_bool) g.as_bool(o);
    g.node(op, ids, {o}, std::move(attrs));
    return g.bytes();
  };
  const auto ok = [](const std::vector<uint8_t>& b) {
    auto r = parse_payload(b);
    INFO((r ? std::string() : r.error().what));
    CHECK(r.has_value());
  };
  const std::vector<int64_t> s{2, 3};
  ok(one(op_code("EQ_SCALAR"), {{s, false}}, s, true, {Attr::f(1.5)}));
  expect_fail(one(op_code("EQ_SCALAR"), {{s, true}}, s, true, {Attr::f(1.5)}), Error::InvalidProgram,
              {"node 0 (EQ_SCALAR)", "input 0 (value 0) is bool, expected float32"});
  expect_fail(one(op_code("EQ_SCALAR"), {{s, false}}, s, false, {Attr::f(1.5)}), Error::InvalidProgram,
              {"node 0 (EQ_SCALAR)", "output 0 (value 1) is float32, expected bool"});
  ok(one(op_code("LOGICAL_NOT"), {{s, true}}, s, true, {}));
  expect_fail(one(op_code("LOGICAL_NOT"), {{s, false}}, s, true, {}), Error::InvalidProgram,
              {"node 0 (LOGICAL_NOT)", "input 0 (value 0) is float32, expected bool"});
  expect_fail(one(op_code("LOGICAL_NOT"), {{s, true}}, s, false, {}), Error::InvalidProgram,
              {"node 0 (LOGICAL_NOT)", "output 0 (value 1) is float32, expected bool"});
  ok(one(op_code("ANY"), {{s, true}}, {2, 1}, true, {Attr::i(1), Attr::i(1)}));
  expect_fail(one(op_code("ANY"), {{s, false}}, {2, 1}, true, {Attr::i(1), Attr::i(1)}), Error::InvalidProgram,
              {"node 0 (ANY)", "input 0 (value 0) is float32, expected bool"});
  expect_fail(one(op_code("ANY"), {{s, true}}, {2, 1}, false, {Attr::i(1), Attr::i(1)}), Error::InvalidProgram,
              {"node 0 (ANY)", "output 0 (value 1) is float32, expected bool"});
  ok(one(op_code("WHERE"), {{s, true}, {s, false}, {s, false}}, s, false, {}));
  expect_fail(one(op_code("WHERE"), {{s, false}, {s, false}, {s, false}}, s, false, {}), Error::InvalidProgram,
              {"node 0 (WHERE)", "input 0 (value 0) is float32, expected bool"});
  expect_fail(one(op_code("WHERE"), {{s, true}, {s, true}, {s, false}}, s, false, {}), Error::InvalidProgram,
              {"node 0 (WHERE)", "input 1 (value 1) is bool, expected float32"});
  expect_fail(one(op_code("WHERE"), {{s, true}, {s, false}, {s, true}}, s, false, {}), Error::InvalidProgram,
              {"node 0 (WHERE)", "input 2 (value 2) is bool, expected float32"});
  expect_fail(one(op_code("WHERE"), {{s, true}, {s, false}, {s, false}}, s, true, {}), Error::InvalidProgram,
              {"node 0 (WHERE)", "output 0 (value 3) is bool, expected float32"});
  expect_fail(one(op_code("SELECT"), {{s, true}}, {3}, true, {Attr::i(0), Attr::i(0)}), Error::InvalidProgram,
              {"node 0 (SELECT)", "input 0 (value 0) is bool, expected float32"});
  expect_fail(one(op_code("RELU"), {{s, true}}, s, true, {}), Error::InvalidProgram,
              {"node 0 (RELU)", "input 0 (value 0) is bool, expected float32"});
  // COPY keeps the dtype, whichever it is.
  ok(one(op_code("COPY"), {{s, true}}, {6}, true, {}));
  ok(one(op_code("COPY"), {{s, false}}, {6}, false, {}));
  expect_fail(one(op_code("COPY"), {{s, true}}, {6}, false, {}), Error::InvalidProgram,
              {"node 0 (COPY)", "output 0 (value 1) is float32, expected bool"});
  expect_fail(one(op_code("COPY"), {{s, false}}, {6}, true, {}), Error::InvalidProgram,
              {"node 0 (COPY)", "output 0 (value 1) is bool, expected float32"});
  // FULL writes either dtype; a bool output takes 0 or 1 only.
  ok(one(op_code("FULL"), {}, s, false, {Attr::f(-INFINITY)}));
  ok(one(op_code("FULL"), {}, s, true, {Attr::f(1.0)}));
  ok(one(op_code("FULL"), {}, s, true, {Attr::f(0.0)}));
  expect_fail(one(op_code("FULL"), {}, s, true, {Attr::f(2.0)}), Error::InvalidProgram,
              {"node 0 (FULL)", "value 2", "does not fit the bool output (0 or 1)"});
  expect_fail(one(op_code("FULL"), {}, s, true, {Attr::f(NAN)}), Error::InvalidProgram, {"node 0 (FULL)", "bool output"});
}

TEST_CASE("ECU1: attributes and shapes of the mask ops", "[cuda][payload]") {
  const auto unary = [](uint16_t op, std::vector<int64_t> in, bool in_bool, std::vector<int64_t> out, bool out_bool,
                        std::vector<Attr> attrs) {
    PayloadBuilder g;
    const uint32_t x = g.input(std::move(in));
    if (in_bool) g.as_bool(x);
    const uint32_t o = g.output(std::move(out));
    if (out_bool) g.as_bool(o);
    g.node(op, {x}, {o}, std::move(attrs));
    return g.bytes();
  };
  const auto select = [&](std::vector<int64_t> in, std::vector<int64_t> out, int64_t dim, int64_t index) {
    return unary(op_code("SELECT"), std::move(in), false, std::move(out), false, {Attr::i(dim), Attr::i(index)});
  };
  CHECK(parse_payload(select({2, 3, 4}, {2, 4}, 1, 2)).has_value());
  CHECK(parse_payload(select({5}, {}, 0, 4)).has_value());
  expect_fail(select({2, 3, 4}, {2, 4}, 3, 0), Error::InvalidProgram,
              {"node 0 (SELECT)", "dim 3 is out of range for rank 3"});
  expect_fail(select({2, 3, 4}, {2, 4}, -1, 0), Error::InvalidProgram, {"node 0 (SELECT)", "dim -1"});
  expect_fail(select({2, 3, 4}, {2, 4}, 1, 3), Error::InvalidProgram,
              {"node 0 (SELECT)", "index 3 is out of range for size 3 of dim 1"});
  expect_fail(select({2, 3, 4}, {2, 4}, 1, -1), Error::InvalidProgram, {"node 0 (SELECT)", "index -1"});
  expect_fail(select({2, 0, 4}, {2, 4}, 1, 0), Error::InvalidProgram, {"node 0 (SELECT)", "index 0"});
  expect_fail(select({2, 3, 4}, {2, 1, 4}, 1, 0), Error::InvalidProgram,
              {"node 0 (SELECT)", "output has sizes [2, 1, 4], expected [2, 4]"});
  expect_fail(select({}, {}, 0, 0), Error::InvalidProgram, {"node 0 (SELECT)", "dim 0 is out of range for rank 0"});
  expect_fail(unary(op_code("SELECT"), {2, 3}, false, {3}, false, {Attr::i(0)}), Error::InvalidProgram,
              {"node 0 (SELECT)", "has 1 attributes, expected 2"});

  const auto any = [&](std::vector<int64_t> in, std::vector<int64_t> out, int64_t dim, int64_t keepdim) {
    return unary(op_code("ANY"), std::move(in), true, std::move(out), true, {Attr::i(dim), Attr::i(keepdim)});
  };
  CHECK(parse_payload(any({2, 3, 4}, {2, 1, 4}, 1, 1)).has_value());
  CHECK(parse_payload(any({2, 3, 4}, {2, 4}, 1, 0)).has_value());
  CHECK(parse_payload(any({2, 0}, {2, 1}, 1, 1)).has_value());
  CHECK(parse_payload(any({}, {}, 0, 1)).has_value());  // rank 0: dim 0, the output stays rank 0
  expect_fail(any({2, 3, 4}, {2, 1, 4}, 1, 2), Error::InvalidProgram,
              {"node 0 (ANY)", "keepdim is 2, expected 0 or 1"});
  expect_fail(any({2, 3, 4}, {2, 3, 1}, 3, 1), Error::InvalidProgram,
              {"node 0 (ANY)", "dim 3 is out of range for rank 3"});
  expect_fail(any({2, 3, 4}, {2, 3, 1}, -1, 1), Error::InvalidProgram, {"node 0 (ANY)", "dim -1"});
  expect_fail(any({2, 3, 4}, {2, 4}, 1, 1), Error::InvalidProgram,
              {"node 0 (ANY)", "output has sizes [2, 4], expected [2, 1, 4]"});
  expect_fail(any({2, 3, 4}, {2, 1, 4}, 1, 0), Error::InvalidProgram,
              {"node 0 (ANY)", "output has sizes [2, 1, 4], expected [2, 4]"});
  expect_fail(unary(op_code("EQ_SCALAR"), {2, 3}, false, {3, 2}, true, {Attr::f(0.0)}), Error::InvalidProgram,
              {"node 0 (EQ_SCALAR)", "output has sizes [3, 2], expected [2, 3]"});
  expect_fail(unary(op_code("EQ_SCALAR"), {2, 3}, false, {2, 3}, true, {}), Error::InvalidProgram,
              {"node 0 (EQ_SCALAR)", "has 0 attributes, expected 1"});
  expect_fail(unary(op_code("LOGICAL_NOT"), {2, 3}, true, {6}, true, {}), Error::InvalidProgram,
              {"node 0 (LOGICAL_NOT)", "output has sizes [6], expected [2, 3]"});

  {
    // FULL has no inputs and one attribute.
    PayloadBuilder g;
    const uint32_t x = g.input({2});
    const uint32_t o = g.output({2});
    g.node(op_code("FULL"), {x}, {o}, {Attr::f(0.0)});
    expect_fail(g.bytes(), Error::InvalidProgram, {"node 0 (FULL)", "has 1 inputs and 1 outputs, expected 0 and 1"});
    PayloadBuilder h;
    const uint32_t o2 = h.output({2, 0, 3});
    h.node(op_code("FULL"), {}, {o2}, {});
    expect_fail(h.bytes(), Error::InvalidProgram, {"node 0 (FULL)", "has 0 attributes, expected 1"});
  }

  const auto where = [](std::vector<int64_t> c, std::vector<int64_t> a, std::vector<int64_t> b,
                        std::vector<int64_t> out) {
    PayloadBuilder g;
    const uint32_t ci = g.as_bool(g.input(std::move(c))), ai = g.input(std::move(a)), bi = g.input(std::move(b));
    const uint32_t o = g.output(std::move(out));
    g.node(op_code("WHERE"), {ci, ai, bi}, {o});
    return g.bytes();
  };
  CHECK(parse_payload(where({2, 1, 1}, {3, 1}, {4}, {2, 3, 4})).has_value());
  CHECK(parse_payload(where({}, {}, {}, {})).has_value());
  CHECK(parse_payload(where({5, 1, 1, 1}, {1}, {2, 1}, {5, 1, 2, 1})).has_value());
  expect_fail(where({2, 1, 1}, {3, 1}, {4}, {2, 3, 1}), Error::InvalidProgram,
              {"node 0 (WHERE)", "output has sizes [2, 3, 1], expected [2, 3, 4]"});
  expect_fail(where({3}, {2, 1}, {4}, {2, 4}), Error::InvalidProgram,
              {"node 0 (WHERE)", "input sizes [3], [2, 1] and [4] do not broadcast"});
  expect_fail(where({2}, {3}, {1}, {3}), Error::InvalidProgram, {"node 0 (WHERE)", "do not broadcast"});
}
