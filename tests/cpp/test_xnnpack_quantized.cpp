// Quantized XNNPACK payloads: the arithmetic of Note [xnnpack quantized values] and the exporter's real payloads
// (tests/fixtures/xnnpack_quantized), including corruption of their quantization parameters.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string_view>
#include <vector>

#include "etrt/backends/xnnpack/quantized_gemv.h"
#include "etrt/backends/xnnpack/xnnpack_backend.h"
#include "test_support.h"
#include "xnnpack_test_support.h"

using namespace etrt;
using namespace etrt::xnnpack;

TEST_CASE("XNNPACK quantization: per-tensor rounding is half to even and saturates", "[xnnpack][quantized]") {
  std::vector<float> x = {0.25f, 0.75f, -0.25f, 100.f, -100.f, 1.25f, std::nanf("")};
  quant::fake_quantize(x.data(), static_cast<int64_t>(x.size()), 0.5f, 1, {-128, 127});
  // x / 0.5 = 0.5, 1.5, -0.5, 200, -200, 2.5 -> 0, 2, -0, 126 (127 - zp), -129 (-128 - zp), 2
  CHECK(x[0] == 0.f);
  CHECK(x[1] == 1.f);
  CHECK(x[2] == 0.f);
  CHECK(x[3] == 63.f);
  CHECK(x[4] == -64.5f);
  CHECK(x[5] == 1.f);
  CHECK(std::isnan(x[6]));  // stays NaN: never converted to an integer
}

TEST_CASE("XNNPACK quantization: the fused clamp + requantize pass matches the scalar definition",
          "[xnnpack][quantized]") {
  // 37 values: the 8-lane body and the scalar tail both run. Values sit on and between half steps of the grid.
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> half_steps(-600, 600);
  std::vector<float> in(37);
  for (float& v : in) v = static_cast<float>(half_steps(rng)) * 0.125f + ((half_steps(rng) & 3) == 0 ? 0.01f : 0.f);
  in[3] = std::nanf("");
  in[30] = std::nanf("");
  const std::vector<float> before = in;
  const float scale = 0.25f, lo = -20.f, hi = 6.f;
  const int32_t zp = -3;
  const auto reference = [&](float v) {
    v = std::min(std::max(v, lo), hi);
    const float q = std::min(std::max(std::nearbyint(v / scale), -128.f - zp), 127.f - zp);
    return q * scale;
  };
  std::vector<float> out(in.size(), -1.f);
  quant::fake_quantize(in.data(), out.data(), static_cast<int64_t>(in.size()), scale, zp, {-128, 127}, lo, hi);
  for (size_t i = 0; i < in.size(); ++i) {
    INFO("i = " << i << ", in = " << in[i]);
    if (std::isnan(in[i])) {
      CHECK(std::isnan(out[i]));
    } else {
      CHECK(out[i] == reference(in[i]));
    }
  }
  // The input is left as it was.
  CHECK(std::memcmp(in.data(), before.data(), in.size() * sizeof(float)) == 0);

  // A 32-bit grid (beyond the add-and-subtract rounding's 2^22) still rounds exactly.
  std::vector<float> wide = {30000002.f, -2.5f, 7.5f};
  std::vector<float> wide_out(3);
  quant::fake_quantize(wide.data(), wide_out.data(), 3, 1.f, 0, {INT32_MIN, INT32_MAX});
  CHECK(wide_out[0] == std::nearbyint(wide[0]));
  CHECK(wide_out[1] == -2.f);
  CHECK(wide_out[2] == 8.f);
}

