// XNNPACK node kinds that the 1.5.1 exporter's schema defines but its partitioner never emits
// (XNNScaledDotProductAttention, XNNArgMaxPooling2d): payloads made with the wheel's own serializer
// (tools/export/make_xnnpack_node_payloads.py, tests/fixtures/xnnpack_nodes) run through the executor and are
// compared with torch (SDPA) and with XNNPACK's argmax-pooling definition written out in Python.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>  // npz_reader.h reads files with std::ifstream
#include <string>
#include <vector>

#include "device/npz_reader.h"
#include "etrt/backends/xnnpack/xnnpack_backend.h"
#include "test_support.h"

using namespace etrt;
using namespace etrt::xnnpack;

namespace {

std::filesystem::path nodes_dir() { return etrt::test::fixture_dir().parent_path() / "xnnpack_nodes"; }

struct Case {
  std::vector<uint8_t> payload;
  std::map<std::string, etrt::test::NpyArray> npz;
  std::vector<const etrt::test::NpyArray*> ins, outs;
};

Case load_case(const std::string& name) {
  Case c;
  c.payload = etrt::test::read_file(nodes_dir() / (name + ".bin"));
  c.npz = etrt::test::read_npz(nodes_dir() / (name + ".npz"));
  for (size_t i = 0; c.npz.count("x" + std::to_string(i)); ++i) c.ins.push_back(&c.npz.at("x" + std::to_string(i)));
  for (size_t i = 0; c.npz.count("y" + std::to_string(i)); ++i) c.outs.push_back(&c.npz.at("y" + std::to_string(i)));
  return c;
}

/// Runs the payload on the case's inputs. Output k is float32 unless `index_dtype` is given for the last output.
struct Run {
  std::vector<std::vector<float>> float_out;
  std::vector<int64_t> index_out;
};

Result<Run> run_case(Case& c, ScalarType index_dtype = ScalarType::Float) {
  ETRT_TRY(Graph g, parse_payload(c.payload, {}));
  ETRT_TRY(auto ex, Executor::create(std::move(g)));
  std::vector<EValue> values;
  values.reserve(c.ins.size() + c.outs.size());
  std::vector<std::vector<float>> in_data;
  for (const auto* a : c.ins) {
    in_data.push_back(a->data);
    ETRT_TRY(Tensor t, Tensor::make(ScalarType::Float, a->shape, {}, in_data.back().data()));
    values.emplace_back(std::move(t));
  }
  Run r;
  r.float_out.resize(c.outs.size());
  std::vector<int32_t> i32;
  std::vector<int64_t> i64;
  for (size_t k = 0; k < c.outs.size(); ++k) {
    const auto* a = c.outs[k];
    const bool index = index_dtype != ScalarType::Float && k + 1 == c.outs.size();
    void* data = nullptr;
    if (!index) {
      r.float_out[k].assign(a->data.size(), -12345.f);
      data = r.float_out[k].data();
    } else if (index_dtype == ScalarType::Long) {
      i64.assign(a->data.size(), -1);
      data = i64.data();
    } else {
      i32.assign(a->data.size(), -1);
      data = i32.data();
    }
    ETRT_TRY(Tensor t, Tensor::make(index ? index_dtype : ScalarType::Float, a->shape, {}, data));
    values.emplace_back(std::move(t));
  }
  std::vector<EValue*> args;
  for (EValue& v : values) args.push_back(&v);
  ETRT_CHECK_OK(ex->execute(args));
  if (!i64.empty()) r.index_out = i64;
  if (!i32.empty()) r.index_out.assign(i32.begin(), i32.end());
  return r;
}

}  // namespace

TEST_CASE("XNNPACK: scaled dot-product attention matches torch (multi-head, multi-query)", "[xnnpack][nodes]") {
  for (const char* name : {"sdpa_multi_head", "sdpa_multi_query"}) {
    INFO(name);
    Case c = load_case(name);
    auto r = run_case(c);
    INFO((r ? std::string() : r.error().what));
    REQUIRE(r.has_value());
    const auto& want = c.outs[0]->data;
    const auto& got = r->float_out[0];
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("element " << i);
      CHECK(std::abs(got[i] - want[i]) <= 1e-5f + 1e-5f * std::abs(want[i]));
    }
  }
}

TEST_CASE("XNNPACK: argmax pooling gives XNNPACK's values and window positions", "[xnnpack][nodes]") {
  for (const char* name : {"argmax_pool_2x2", "argmax_pool_padded"})
    for (const ScalarType index_dtype : {ScalarType::Int, ScalarType::Long}) {
      INFO(name << " indices as " << etrt::name(index_dtype));
      Case c = load_case(name);
      auto r = run_case(c, index_dtype);
      INFO((r ? std::string() : r.error().what));
      REQUIRE(r.has_value());
      CHECK(r->float_out[0] == c.outs[0]->data);  // maxima of small integers: exact
      std::vector<int64_t> want(c.outs[1]->data.begin(), c.outs[1]->data.end());
      CHECK(r->index_out == want);
    }
}

TEST_CASE("XNNPACK: argmax pooling refuses a float tensor for its int32 indices", "[xnnpack][nodes]") {
  Case c = load_case("argmax_pool_2x2");
  auto r = run_case(c, ScalarType::Float);
  REQUIRE_FALSE(r.has_value());
  CHECK_THAT(r.error().what, Catch::Contains("the graph expects Int"));
}

TEST_CASE("XNNPACK: SDPA with a query that does not fit the key fails with the shapes named", "[xnnpack][nodes]") {
  Case c = load_case("sdpa_multi_query");
  // Feed a query with fewer channels than the key has: the payload's dims bound it, the call's shapes disagree.
  auto& q = c.npz.at("x0");
  q.shape.back() /= 2;
  q.data.resize(q.data.size() / 2);
  auto r = run_case(c);
  REQUIRE_FALSE(r.has_value());
  CHECK_THAT(r.error().what, Catch::Contains("XNNScaledDotProductAttention"));
}

TEST_CASE("XNNPACK: truncated and byte-flipped node payloads fail cleanly", "[xnnpack][nodes]") {
  for (const char* name : {"sdpa_multi_head", "argmax_pool_padded"}) {
    const Case base = load_case(name);
    for (size_t cut = 0; cut < base.payload.size(); cut += 7) {
      Case c = base;
      c.payload.resize(cut);
      (void)run_case(c);  // an error or (for cuts past the graph) a run; never a crash
    }
    for (size_t at = 0; at < base.payload.size(); ++at) {
      Case c = base;
      c.payload[at] ^= 0x5a;
      (void)run_case(c);
    }
  }
}

TEST_CASE("XNNPACK: blockwise 4-bit weights whose group size does not divide the input channels are refused",
          "[xnnpack][nodes][quantized]") {
  // Made by the wheel's serializer (a qbint4 linear, group size 5 over 32 input channels): a load error naming the
  // value and both numbers, before any scale is read.
  const auto payload = etrt::test::read_file(nodes_dir() / "blockwise_group_5_of_32.bin");
  auto g = parse_payload(payload, {});
  std::string why;
  if (!g) {
    why = g.error().what;
  } else if (auto ex = Executor::create(std::move(*g)); !ex) {
    why = ex.error().what;
  }
  CHECK_THAT(why, Catch::Contains("XNNPACK value 1") && Catch::Contains("group size 5 does not divide the 32 input channels"));
}
