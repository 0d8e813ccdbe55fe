// The XnnpackBackend delegate: its payload parser on the exporter's real payloads (tests/fixtures/xnnpack, made by
// tools/export/export_xnnpack_fixtures.py), truncation and byte-flip sweeps (errors, never crashes), and whole
// programs run through Method against torch eager's outputs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fstream>  // npz_reader.h reads files with std::ifstream

#include "device/npz_reader.h"
#include "etrt/backends/xnnpack/xnnpack_backend.h"
#include "test_support.h"
#include "xnnpack_test_support.h"

using namespace etrt;
using namespace etrt::xnnpack;

namespace {

using etrt::test::Fixture;
using etrt::test::first_payload;
using etrt::test::lookup;

std::filesystem::path xnn_dir() { return etrt::test::fixture_dir().parent_path() / "xnnpack"; }

const char* const kFixtures[] = {"xnn_mlp",         "xnn_cnn",     "xnn_dwsep",    "xnn_transformer",
                                 "xnn_elementwise", "xnn_spatial", "xnn_ceilpool", "xnn_silu",
                                 "xnn_winograd",    "xnn_se",      "xnn_avgpool"};

}  // namespace

TEST_CASE("XNNPACK: the exporter's payloads parse and validate", "[xnnpack][payload]") {
  for (const char* name : kFixtures) {
    INFO(name);
    const Fixture f = first_payload(name);
    auto g = parse_payload(f.payload, lookup(*f.program));
    INFO((g ? std::string() : g.error().what));
    REQUIRE(g.has_value());
    CHECK_FALSE(g->nodes.empty());
    CHECK_FALSE(g->input_ids.empty());
    CHECK_FALSE(g->output_ids.empty());
    auto e = Executor::create(std::move(*g));
    INFO((e ? std::string() : e.error().what));
    CHECK(e.has_value());
  }
}

TEST_CASE("XNNPACK: the MLP payload decodes to FullyConnected nodes over named constants", "[xnnpack][payload]") {
  const Fixture f = first_payload("xnn_mlp");
  auto g = parse_payload(f.payload, lookup(*f.program));
  REQUIRE(g.has_value());
  CHECK(g->nodes[0].kind == node_kind_code("XNNFullyConnected"));
  CHECK(g->nodes[0].has_min_max);  // the ReLU after the first linear is fused as output_min_max
  CHECK(g->nodes[0].out_min == 0.f);
  const Value& w = g->values[g->nodes[0].inputs[1]];
  CHECK(w.dims == std::vector<int64_t>{32, 16});
  CHECK(w.constant.size() == 32 * 16 * sizeof(float));
}

TEST_CASE("XNNPACK: constants naming missing data are a load error naming the key", "[xnnpack][payload]") {
  const Fixture f = first_payload("xnn_mlp");
  const NamedDataLookup none = [](std::string_view key) -> Result<std::span<const uint8_t>> {
    return fail(Error::NotFound, "no named data '", key, "'");
  };
  auto g = parse_payload(f.payload, none);
  REQUIRE_FALSE(g.has_value());
  CHECK(g.error().code == Error::NotFound);
  CHECK(g.error().what.find("named") != std::string::npos);
}

TEST_CASE("XNNPACK: every truncation of a payload is an error, never a crash", "[xnnpack][payload][robustness]") {
  for (const char* name : {"xnn_mlp", "xnn_cnn"}) {
    INFO(name);
    const Fixture f = first_payload(name);
    const auto look = lookup(*f.program);
    const uint32_t fb_end = fb::load_le<uint32_t>(f.payload.data() + 10) + fb::load_le<uint32_t>(f.payload.data() + 14);
    for (size_t n = 0; n < f.payload.size(); ++n) {
      // A copy of exactly n bytes, so a read past the cut is a sanitizer error too.
      std::vector<uint8_t> cut(f.payload.begin(), f.payload.begin() + n);
      auto g = parse_payload(cut, look);
      if (n < fb_end) {
        INFO(n);
        CHECK_FALSE(g.has_value());
      }
    }
  }
}