TEST_CASE("XNNPACK quantization: the one-pass requantize onto two grids equals the two passes",
          "[xnnpack][quantized]") {
  // A convolution's output grid, then a ReLU6's clamp and grid (Note [xnnpack block finish]); 37 values so the
  // vector body and the tail both run, NaN included; a 32-bit grid takes the exact two-pass path.
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> value(-9.f, 9.f);
  std::vector<float> in(37);
  for (float& v : in) v = value(rng);
  in[5] = std::nanf("");
  in[33] = std::nanf("");
  const std::vector<float> before = in;
  for (const auto& [a, b] : {std::pair{Grid{0.07f, 3, {-128, 127}}, Grid{0.05f, -128, {-128, 127}}},
                             std::pair{Grid{0.1f, 0, {INT32_MIN, INT32_MAX}}, Grid{0.03f, 0, {0, 255}}}}) {
    const int64_t n = static_cast<int64_t>(in.size());
    std::vector<float> two(in.size()), one(in.size(), -1.f);
    quant::fake_quantize(in.data(), two.data(), n, a.scale, a.zero_point, a.range);
    quant::fake_quantize(two.data(), two.data(), n, b.scale, b.zero_point, b.range, 0.f, 6.f);
    quant::fake_requantize(in.data(), one.data(), n, a, b, 0.f, 6.f);
    for (size_t i = 0; i < in.size(); ++i) {
      INFO("i = " << i << ", in = " << in[i]);
      if (std::isnan(two[i])) CHECK(std::isnan(one[i]));
      else CHECK(one[i] == two[i]);
    }
    CHECK(std::memcmp(in.data(), before.data(), in.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("XNNPACK quantization: dynamic per-row parameters include zero in the range", "[xnnpack][quantized]") {
  const auto p = quant::dynamic_params(-1.f, 2.f);
  CHECK(p.inv_scale == Approx(85.f));
  CHECK(p.zero_point == -43);  // -128 + 1 * 85
  const auto q = quant::dynamic_params(0.5f, 3.f);  // all positive: the range still starts at 0
  CHECK(q.inv_scale == Approx(255.f / 3.f));
  CHECK(q.zero_point == -128);
  const auto flat = quant::dynamic_params(0.f, 0.f);
  CHECK(flat.inv_scale == 1.f);
  std::vector<float> row = {-1.f, 0.f, 2.f, 0.4f};
  quant::fake_quantize_dynamic(row.data(), 4, 4);
  CHECK(row[0] == Approx(-1.f).margin(1e-6));
  CHECK(row[1] == 0.f);
  CHECK(row[2] == Approx(2.f).margin(1e-6));
  CHECK(row[3] == Approx(34.f / 85.f).margin(1e-6));  // 0.4 * 85 = 34
}

TEST_CASE("XNNPACK quantization: 4-bit weights, low nibble first, stored as value + 8", "[xnnpack][quantized]") {
  // A [2, 3] weight: rows padded to 2 bytes. Row 0 = -8, 7, 0; row 1 = 1, -1, 3.
  const std::vector<uint8_t> bytes = {0xF0, 0x08, 0x79, 0x0B};
  const std::vector<int64_t> dims = {2, 3};
  Quant q;
  q.kind = QuantKind::PerChannel;
  q.scales = {0.5f, 2.f};
  std::vector<float> out(6);
  quant::dequantize_rows(Datatype::QCInt4, q, dims, bytes.data(), 0, 2, out.data());
  CHECK(out == std::vector<float>{-4.f, 3.5f, 0.f, 2.f, -2.f, 6.f});
  // Blockwise: group size 2 over 4 columns, scales per (row, block).
  const std::vector<uint8_t> b2 = {0x98, 0x7A};  // one row: 0, 1, 2, -1
  Quant g;
  g.kind = QuantKind::PerChannelGroup;
  g.group_size = 2;
  g.scales = {1.f, 10.f};
  std::vector<float> o2(4);
  const std::vector<int64_t> d2 = {1, 4};
  quant::dequantize_rows(Datatype::QBInt4, g, d2, b2.data(), 0, 1, o2.data());
  CHECK(o2 == std::vector<float>{0.f, 1.f, 20.f, -10.f});
}

namespace {
const char* const kQuantized[] = {"q_mlp_static_xnnpack", "q_mlp_dynamic_xnnpack", "q_cnn_static_xnnpack",
                                  "q_inverted_residual_xnnpack"};
}

TEST_CASE("XNNPACK quantization: the exporter's quantized payloads parse and build", "[xnnpack][quantized]") {
  for (const char* name : kQuantized) {
    INFO(name);
    const auto f = etrt::test::first_payload(name, "xnnpack_quantized");
    auto g = parse_payload(f.payload, etrt::test::lookup(*f.program));
    INFO((g ? std::string() : g.error().what));
    REQUIRE(g.has_value());
    size_t quantized = 0;
    for (const Value& v : g->values) quantized += v.present && v.quant.kind != QuantKind::None;
    CHECK(quantized > 0);
    auto e = Executor::create(std::move(*g));
    INFO((e ? std::string() : e.error().what));
    CHECK(e.has_value());
  }
}

TEST_CASE("XNNPACK quantization: a dequantized filter read only through packed panels is not held twice",
          "[xnnpack][quantized]") {
  for (const char* name : kQuantized) {
    INFO(name);
    const auto made = etrt::test::create_executor(name, "xnnpack_quantized");
    const Graph& graph = made.graph;
    size_t packed_filters = 0;
    for (size_t i = 0; i < graph.nodes.size(); ++i) {
      const Node& n = graph.nodes[i];
      if (n.inputs.size() < 2 || n.inputs[1] == kNoValue) continue;
      const Value& w = graph.values[n.inputs[1]];
      if (!made.executor->packed_path(i) || w.constant.empty() || w.quant.kind == QuantKind::None ||
          n.kind_name == "XNNDepthwiseConv2d")
        continue;
      ++packed_filters;
      CHECK_FALSE(made.executor->holds_float_copy(n.inputs[1]));
    }
    // The int8 fully-connected filters stay quantized and are read in blocks; the CNN's convolution filters are
    // dequantized and packed at load.
    if (std::string_view(name) == "q_cnn_static_xnnpack") CHECK(packed_filters > 0);
  }
}

TEST_CASE("XNNPACK quantization: a Clamp that alone reads a packed convolution's output runs inside it",
          "[xnnpack][quantized]") {
  // mobilenet_v2's ReLU6 after the expanding and the depthwise convolutions (Note [xnnpack block finish]); the ReLU6
  // after the residual add reads a value the next add reads too, and the add does not take the packed path.
  const auto made = etrt::test::create_executor("q_inverted_residual_xnnpack", "xnnpack_quantized");
  const Graph& graph = made.graph;
  int fused = 0, separate = 0;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& n = graph.nodes[i];
    if (n.kind_name != "XNNClamp") continue;
    ++(made.executor->runs_in_writer(i) ? fused : separate);
    if (made.executor->runs_in_writer(i)) {
      const Node* writer = nullptr;
      for (const Node& w : graph.nodes)
        if (w.output == n.inputs[0]) writer = &w;
      REQUIRE(writer != nullptr);
      CHECK(made.executor->packed_path(writer->index));
    }
  }
  CHECK(fused == 2);
  CHECK(separate == 1);
}

TEST_CASE("XNNPACK quantization: a Clamp that alone reads a node's output is folded into that node, as XNNPACK does",
          "[xnnpack][quantized]") {
  // Note [xnnpack clamp fusion]: the writer then writes the Clamp's output (its grid) within the Clamp's range, and
  // the value between them is never formed; a Clamp whose input another node reads too stays a node of its own.
  const auto made = etrt::test::create_executor("q_mobilenet_stage_xnnpack", "xnnpack_quantized");
  const Graph& before = made.graph;
  const Graph& after = made.executor->graph();
  int folded = 0;
  for (size_t i = 0; i < before.nodes.size(); ++i) {
    const Node& c = before.nodes[i];
    if (c.kind_name != "XNNClamp") continue;
    INFO("clamp node " << i);
    size_t writer = SIZE_MAX;
    for (const Node& w : before.nodes)
      if (w.output == c.inputs[0]) writer = w.index;
    REQUIRE(writer != SIZE_MAX);
    CHECK(made.executor->runs_in_writer(i));
    CHECK(after.nodes[i].output == kNoValue);
    CHECK(after.nodes[writer].output == c.output);
    CHECK(after.nodes[writer].has_min_max);
    CHECK(after.nodes[writer].out_max == std::min(c.out_max, before.nodes[writer].out_max));
    ++folded;
  }
  CHECK(folded == 9);  // every ReLU6: each alone reads a convolution's output
}

TEST_CASE("XNNPACK quantization: int8 activations between int8 nodes are held as bytes", "[xnnpack][quantized]") {
  // Note [byte activations]: in q_mobilenet_stage_xnnpack every value a convolution, depthwise convolution or add
  // writes and only such nodes read is bytes; so are the input's: its Convert quantizes the floats straight to bytes
  // (ByteForm::Writes) and its NCHW -> NHWC Transpose moves bytes (ByteForm::Joint), which the stem reads. The
  // output's Transpose moves the last add's bytes too, and its dequantizing Convert reads them (ByteForm::Reads).
  const auto made = etrt::test::create_executor("q_mobilenet_stage_xnnpack", "xnnpack_quantized");
  const Graph& after = made.executor->graph();
  if (!kernels::qgemm::has_vnni()) {
    // Without VNNI the convolutions multiply in float: none reads or writes bytes. The output's tail keeps its byte
    // forms, which need no int8 GEMM: the last Add writes bytes (fast::binary_mixed), its Transpose moves them and
    // the dequantizing Convert reads them. (This branch runs on aarch64 and under ETRT_ISA=avx2; it expected no
    // bytes at all and failed there since the Add and Transpose byte forms came.)
    int held = 0;
    for (const Node& n : after.nodes) {
      if (n.output == kNoValue) continue;
      if (n.kind_name == "XNNConv2d" || n.kind_name == "XNNDepthwiseConv2d") {
        CHECK_FALSE(made.executor->holds_bytes(n.inputs[0]));
        CHECK_FALSE(made.executor->holds_bytes(n.output));
      }
      if (!made.executor->holds_bytes(n.output)) continue;
      ++held;
      INFO("node " << n.index << " " << n.kind_name);
      CHECK((n.kind_name == "XNNAdd" || n.kind_name == "XNNStaticTranspose"));
      for (const Node& r : after.nodes)
        if (std::ranges::find(r.inputs, n.output) != r.inputs.end())
          CHECK((r.kind_name == "XNNStaticTranspose" || r.kind_name == "XNNConvert"));
    }
    CHECK(held == 2);
    return;
  }
  int bytes = 0, depthwise = 0, adds = 0, transposes = 0, converts_in = 0;
  for (const Node& n : after.nodes) {
    if (n.output == kNoValue) continue;
    const bool held = made.executor->holds_bytes(n.output);
    bytes += held;
    if (n.kind_name == "XNNDepthwiseConv2d") {
      ++depthwise;
      CHECK(held);
      CHECK(made.executor->holds_bytes(n.inputs[0]));
    }
    if (n.kind_name == "XNNAdd") {
      ++adds;
      CHECK(made.executor->holds_bytes(n.inputs[0]));
      CHECK(made.executor->holds_bytes(n.inputs[1]));
      CHECK(held);
    }
    if (n.kind_name == "XNNConvert") {  // the input's quantizes floats; the output's dequantizes bytes to floats
      const bool quantizes = after.values[n.inputs[0]].quant.kind == QuantKind::None;
      converts_in += quantizes;
      CHECK(held == quantizes);
      CHECK(made.executor->holds_bytes(n.inputs[0]) == !quantizes);
    }
    if (n.kind_name == "XNNStaticTranspose") {
      ++transposes;
      CHECK(held);
      CHECK(made.executor->holds_bytes(n.inputs[0]));
    }
  }
  CHECK(depthwise == 4);
  CHECK(adds == 3);
  CHECK(transposes == 2);
  CHECK(converts_in == 1);
  // The convolutions', depthwise convolutions' and adds' outputs, the input Convert's, both Transposes'.
  CHECK(bytes == 9 + 4 + 3 + 1 + 2);
}

TEST_CASE("XNNPACK quantization: SiLU chains between int8 convolutions read and write bytes", "[xnnpack][quantized]") {
  // q_efficientnet_stage_xnnpack (Note [byte activations]): the five chains after the stem, the expanding and the
  // depthwise convolutions read their convolution's output as bytes; those whose output only convolutions, a
  // depthwise convolution or the residual add read write bytes too; the one the squeeze's pooling and gate read
  // writes floats, and the squeeze's own SiLU (8 values, under kMinBytes) reads and writes floats.
  const auto made = etrt::test::create_executor("q_efficientnet_stage_xnnpack", "xnnpack_quantized");
  if (!kernels::qgemm::has_vnni()) return;  // no int8 GEMM: nothing writes bytes
  const Graph& graph = made.executor->graph();
  int chains = 0, gates = 0, bytes_in = 0, bytes_out = 0, tabulated = 0;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const auto c = made.executor->chain_at(i);
    if (!c) continue;
    const auto [head, sigmoid, multiply, tail] = *c;
    if (sigmoid == multiply) {  // the squeeze's gate: Convert, Sigmoid, Convert; its few values stay floats
      ++gates;
      CHECK(graph.nodes[sigmoid].kind_name == "XNNSigmoid");
      CHECK_FALSE(made.executor->chain_tabulated(head));
      continue;
    }
    ++chains;
    const bool in = made.executor->holds_bytes(graph.nodes[head].inputs[0]);
    const bool out = tail != SIZE_MAX && made.executor->holds_bytes(graph.nodes[tail].output);
    bytes_in += in;
    bytes_out += out;
    // Bytes in and out: a function of one byte, looked up (the results: pytest's bit-exact comparison with upstream).
    CHECK(made.executor->chain_tabulated(head) == (in && out));
    tabulated += made.executor->chain_tabulated(head);
  }
  CHECK(chains == 6);
  CHECK(gates == 1);
  CHECK(bytes_in == 5);
  CHECK(bytes_out == 4);
  CHECK(tabulated == 4);
}

TEST_CASE("XNNPACK quantization: a max pool between int8 convolutions pools bytes", "[xnnpack][quantized]") {
  // q_resnet_stem_xnnpack: the 7x7 stem, the pool, the block's convolutions and the residual add hold their int8
  // activations as bytes; the pool's input and output among them (ByteForm::Joint, nhwc::max_pool_bytes). Its
  // results: pytest's bit-exact comparison with upstream.
  const auto made = etrt::test::create_executor("q_resnet_stem_xnnpack", "xnnpack_quantized");
  if (!kernels::qgemm::has_vnni()) return;  // no int8 GEMM: nothing writes bytes
  const Graph& graph = made.executor->graph();
  int pools = 0;
  for (const Node& n : graph.nodes) {
    if (n.kind_name != "XNNMaxPooling2d") continue;
    ++pools;
    CHECK(made.executor->holds_bytes(n.inputs[0]));
    CHECK(made.executor->holds_bytes(n.output));
  }
  CHECK(pools == 1);
}

TEST_CASE("XNNPACK: the byte table lookup of every length and offset equals the scalar definition",
          "[xnnpack][quantized][byte]") {
  std::mt19937 gen(11);
  std::array<uint8_t, 256> table{};
  for (auto& t : table) t = static_cast<uint8_t>(gen());
  std::vector<uint8_t> in(300 + 64), out(300 + 64);
  for (auto& v : in) v = static_cast<uint8_t>(gen());
  for (int64_t offset : {0, 1, 37})
    for (int64_t n = 0; n <= 300 - offset; n += n < 140 ? 1 : 13) {
      std::fill(out.begin(), out.end(), uint8_t{0xA5});
      fast::lookup_bytes(in.data() + offset, out.data() + offset, n, table.data());
      int wrong = 0;
      for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
        const bool inside = i >= offset && i < offset + n;
        wrong += out[i] != (inside ? table[in[i]] : uint8_t{0xA5});
      }
      INFO("offset " << offset << " n " << n);
      CHECK(wrong == 0);
    }
}

TEST_CASE("XNNPACK quantization: a quantized SiLU (Convert, Sigmoid, Multiply, Convert) runs as one pass",
          "[xnnpack][quantized]") {
  // q_mbconv_xnnpack: efficientnet's SiLU after four convolutions (Note [xnnpack activation chain]); the squeeze-
  // excitation's sigmoid gate multiplies another value: between its Converts it is an elementwise chain. Its outputs
  // are checked against upstream's by the Python fixture tests.
  const auto made = etrt::test::create_executor("q_mbconv_xnnpack", "xnnpack_quantized");
  const Graph& graph = made.graph;
  int chains = 0, tails = 0, sigmoids = 0, gates = 0;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    sigmoids += graph.nodes[i].kind_name == "XNNSigmoid";
    const auto c = made.executor->chain_at(i);
    if (!c) continue;
    const auto [head, sigmoid, multiply, tail] = *c;
    CHECK(graph.nodes[head].kind_name == "XNNConvert");
    if (sigmoid == multiply) {
      ++gates;
      CHECK(graph.nodes[sigmoid].kind_name == "XNNSigmoid");
      REQUIRE(tail != SIZE_MAX);
      CHECK(graph.nodes[tail].kind_name == "XNNConvert");
      for (size_t k : {sigmoid, tail}) CHECK(made.executor->runs_in_writer(k));
      continue;
    }
    ++chains;
    CHECK(graph.nodes[sigmoid].kind_name == "XNNSigmoid");
    CHECK(graph.nodes[multiply].kind_name == "XNNMultiply");
    for (size_t k : {sigmoid, multiply}) CHECK(made.executor->runs_in_writer(k));
    CHECK_FALSE(made.executor->runs_in_writer(head));
    if (tail == SIZE_MAX) continue;
    ++tails;
    CHECK(graph.nodes[tail].kind_name == "XNNConvert");
    CHECK(graph.values[graph.nodes[tail].output].quant.kind == QuantKind::PerTensor);
    CHECK(made.executor->runs_in_writer(tail));
  }
  CHECK(sigmoids == 5);
  CHECK(chains == 4);
  CHECK(gates == 1);
  CHECK(tails == 3);  // the depthwise's SiLU output is also read, in float, by the squeeze's pooling
}

TEST_CASE("XNNPACK quantization: GELU and tanh between quantized linear layers run as tables of bytes",
          "[xnnpack][quantized]") {
  // q_gelu_mlp_xnnpack: Linear, GELU, Linear, tanh, Linear, each activation in float between a dequantizing and a
  // quantizing Convert (Note [xnnpack activation chain]); with the int8 GEMM writing and reading bytes, each chain is
  // a lookup of 256 bytes. Its outputs are upstream's bit for bit (pytest).
  const auto made = etrt::test::create_executor("q_gelu_mlp_xnnpack", "xnnpack_quantized");
  const Graph& graph = made.graph;
  std::vector<std::string_view> functions;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const auto c = made.executor->chain_at(i);
    if (!c) continue;
    const auto [head, first, last, tail] = *c;
    CHECK(first == last);
    functions.push_back(graph.nodes[first].kind_name);
    CHECK(graph.nodes[head].kind_name == "XNNConvert");
    REQUIRE(tail != SIZE_MAX);
    CHECK(graph.nodes[tail].kind_name == "XNNConvert");
    CHECK(graph.values[graph.nodes[tail].output].quant.kind == QuantKind::PerTensor);
    for (size_t k : {first, tail}) CHECK(made.executor->runs_in_writer(k));
    CHECK(made.executor->chain_tabulated(head) == kernels::qgemm::has_vnni());
  }
  CHECK(functions == std::vector<std::string_view>{"XNNGelu", "XNNTanh"});
}