TEST_CASE("XNNPACK: byte flips anywhere in a payload never crash", "[xnnpack][payload][robustness]") {
  for (const char* name : {"xnn_mlp", "xnn_cnn", "xnn_elementwise"}) {
    INFO(name);
    const Fixture f = first_payload(name);
    const auto look = lookup(*f.program);
    std::vector<uint8_t> bytes(f.payload.begin(), f.payload.end());
    size_t rejected = 0, runnable = 0;
    for (size_t i = 0; i < bytes.size(); ++i) {
      for (uint8_t mask : {uint8_t{0xFF}, uint8_t{0x01}, uint8_t{0x80}}) {
        bytes[i] ^= mask;
        auto g = parse_payload(bytes, look);
        if (!g) {
          ++rejected;
        } else if (auto e = Executor::create(std::move(*g)); e) {
          ++runnable;  // a flip in a value (a dim, a stride) may still be a well-formed graph
        } else {
          ++rejected;
        }
        bytes[i] ^= mask;
      }
    }
    CHECK(rejected > 0);
    CHECK(runnable > 0);
  }
}

TEST_CASE("XNNPACK: header fields out of range are named", "[xnnpack][payload]") {
  const Fixture f = first_payload("xnn_mlp");
  std::vector<uint8_t> b(f.payload.begin(), f.payload.end());
  b[4] = 'Z';
  auto g = parse_payload(b, lookup(*f.program));
  REQUIRE_FALSE(g.has_value());
  CHECK(g.error().what.find("XH00") != std::string::npos);
  b[4] = 'X';
  const uint32_t huge = 0x7FFFFFFF;
  std::memcpy(b.data() + 14, &huge, 4);
  g = parse_payload(b, lookup(*f.program));
  REQUIRE_FALSE(g.has_value());
  CHECK(g.error().what.find("flatbuffer") != std::string::npos);
}

TEST_CASE("XNNPACK: lowered programs run through Method and match torch eager", "[xnnpack][method]") {
  static const XnnpackDelegate delegate;
  const BackendEntry backends[] = {{kXnnpackBackendId, &delegate}};
  for (const char* name : kFixtures) {
    INFO(name);
    auto program = etrt::test::load_program(xnn_dir() / (std::string(name) + ".pte"));
    auto m = Method::load(program, "forward", LoadOptions{etrt::test::kernel_table(), backends});
    INFO((m ? std::string() : m.error().describe()));
    REQUIRE(m.has_value());
    Method& method = **m;
    auto npz = etrt::test::read_npz(xnn_dir() / (std::string(name) + ".npz"));
    for (size_t i = 0; npz.count("in" + std::to_string(i)); ++i) {
      const auto& a = npz.at("in" + std::to_string(i));
      etrt::test::set_input(method, i, a.data, a.shape);
    }
    etrt::test::execute(method);
    for (size_t i = 0; npz.count("out" + std::to_string(i)); ++i) {
      const auto& want = npz.at("out" + std::to_string(i));
      const auto got = etrt::test::output<float>(method, i);
      REQUIRE(got.size() == want.data.size());
      for (size_t k = 0; k < got.size(); ++k) {
        INFO("out" << i << "[" << k << "]");
        CHECK(std::abs(got[k] - want.data[k]) <= 1e-4f + 1e-4f * std::abs(want.data[k]));
      }
    }
  }
}

TEST_CASE("XNNPACK: a program using the delegate without it registered names the backend", "[xnnpack][method]") {
  auto program = etrt::test::load_program(xnn_dir() / "xnn_mlp.pte");
  auto m = Method::load(program, "forward", LoadOptions{etrt::test::kernel_table(), {}});
  REQUIRE_FALSE(m.has_value());
  CHECK(m.error().what.find("XnnpackBackend") != std::string::npos);
}

TEST_CASE("XNNPACK: a padding that would blow up the scratch buffer is refused at init", "[xnnpack][robustness]") {
  // Regression: a 9.5 KB payload made the executor zero-fill a padded copy of several GB before any shape check.
  Fixture f = first_payload("xnn_ceilpool");
  auto g = parse_payload(f.payload, lookup(*f.program));
  REQUIRE(g.has_value());
  bool found = false;
  for (Node& n : g->nodes) {
    if (n.kind != node_kind_code("XNNMaxPooling2d")) continue;
    n.conv[2] = 1u << 30;  // bottom padding: 2^30 rows of -inf
    found = true;
  }
  REQUIRE(found);
  auto exec = Executor::create(std::move(*g));
  REQUIRE_FALSE(exec.has_value());
  CHECK(exec.error().what.find("exceeds the input") != std::string::npos);
}