TEST_CASE("XNNPACK quantization: a SiLU after a dynamically quantized linear layer runs as a chain",
          "[xnnpack][quantized]") {
  // q_silu_mlp_dynamic_xnnpack: the integer kernels write the linear layer's float output without a block finish,
  // so the SiLU after it is a chain headed by its Sigmoid (Note [xnnpack activation chain]); checked against upstream's
  // outputs by the Python fixture tests.
  const auto made = etrt::test::create_executor("q_silu_mlp_dynamic_xnnpack", "xnnpack_quantized");
  const Graph& graph = made.graph;
  int chains = 0;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const auto c = made.executor->chain_at(i);
    if (!c) continue;
    ++chains;
    CHECK(graph.nodes[i].kind_name == "XNNSigmoid");
    CHECK((*c)[3] == SIZE_MAX);
    CHECK(made.executor->runs_in_writer((*c)[2]));
    for (const Node& w : graph.nodes)
      if (w.output == graph.nodes[i].inputs[0]) CHECK(w.kind_name == "XNNFullyConnected");
  }
  CHECK(chains == 1);
}

TEST_CASE("XNNPACK: a value an earlier node writes too is placed apart from that node's inputs", "[xnnpack]") {
  // Values 0 -> node 0 -> 1 -> node 1 -> 2 -> node 2 -> 3. Without the early write, value 3 may reuse value 1's
  // bytes (1 is dead after node 1); written from node 1 on, it must not.
  Graph g;
  g.values.resize(4);
  for (Value& v : g.values) {
    v.present = true;
    v.numel = 64;
    v.dims = {64};
  }
  g.values[0].flags = kValueExternalInput;
  for (uint32_t i = 0; i < 3; ++i) {
    Node n;
    n.index = i;
    n.inputs = {i};
    n.output = i + 1;
    g.nodes.push_back(n);
  }
  auto overlap = [](const IntermediatePlan& p, uint32_t a, uint32_t b) {
    return p.offset[a] < p.offset[b] + 64 && p.offset[b] < p.offset[a] + 64;
  };
  auto plain = plan_intermediates(g);
  REQUIRE(plain.has_value());
  CHECK(overlap(*plain, 1, 3));  // the reuse the early write must prevent
  const std::pair<uint32_t, size_t> early[] = {{3, 1}};
  auto planned = plan_intermediates(g, early);
  REQUIRE(planned.has_value());
  CHECK_FALSE(overlap(*planned, 1, 3));
  CHECK_FALSE(overlap(*planned, 2, 3));
  // Value 2 computed in place over value 1 (Note [xnnpack silu]): it takes 1's bytes, and 1's life runs on to 2's
  // reader, so value 3 (written by node 2) may not reuse them.
  const std::pair<uint32_t, uint32_t> in_place[] = {{2, 1}};
  auto shared = plan_intermediates(g, {}, in_place);
  REQUIRE(shared.has_value());
  CHECK(shared->offset[2] == shared->offset[1]);
  CHECK_FALSE(overlap(*shared, 1, 3));
}

TEST_CASE("XNNPACK quantization: truncations and byte flips of quantized payloads never crash",
          "[xnnpack][quantized][robustness]") {
  for (const char* name : kQuantized) {
    INFO(name);
    const auto f = etrt::test::first_payload(name, "xnnpack_quantized");
    const auto look = etrt::test::lookup(*f.program);
    for (size_t n = 0; n < f.payload.size(); n += 3) {
      std::vector<uint8_t> cut(f.payload.begin(), f.payload.begin() + n);
      (void)parse_payload(cut, look);
    }
    std::vector<uint8_t> bytes(f.payload.begin(), f.payload.end());
    size_t rejected = 0;
    for (size_t i = 0; i < bytes.size(); ++i)
      for (uint8_t mask : {uint8_t{0xFF}, uint8_t{0x01}, uint8_t{0x40}}) {
        bytes[i] ^= mask;
        auto g = parse_payload(bytes, look);
        if (!g || !Executor::create(std::move(*g))) ++rejected;
        bytes[i] ^= mask;
      }
    CHECK(rejected > 0);
  }
}

namespace {

/// out[i, n] in double from dequantize_rows: the reference the row-at-a-time GEMV is checked against.
std::vector<double> gemv_reference(Datatype d, const Quant& q, std::span<const int64_t> dims, const uint8_t* data,
                                   const std::vector<float>& x, int64_t m, const std::vector<float>& bias) {
  const int64_t rows = dims[0], k = dims[1];
  std::vector<float> w(static_cast<size_t>(rows * k));
  quant::dequantize_rows(d, q, dims, data, 0, rows, w.data());
  std::vector<double> out(static_cast<size_t>(m * rows));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t n = 0; n < rows; ++n) {
      double s = bias.empty() ? 0.0 : bias[n];
      for (int64_t c = 0; c < k; ++c) s += static_cast<double>(x[i * k + c]) * w[n * k + c];
      out[i * rows + n] = s;
    }
  return out;
}

/// A quantized weight's layout for the GEMV / GEMM cases: rows x cols of datatype d.
struct Layout {
  const char* name;
  Datatype d;
  QuantKind kind;
  uint32_t group;
  int64_t rows, cols;
  bool bf16_scales = false;  // every scale a bfloat16 value, as the exporter writes blockwise scales
};

}  // namespace