TEST_CASE("XNNPACK: the load option's cap bounds a graph's memory", "[xnnpack][robustness]") {
  Fixture f = first_payload("xnn_cnn");
  auto g = parse_payload(f.payload, lookup(*f.program));
  REQUIRE(g.has_value());
  auto exec = Executor::create(std::move(*g), 1024);
  REQUIRE_FALSE(exec.has_value());
  CHECK(exec.error().what.find("over the load option's cap of 1024 bytes") != std::string::npos);
}

TEST_CASE("XNNPACK: fully-connected and convolution nodes run on filters packed at load", "[xnnpack][packed]") {
  for (const char* name : {"xnn_mlp", "xnn_cnn", "xnn_dwsep"}) {
    INFO(name);
    const auto made = etrt::test::create_executor(name);
    int packed = 0;
    for (size_t i = 0; i < made.executor->graph().nodes.size(); ++i) {
      const Node& n = made.executor->graph().nodes[i];
      const bool filtered = n.kind == node_kind_code("XNNFullyConnected") || n.kind == node_kind_code("XNNConv2d") ||
                            n.kind == node_kind_code("XNNDepthwiseConv2d");
      INFO(n.where());
      CHECK(made.executor->packed_path(i) == filtered);
      packed += made.executor->packed_path(i);
    }
    CHECK(packed > 0);
  }
}

TEST_CASE("XNNPACK: 3x3 stride-1 convolutions large enough run the Winograd transform the plan picks",
          "[xnnpack][packed][winograd]") {
  // xnn_winograd: a 24x24 16 -> 64 layer (F(4x4, 3x3)), a 12x12 64 -> 64 one (F(2x2, 3x3)), then a strided one
  // (the direct GEMM). Its numbers are checked against eager by the fixture test above.
  if (std::getenv("ETRT_WINOGRAD")) {
    WARN("ETRT_WINOGRAD is set: the plan is not the default one");
    return;
  }
  const auto made = etrt::test::create_executor("xnn_winograd");
  std::vector<int> tiles;
  for (size_t i = 0; i < made.executor->graph().nodes.size(); ++i)
    if (made.executor->graph().nodes[i].kind == node_kind_code("XNNConv2d")) {
      CHECK(made.executor->packed_path(i));
      tiles.push_back(made.executor->winograd_tile(i));
    }
  CHECK(tiles == std::vector<int>{4, 2, 0});
}

TEST_CASE("XNNPACK: SiLU (Sigmoid and Multiply) runs inside the layer writing its input where only it reads that",
          "[xnnpack][packed]") {
  // xnn_silu: SiLU after a convolution, a depthwise convolution and a linear layer, once on a value a residual
  // add reads too (two nodes), and once on an add's output (a chain headed by its Sigmoid, Note [xnnpack silu
  // chain]). The numbers are checked against eager by the fixture test above.
  const auto made = etrt::test::create_executor("xnn_silu");
  int sigmoids = 0, fused_sigmoids = 0, fused_multiplies = 0, other_fused = 0, chains = 0, in_place = 0;
  for (size_t i = 0; i < made.executor->graph().nodes.size(); ++i) {
    const Node& n = made.executor->graph().nodes[i];
    const bool sigmoid = n.kind == node_kind_code("XNNSigmoid"), multiply = n.kind == node_kind_code("XNNMultiply");
    sigmoids += sigmoid;
    if (const auto c = made.executor->chain_at(i)) {
      ++chains;
      CHECK((*c)[0] == i);
      CHECK((*c)[1] == i);  // no Convert before it in a float graph, none after it
      CHECK((*c)[3] == SIZE_MAX);
      CHECK(made.executor->runs_in_writer((*c)[2]));
    }
    if (!made.executor->runs_in_writer(i)) continue;
    if (sigmoid && !made.executor->chain_at(i)) {
      // x * sigmoid(x) overwrites x where the Multiply's output is an intermediate: one tensor stored, not two.
      const Graph& gr = made.executor->graph();
      const auto mul = std::ranges::find_if(gr.nodes, [&](const Node& m) {
        return m.kind == node_kind_code("XNNMultiply") && std::ranges::count(m.inputs, n.output) == 1;
      });
      REQUIRE(mul != gr.nodes.end());
      if (made.executor->value_data(mul->output)) {
        ++in_place;
        CHECK(made.executor->value_data(mul->output) == made.executor->value_data(n.inputs[0]));
      }
    }
    fused_sigmoids += sigmoid;
    fused_multiplies += multiply;
    other_fused += !sigmoid && !multiply;
  }
  CHECK(sigmoids == 5);
  CHECK(fused_sigmoids == 3);
  CHECK(fused_multiplies == 4);
  CHECK(chains == 1);
  CHECK(other_fused == 0);
  CHECK(in_place >= 2);
}