TEST_CASE("XNNPACK quantized GEMV matches the dequantized product on every weight layout", "[xnnpack][quantized]") {
  const Layout layouts[] = {
      {"4-bit blockwise, group 32", Datatype::QBInt4, QuantKind::PerChannelGroup, 32, 40, 96},
      {"4-bit blockwise, group 6 (a tail inside each block)", Datatype::QBInt4, QuantKind::PerChannelGroup, 6, 9, 18},
      {"4-bit per channel", Datatype::QCInt4, QuantKind::PerChannel, 0, 33, 70},
      {"4-bit per channel, odd width (generic path)", Datatype::QCInt4, QuantKind::PerChannel, 0, 7, 13},
      {"8-bit per channel", Datatype::QCInt8, QuantKind::PerChannel, 0, 24, 50},
      {"4-bit blockwise, large enough to split across threads", Datatype::QBInt4, QuantKind::PerChannelGroup, 64, 512,
       512},
  };
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> real(-1.f, 1.f);
  for (const Layout& l : layouts) {
    const bool four_bit = l.d != Datatype::QCInt8;
    const std::vector<int64_t> dims{l.rows, l.cols};
    std::vector<uint8_t> data(static_cast<size_t>(four_bit ? l.rows * ((l.cols + 1) / 2) : l.rows * l.cols));
    for (uint8_t& b : data) b = static_cast<uint8_t>(rng());
    Quant q;
    q.kind = l.kind;
    q.group_size = l.group;
    q.scales.resize(static_cast<size_t>(l.kind == QuantKind::PerChannelGroup ? l.rows * (l.cols / l.group) : l.rows));
    for (float& s : q.scales) s = 0.01f + 0.1f * std::abs(real(rng));
    std::vector<float> bias(static_cast<size_t>(l.rows));
    for (float& b : bias) b = real(rng);
    for (int64_t m : {int64_t{1}, int64_t{3}, quant::kGemvMaxRows}) {
      std::vector<float> x(static_cast<size_t>(m * l.cols));
      for (float& v : x) v = real(rng);
      const std::vector<double> want = gemv_reference(l.d, q, dims, data.data(), x, m, bias);
      for (int level : {2, 1, 0}) {
        kernels::isa::force_level = level;
        std::vector<float> scratch(static_cast<size_t>(m * l.cols)), out(static_cast<size_t>(m * l.rows), -99.f);
        quant::quantized_gemv(l.d, q, dims, data.data(), x.data(), m, bias.data(), out.data(), scratch.data());
        INFO(l.name << ", " << m << " rows, ISA level " << level);
        double worst = 0;
        for (size_t i = 0; i < out.size(); ++i) worst = std::max(worst, std::abs(out[i] - want[i]));
        CHECK(worst < 2e-5 * static_cast<double>(l.cols));
      }
      kernels::isa::force_level = -1;
    }
  }
}

TEST_CASE("XNNPACK qd8 integer GEMM (4-bit and 8-bit weights) matches the dequantized product",
          "[xnnpack][quantized]") {
  const Layout layouts[] = {
      {"4-bit blockwise, group 32, two-block chunks only", Datatype::QBInt4, QuantKind::PerChannelGroup, 32, 40, 128},
      {"4-bit blockwise, group 32, a lone last block", Datatype::QBInt4, QuantKind::PerChannelGroup, 32, 37, 288},
      {"4-bit blockwise, group 64", Datatype::QBInt4, QuantKind::PerChannelGroup, 64, 24, 192},
      {"4-bit blockwise, group 32, five panels of 16 rows (four at once, then one)", Datatype::QBInt4,
       QuantKind::PerChannelGroup, 32, 72, 96},
      {"4-bit blockwise, group 96 (one group over two chunks)", Datatype::QBInt4, QuantKind::PerChannelGroup, 96, 9, 192},
      {"4-bit blockwise, group 32, bfloat16 scales", Datatype::QBInt4, QuantKind::PerChannelGroup, 32, 70, 288, true},
      {"4-bit per channel, one lone block", Datatype::QCInt4, QuantKind::PerChannel, 0, 33, 32},
      {"4-bit per channel, large enough to split across threads", Datatype::QCInt4, QuantKind::PerChannel, 0, 640, 544},
      {"8-bit per channel, whole vectors", Datatype::QCInt8, QuantKind::PerChannel, 0, 20, 64},
      {"8-bit per channel, a scalar tail", Datatype::QCInt8, QuantKind::PerChannel, 0, 19, 53},
      {"8-bit per channel, large enough to split across threads", Datatype::QCInt8, QuantKind::PerChannel, 0, 640, 520},
      {"8-bit per channel, three panels of 16 rows, the last partial", Datatype::QCInt8, QuantKind::PerChannel, 0, 37,
       288},
  };
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> real(-1.f, 1.f);
  for (const Layout& l : layouts) {
    const bool four_bit = l.d != Datatype::QCInt8;
    const std::vector<int64_t> dims{l.rows, l.cols};
    std::vector<uint8_t> data(static_cast<size_t>(four_bit ? l.rows * l.cols / 2 : l.rows * l.cols));
    for (uint8_t& b : data) b = static_cast<uint8_t>(rng());
    if (!four_bit) data[3] = 0x80;  // -128 is a stored value too
    Quant q;
    q.kind = l.kind;
    q.group_size = l.group;
    q.scales.resize(static_cast<size_t>(l.kind == QuantKind::PerChannelGroup ? l.rows * (l.cols / l.group) : l.rows));
    for (float& s : q.scales) s = 0.01f + 0.1f * std::abs(real(rng));
    if (l.bf16_scales)
      for (float& s : q.scales) s = std::bit_cast<float>(std::bit_cast<uint32_t>(s) & 0xFFFF0000u);
    const quant::Qd8Plan plan = quant::qd8_plan(l.d, q, dims, data.data());
    // The VNNI copy keeps bfloat16 scales as such (Note [qd8 x int4 vnni layout]) and others as float.
    if (!plan.vnni.empty()) CHECK(plan.vnni.scales_bf16.empty() != l.bf16_scales);
    REQUIRE(plan.weight == (four_bit ? quant::Qd8Weight::Int4 : quant::Qd8Weight::Int8));
    REQUIRE(plan.group == (l.kind == QuantKind::PerChannel ? l.cols : l.group));
    // On a VNNI CPU the 4-bit weight is also repacked for its kernel (Note [qd8 x int4 vnni layout]).
    // (The level the kernels run at, which ETRT_ISA may cap below the CPU's.)
    CHECK(quant::int4_vnni_runs(plan) == (four_bit && kernels::isa::level() >= kernels::isa::kAvx512Vnni));
    // And the 8-bit one, where its columns come in whole groups of 4 (Note [qd8 x int8 vnni layout]).
    CHECK(quant::int8_vnni_runs(plan) ==
          (!four_bit && l.cols % 4 == 0 && kernels::isa::level() >= kernels::isa::kAvx512Vnni));
    std::vector<float> bias(static_cast<size_t>(l.rows));
    for (float& b : bias) b = real(rng);
    for (int64_t m : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}, int64_t{7}, int64_t{33}}) {
      std::vector<float> x(static_cast<size_t>(m * l.cols));
      for (size_t i = 0; i < x.size(); ++i) x[i] = real(rng) * (1.f + static_cast<float>(i % 7)) + (i % 3 ? 0.f : 0.4f);
      std::vector<quant::DynamicParams> params(static_cast<size_t>(m));
      quant::fake_quantize_dynamic(x.data(), static_cast<int64_t>(x.size()), l.cols, params.data());
      if (m == 7) x[static_cast<size_t>(2 * l.cols + 5)] = std::nanf("");  // row 2 has a NaN: its outputs are NaN
      const std::vector<double> want = gemv_reference(l.d, q, dims, data.data(), x, m, bias);
      for (int level : {3, 2, 1, 0}) {
        kernels::isa::force_level = level;
        std::vector<uint8_t> scratch(static_cast<size_t>(quant::qd8_rows_bytes(m, l.cols)));
        const quant::Qd8Rows rows = quant::qd8_rows_in(scratch.data(), m, l.cols);
        quant::pack_qd8_rows(plan, x.data(), m, l.cols, params.data(), rows);
        std::vector<float> out(static_cast<size_t>(m * l.rows), -99.f);
        quant::qd8_gemm(plan, rows, m, dims, data.data(), q, bias.data(), out.data());
        INFO(l.name << ", " << m << " rows, ISA level " << level);
        double worst = 0;
        for (size_t i = 0; i < out.size(); ++i) {
          if (std::isnan(want[i])) {
            CHECK(std::isnan(out[i]));
            continue;
          }
          worst = std::max(worst, std::abs(out[i] - want[i]));
        }
        CHECK(worst < 2e-5 * static_cast<double>(l.cols));
      }
      kernels::isa::force_level = -1;
    }
  }
}

TEST_CASE("XNNPACK dynamic quantization: the vector row range is the std::min / std::max chain's, NaNs included",
          "[xnnpack][quantized]") {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> real(-3.f, 3.f);
  for (int64_t n = 1; n <= 40; ++n) {
    for (int64_t nan_at : {int64_t{-1}, int64_t{0}, n / 2, n - 1}) {
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : x) v = real(rng);
      if (nan_at >= 0) x[static_cast<size_t>(nan_at)] = std::nanf("");
      float want_lo = x[0], want_hi = x[0];
      for (float v : x) {
        want_lo = std::min(want_lo, v);
        want_hi = std::max(want_hi, v);
      }
      float lo = 0.f, hi = 0.f;
      quant::detail::row_range<8>(x.data(), n, lo, hi);
      INFO(n << " elements, NaN at " << nan_at);
      CHECK(std::memcmp(&lo, &want_lo, sizeof lo) == 0);  // bit for bit: a NaN first element stays NaN
      CHECK(std::memcmp(&hi, &want_hi, sizeof hi) == 0);
    }
  }
}

TEST_CASE("XNNPACK qd8: rows packed from unrounded floats equal rows packed from their grid points",
          "[xnnpack][quantized]") {
  // Note [qd8 inputs left unrounded]: the executor skips the rounding pass of a value only integer kernels read.
  const int64_t k = 96, m = 5;
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> real(-4.f, 4.f);
  std::vector<float> raw(static_cast<size_t>(m * k));
  for (float& v : raw) v = real(rng);
  const float inf = std::numeric_limits<float>::infinity();
  raw[3] = std::nanf("");  // row 0: a NaN
  raw[k + 7] = inf;        // row 1: both infinities (its range is not finite)
  raw[k + 8] = -inf;
  raw[2 * k + 1] = 1e30f;  // row 2: one huge value, the rest rounds to the zero point
  for (int64_t c = 0; c < k; ++c) raw[static_cast<size_t>(3 * k + c)] = 0.5f;  // row 3: constant
  std::vector<float> grid = raw;
  std::vector<quant::DynamicParams> p_raw(m), p_grid(m);
  quant::fake_quantize_dynamic(raw.data(), m * k, k, p_raw.data(), /*round_values=*/false);
  quant::fake_quantize_dynamic(grid.data(), m * k, k, p_grid.data());
  for (int64_t i = 0; i < m; ++i) {
    CHECK(p_raw[i].inv_scale == p_grid[i].inv_scale);
    CHECK(p_raw[i].zero_point == p_grid[i].zero_point);
  }
  CHECK(std::isnan(raw[3]));
  CHECK(raw[5] != grid[5]);  // left as it was
  const std::vector<int64_t> dims{40, k};
  std::vector<uint8_t> weight(static_cast<size_t>(40 * k), 0x5a);
  Quant q;
  q.kind = QuantKind::PerChannelGroup;
  q.group_size = 32;
  q.scales.assign(40 * 3, 0.02f);
  Quant q8;
  q8.kind = QuantKind::PerChannel;
  q8.scales.assign(40, 0.02f);
  const quant::Qd8Plan plans[] = {quant::qd8_plan(Datatype::QBInt4, q, dims, weight.data()),
                                  quant::qd8_plan(Datatype::QCInt8, q8, dims, weight.data())};
  for (const quant::Qd8Plan& plan : plans) {
    for (int level : {-1, 2, 0}) {  // the VNNI layout, the AVX2 one, the portable one
      kernels::isa::force_level = level;
      const size_t bytes = static_cast<size_t>(quant::qd8_rows_bytes(m, k));
      std::vector<uint8_t> a(bytes, 0), b(bytes, 0);
      quant::pack_qd8_rows(plan, raw.data(), m, k, p_raw.data(), quant::qd8_rows_in(a.data(), m, k));
      quant::pack_qd8_rows(plan, grid.data(), m, k, p_grid.data(), quant::qd8_rows_in(b.data(), m, k));
      INFO("weight kind " << static_cast<int>(plan.weight) << ", ISA level " << level);
      CHECK(a == b);
    }
    kernels::isa::force_level = -1;
  }
}