TEST_CASE("XNNPACK: a squeeze-and-excitation gate scales the projection's filter where the activation is larger",
          "[xnnpack][packed]") {
  // Note [xnnpack gated filter]. xnn_se: the first block's 12x12x64 map, gated, projected to 24 channels (9,216
  // values against a 1,536-weight filter: the filter is scaled and the Multiply is skipped); the second block's 3x3x24
  // map projected to 96 (216 values against 2,304 weights: the Multiply runs). The numbers are checked against eager
  // by the fixture test above.
  const auto made = etrt::test::create_executor("xnn_se");
  const Graph& gr = made.executor->graph();
  int gated = 0, kept = 0;
  for (const Node& n : gr.nodes) {
    // The gates' Multiply: [1, H, W, C] by [1, 1, 1, C] (SiLU's multiplies x by sigmoid(x), of equal sizes).
    if (n.kind != node_kind_code("XNNMultiply") || gr.values[n.inputs[0]].numel == gr.values[n.inputs[1]].numel)
      continue;
    const auto conv = std::ranges::find_if(gr.nodes, [&](const Node& m) { return m.inputs[0] == n.output; });
    REQUIRE(conv != gr.nodes.end());
    CHECK(conv->kind == node_kind_code("XNNConv2d"));
    const bool skipped = made.executor->runs_in_writer(n.index);
    gated += skipped;
    kept += !skipped;
    if (skipped) {  // the convolution reads the ungated activation's bytes through the Multiply's output
      const uint32_t x = gr.values[n.inputs[0]].numel > gr.values[n.inputs[1]].numel ? n.inputs[0] : n.inputs[1];
      CHECK(made.executor->value_data(n.output) == made.executor->value_data(x));
      CHECK(gr.values[conv->inputs[1]].dims[0] == 24);
    }
  }
  CHECK(gated == 1);
  CHECK(kept == 1);
}

TEST_CASE("XNNPACK: a pointwise expansion runs band by band into the depthwise layer reading its wide output",
          "[xnnpack][packed]") {
  // Note [pointwise then depthwise]. xnn_bands: two 4 -> 40 expansions over 128 x 128 (2.6 MB wide tensors), one
  // with ReLU6 fused as its clamp, one with SiLU (run by the expansion: Note [xnnpack silu]), each read only by a
  // depthwise layer; the projections' 1x1 layers are read by an add or are the output, and stay apart. The numbers
  // are checked against eager by the fixture test above.
  const auto made = etrt::test::create_executor("xnn_bands");
  const Graph& gr = made.executor->graph();
  std::vector<size_t> pairs;
  for (size_t i = 0; i < gr.nodes.size(); ++i) {
    const size_t d = made.executor->band_with(i);
    if (d == SIZE_MAX) continue;
    pairs.push_back(i);
    CHECK(gr.nodes[i].kind == node_kind_code("XNNConv2d"));
    REQUIRE(d < gr.nodes.size());
    CHECK(gr.nodes[d].kind == node_kind_code("XNNDepthwiseConv2d"));
    CHECK(gr.values[gr.nodes[d].inputs[0]].numel == 128 * 128 * 40);
  }
  CHECK(pairs.size() == 2);
}