TEST_CASE("XNNPACK qd8: weight layouts the integer kernels do not read take the float path", "[xnnpack][quantized]") {
  const std::vector<uint8_t> data(8 * 64, 0x88);
  const auto plan = [&](Datatype d, const Quant& q, std::vector<int64_t> dims) {
    return quant::qd8_plan(d, q, dims, data.data()).weight;
  };
  Quant q;
  q.kind = QuantKind::PerChannelGroup;
  q.group_size = 16;  // half a block
  q.scales.assign(64, 1.f);
  CHECK(plan(Datatype::QBInt4, q, {8, 64}) == quant::Qd8Weight::None);
  q.group_size = 32;
  CHECK(plan(Datatype::QBInt4, q, {8, 48}) == quant::Qd8Weight::None);  // K not whole blocks
  CHECK(plan(Datatype::QBInt4, q, {8, 64}) == quant::Qd8Weight::Int4);
  q.kind = QuantKind::PerChannel;
  q.channel_dim = 1;  // one scale per input column
  CHECK(plan(Datatype::QCInt4, q, {8, 64}) == quant::Qd8Weight::None);
  CHECK(plan(Datatype::QCInt8, q, {8, 64}) == quant::Qd8Weight::None);
  q.channel_dim = 0;
  CHECK(plan(Datatype::QCInt8, q, {8, 64}) == quant::Qd8Weight::Int8);
  CHECK(plan(Datatype::QCInt8, q, {1, quant::kInt8MaxCols + 1}) == quant::Qd8Weight::None);  // could overflow int32
}

TEST_CASE("XNNPACK quantization: convolutions of int8 grids by int8 filters run in the int8 GEMM on a VNNI CPU",
          "[xnnpack][quantized]") {
  // Note [xnnpack int8 filters]: the filter stays bytes (no float copy) where the CPU has VNNI; ETRT_ISA=avx512
  // (force_level here) keeps the float path, and both match upstream in tests/python/test_xnnpack_quantized.py.
  for (int level : {-1, int{kernels::isa::kAvx512}}) {
    kernels::isa::force_level = level;
    const bool vnni = kernels::qgemm::has_vnni();
    for (const char* name : {"q_cnn_static_xnnpack", "q_inverted_residual_xnnpack", "q_mlp_static_xnnpack"}) {
      INFO(name << " level " << kernels::isa::level());
      const auto made = etrt::test::create_executor(name, "xnnpack_quantized");
      const Graph& graph = made.graph;
      int int8_nodes = 0, convolutions = 0;
      for (size_t i = 0; i < graph.nodes.size(); ++i) {
        const Node& n = graph.nodes[i];
        if (n.kind_name == "XNNConv2d") ++convolutions;
        if (!made.executor->int8_path(i)) continue;
        ++int8_nodes;
        CHECK((n.kind_name == "XNNConv2d" || n.kind_name == "XNNFullyConnected"));
        CHECK(made.executor->packed_path(i));
        CHECK_FALSE(made.executor->holds_float_copy(n.inputs[1]));
      }
      if (!vnni) CHECK(int8_nodes == 0);
      else if (convolutions > 0) CHECK(int8_nodes >= convolutions);
    }
  }
  kernels::isa::force_level = -1;
}

TEST_CASE("XNNPACK: elementwise loops that round their quantized output give the loop then the requantize pass",
          "[xnnpack][quantized]") {
  // fast::OutGrid: the clamp to output_min_max and the rounding done block by block as the loop writes, bit for bit
  // what the executor's pass (quant::fake_quantize) gives, NaN included; equal shapes, a scalar and a repeated row.
  const float scale = 0.05f;
  const int32_t zp = 3;
  const QRange range{-128, 127};
  const float lo = 0.f, hi = 6.f;
  const fast::OutGrid grid{lo, hi, 1.f / scale, float(range.lo - zp), float(range.hi - zp), scale};
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-8.f, 8.f);
  std::vector<float> a(24 * 200), b(24 * 200);  // over one 4096-value block, and over one group of rows
  for (float& v : a) v = u(rng);
  for (float& v : b) v = u(rng);
  a[5] = std::nanf("");
  b[40] = std::nanf("");
  const auto shape = [](std::initializer_list<int64_t> d) { return ValueShape::of(std::vector<int64_t>(d)); };
  const ValueShape full = shape({200, 24}), row = shape({24}), one = shape({1});
  const auto check = [&](const ValueShape& bs, auto op) {
    std::vector<float> fused(a.size()), passes(a.size());
    REQUIRE(fast::binary(full, a.data(), bs, b.data(), full, fused.data(), op, &grid));
    REQUIRE(fast::binary(full, a.data(), bs, b.data(), full, passes.data(), op));
    quant::fake_quantize(passes.data(), passes.data(), static_cast<int64_t>(passes.size()), scale, zp, range, lo, hi);
    CHECK(std::memcmp(fused.data(), passes.data(), fused.size() * sizeof(float)) == 0);
  };
  for (const ValueShape* bs : {&full, &row, &one}) {
    check(*bs, fast::Add{});
    check(*bs, fast::Mul{});
    check(*bs, fast::Min{});
  }
  std::vector<float> fused(a.size()), passes(a.size());
  fast::sigmoid(a.data(), fused.data(), static_cast<int64_t>(a.size()), grid);
  fast::sigmoid(a.data(), passes.data(), static_cast<int64_t>(a.size()));
  quant::fake_quantize(passes.data(), passes.data(), static_cast<int64_t>(passes.size()), scale, zp, range, lo, hi);
  CHECK(std::memcmp(fused.data(), passes.data(), fused.size() * sizeof(float)) == 0);
}