TEST_CASE("XNNPACK: a reshape or copy between float intermediates keeps its input's bytes", "[xnnpack]") {
  // Note [xnnpack reshape alias]: no copy where the output would hold the input's bytes unchanged; the fixtures'
  // numbers (checked against eager above) are unchanged. xnn_cnn reshapes its pooled features for the linear
  // layer. A reshape that may not take its input's bytes (an external, a quantized value) keeps its own.
  int aliased = 0;
  for (const char* name : {"xnn_cnn", "xnn_transformer"}) {
    const auto made = etrt::test::create_executor(name);
    const Graph& gr = made.executor->graph();
    for (const Node& n : gr.nodes) {
      if (n.kind != node_kind_code("XNNStaticReshape") && n.kind != node_kind_code("XNNCopy")) continue;
      const Value &in = gr.values[n.inputs[0]], &out = gr.values[n.output];
      const uint32_t external = kValueExternalInput | kValueExternalOutput;
      const bool internal = !(in.flags & external) && !(out.flags & external) && in.constant.empty();
      INFO(name << ": node " << n.index);
      if (internal && in.datatype == Datatype::Fp32 && in.quant.kind == QuantKind::None) {
        CHECK(made.executor->value_data(n.output) == made.executor->value_data(n.inputs[0]));
        ++aliased;
      } else if (made.executor->value_data(n.output) && made.executor->value_data(n.inputs[0])) {
        CHECK(made.executor->value_data(n.output) != made.executor->value_data(n.inputs[0]));
      }
    }
  }
  CHECK(aliased >= 1);  // xnn_cnn's
}

TEST_CASE("XNNPACK: a reshaped graph input is read in place, and the caller's tensor is left as it was",
          "[xnnpack]") {
  // Note [xnnpack borrowed input]: xnn_reshaped_inputs reshapes x for a linear layer and y for a SiLU whose
  // Sigmoid and Multiply write their own output (no writer to fuse them into); both reshapes read the caller's bytes.
  const auto made = etrt::test::create_executor("xnn_reshaped_inputs");
  const Graph& gr = made.executor->graph();
  const auto borrowed = made.executor->borrowed_inputs();
  int reshapes = 0;
  for (const Node& n : gr.nodes) {
    if (n.kind != node_kind_code("XNNStaticReshape") || !(gr.values[n.inputs[0]].flags & kValueExternalInput))
      continue;
    ++reshapes;
    INFO("reshape node " << n.index);
    CHECK(std::ranges::find(borrowed, std::pair{n.output, n.inputs[0]}) != borrowed.end());
  }
  CHECK(reshapes == 2);
  REQUIRE(borrowed.size() == 2);

  // A call: the borrowed values are the inputs' storage, the outputs are eager's, the inputs unchanged.
  auto npz = etrt::test::read_npz(etrt::test::fixture_dir().parent_path() / "xnnpack" / "xnn_reshaped_inputs.npz");
  std::vector<std::vector<float>> data(gr.num_externs);
  std::vector<EValue> values(gr.num_externs);
  std::vector<const etrt::test::NpyArray*> expected(gr.num_externs, nullptr);
  for (const Value& v : gr.values) {
    if (!v.present || !(v.flags & (kValueExternalInput | kValueExternalOutput))) continue;
    const bool input = v.flags & kValueExternalInput;
    const etrt::test::NpyArray* a = nullptr;
    for (const char* key : input ? std::array{"in0", "in1"} : std::array{"out0", "out1"})
      if (static_cast<int64_t>(npz.at(key).data.size()) == v.numel) a = &npz.at(key);
    INFO("external " << v.external_id << " numel " << v.numel << " flags " << v.flags);
    REQUIRE(a);
    data[v.external_id] = input ? a->data : std::vector<float>(a->data.size(), -1.f);
    expected[v.external_id] = a;
    auto t = Tensor::make(ScalarType::Float, a->shape, {}, data[v.external_id].data());
    REQUIRE(t);
    values[v.external_id] = EValue(std::move(*t));
  }
  std::vector<EValue*> args;
  for (EValue& v : values) args.push_back(&v);
  const auto ran = made.executor->execute(args);
  INFO((ran ? std::string() : ran.error().what));
  REQUIRE(ran);
  for (const auto& [value, input] : borrowed)
    CHECK(made.executor->value_data(value) == data[gr.values[input].external_id].data());
  for (const Value& v : gr.values) {
    if (!v.present || !(v.flags & (kValueExternalInput | kValueExternalOutput))) continue;
    const auto& got = data[v.external_id];
    const auto& want = expected[v.external_id]->data;
    for (size_t i = 0; i < want.size(); ++i) {
      INFO("external " << v.external_id << " element " << i);
      if (v.flags & kValueExternalInput) REQUIRE(got[i] == want[i]);  // bit for bit: never written
      else REQUIRE(std::abs(got[i] - want[i]) <= 1e-6 + 1e-5 * std::abs(want[i]));
    }
  }
}

TEST_CASE("XNNPACK: packed filters count against the graph's memory cap", "[xnnpack][packed][robustness]") {
  // The smallest cap the graph loads under, then that cap less a byte: the packed filters are the last allocation.
  const Fixture f = first_payload("xnn_cnn");
  uint64_t lo = 1, hi = uint64_t{1} << 26;
  while (lo < hi) {
    const uint64_t mid = (lo + hi) / 2;
    auto g = parse_payload(f.payload, lookup(*f.program));
    REQUIRE(g.has_value());
    if (Executor::create(std::move(*g), mid)) hi = mid;
    else lo = mid + 1;
  }
  auto g = parse_payload(f.payload, lookup(*f.program));
  REQUIRE(g.has_value());
  auto e = Executor::create(std::move(*g), lo - 1);
  REQUIRE_FALSE(e.has_value());
  CHECK(e.error().what.find("packed filter needs") != std::string::npos);
}

TEST_CASE("XNNPACK: the contiguous elementwise loops take equal shapes, scalars and repeated rows only",
          "[xnnpack][elementwise]") {
  const auto shape = [](std::initializer_list<int64_t> d) { return ValueShape::of(std::vector<int64_t>(d)); };
  std::vector<float> a(2 * 3 * 4), b(2 * 3 * 4), o(2 * 3 * 4);
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(i) - 7.f, b[i] = 0.5f * float(i % 5) - 1.f;
  const ValueShape full = shape({2, 3, 4});
  SECTION("equal shapes") {
    REQUIRE(fast::binary(full, a.data(), full, b.data(), full, o.data(), fast::Sub{}));
    for (size_t i = 0; i < o.size(); ++i) CHECK(o[i] == a[i] - b[i]);
  }
  SECTION("a row repeated on either side, leading 1s dropped") {
    REQUIRE(fast::binary(full, a.data(), shape({1, 1, 4}), b.data(), full, o.data(), fast::Div{}));
    for (size_t i = 0; i < o.size(); ++i) CHECK(o[i] == a[i] / b[i % 4]);
    REQUIRE(fast::binary(shape({3, 4}), b.data(), full, a.data(), full, o.data(), fast::Sub{}));
    for (size_t i = 0; i < o.size(); ++i) CHECK(o[i] == b[i % 12] - a[i]);
  }
  SECTION("a scalar") {
    REQUIRE(fast::binary(full, a.data(), shape({1}), b.data(), full, o.data(), fast::Max{}));
    for (size_t i = 0; i < o.size(); ++i) CHECK(o[i] == std::max(a[i], b[0]));
  }
  SECTION("other broadcasts are left to the portable kernels") {
    CHECK_FALSE(fast::binary(full, a.data(), shape({2, 1, 4}), b.data(), full, o.data(), fast::Add{}));
    CHECK_FALSE(fast::binary(shape({2, 1, 4}), a.data(), shape({3, 1}), b.data(), full, o.data(), fast::Add{}));
  }
  SECTION("minimum and maximum propagate NaN from either side") {
    const float nan = std::nanf("");
    CHECK(std::isnan(fast::Min{}(nan, 1.f)));
    CHECK(std::isnan(fast::Min{}(1.f, nan)));
    CHECK(std::isnan(fast::Max{}(nan, 1.f)));
    CHECK(std::isnan(fast::Max{}(1.f, nan)));
  }
  SECTION("sigmoid: saturates to 0 and 1, keeps NaN") {
    std::vector<float> x{-200.f, -10.f, 0.f, 10.f, 200.f, nanf(""), 1.f, -1.f, 3.f}, y(x.size());
    fast::sigmoid(x.data(), y.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(x[i])) CHECK(std::isnan(y[i]));
      else CHECK(y[i] == Approx(1.0 / (1.0 + std::exp(-double(x[i])))).margin(1e-7));
    }
  }
}
