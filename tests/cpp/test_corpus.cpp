// Every corpus file loads and gives the outputs its MANIFEST entry states.
#include <cmath>
#include <numeric>

#include "test_support.h"

using namespace etrt;
using namespace etrt::test;

TEST_CASE("corpus: add.pte adds two [1] floats", "[corpus]") {
  if (!have_corpus()) return;
  auto p = load_program(corpus_dir() / "add.pte");
  auto m = load_method(p, "forward");
  const std::vector<std::array<float, 3>> cases = {{1, 1, 2}, {2, 3, 5}, {13.25f, 29.25f, 42.5f}, {1, 2, 3}, {3, 4, 7}};
  for (auto [a, b, c] : cases) {
    set_input(*m, 0, std::vector<float>{a}, {1});
    set_input(*m, 1, std::vector<float>{b}, {1});
    execute(*m);
    CHECK(output<float>(*m, 0) == std::vector<float>{c});
  }
  auto meta = p->method_meta("forward");
  REQUIRE(meta.has_value());
  CHECK(meta->inputs.size() == 2);
  CHECK(meta->planned_buffer_sizes == std::vector<int64_t>{48});
  CHECK(meta->num_instructions == 1);
}

TEST_CASE("corpus: supplying one input of two fails at execute", "[corpus]") {
  if (!have_corpus()) return;
  auto p = load_program(corpus_dir() / "add.pte");
  auto m = load_method(p, "forward");
  set_input(*m, 0, std::vector<float>{1}, {1});
  auto s = m->execute();
  REQUIRE_FALSE(s.has_value());
  CHECK(s.error().code == Error::InvalidArgument);
  CHECK_THAT(s.error().what, Catch::Contains("input 1 has not been set"));
}

TEST_CASE("corpus: arduino_add_model.pte broadcasts a rank-0 constant from the constant segment", "[corpus]") {
  if (!have_corpus()) return;
  auto p = load_program(corpus_dir() / "arduino_add_model.pte");
  CHECK(p->num_methods() == 1);
  auto m = load_method(p, "forward");
  set_input(*m, 0, std::vector<float>{1, 2, 3}, {3});
  execute(*m);
  CHECK(output<float>(*m, 0) == std::vector<float>{2, 3, 4});
}

TEST_CASE("corpus: ModuleLinear-no-constant-segment.pte reads the deprecated constant_buffer", "[corpus]") {
  if (!have_corpus()) return;
  auto p = load_program(corpus_dir() / "ModuleLinear-no-constant-segment.pte");
  auto m = load_method(p, "forward");
  set_input(*m, 0, std::vector<float>{1, 2, 3, 4}, {2, 2});
  execute(*m);
  CHECK(output<float>(*m, 0) == std::vector<float>{5, 8, 11, 14});
  set_input(*m, 0, std::vector<float>{0, 0, 0, 0}, {2, 2});
  execute(*m);
  CHECK(output<float>(*m, 0) == std::vector<float>{2, 2, 2, 2});
}

TEST_CASE("corpus: module_model_constant_buffer.pte computes where(mean == 0, 1.1, mean)", "[corpus]") {
  if (!have_corpus()) return;
  auto p = load_program(corpus_dir() / "module_model_constant_buffer.pte");
  auto m = load_method(p, "forward");
  const std::vector<std::pair<std::vector<float>, float>> cases = {
      {{1, 2}, 1.5f}, {{2, 3}, 2.5f}, {{0, 0}, 1.1f}, {{-1, 1}, 1.1f}, {{-3, 3.5f}, 0.25f}};
  for (const auto& [in, expected] : cases) {
    set_input(*m, 0, in, {1, 2});
    execute(*m);
    CHECK(output<float>(*m, 0)[0] == Approx(expected).epsilon(1e-5));
  }
  CHECK_FALSE(p->has_method("backward"));
  CHECK_FALSE(Method::load(p, "backward", options()).has_value());
}

TEST_CASE("corpus: softmax.pte matches the manifest checksums", "[corpus]") {
  if (!have_corpus()) return;
  auto p = load_program(corpus_dir() / "softmax.pte");
  auto m = load_method(p, "forward");
  std::vector<float> x(8192, 0.0f);
  set_input(*m, 0, x, {2, 4096});
  execute(*m);
  for (float v : output<float>(*m, 0)) REQUIRE(v == Approx(1.0 / 4096).epsilon(1e-5));
  for (int i = 0; i < 8192; ++i) x[i] = static_cast<float>(((37 * i) % 101) - 50) / 8.0f;
  set_input(*m, 0, x, {2, 4096});
  execute(*m);
  const auto y = output<float>(*m, 0);
  const double row0_first[] = {1.08030376e-08, 1.1019398e-06, 0.000112400914, 3.77063039e-08, 3.84614759e-06,
                               0.000392317743, 1.31607933e-07, 1.34243746e-05};
  for (int j = 0; j < 8; ++j) CHECK(y[j] == Approx(row0_first[j]).epsilon(1e-5));
  const double checks[2] = {2047.289042, 2045.733386};
  for (int r = 0; r < 2; ++r) {
    double sum = 0, weighted = 0;
    for (int j = 0; j < 4096; ++j) {
      sum += y[r * 4096 + j];
      weighted += j * static_cast<double>(y[r * 4096 + j]);
    }
    CHECK(sum == Approx(1.0).epsilon(1e-5));
    CHECK(weighted == Approx(checks[r]).epsilon(1e-5));
  }
}

TEST_CASE("corpus: maxpool2d.pte returns the values of a TensorList-returning kernel", "[corpus]") {
  if (!have_corpus()) return;
  auto p = load_program(corpus_dir() / "maxpool2d.pte");
  auto m = load_method(p, "forward");
  std::vector<float> x(802816);
  std::iota(x.begin(), x.end(), 0.0f);
  set_input(*m, 0, x, {1, 64, 112, 112});
  execute(*m);
  auto y = output<float>(*m, 0);
  REQUIRE(y.size() == 64 * 56 * 56);
  bool all = true;
  for (int c = 0; c < 64 && all; ++c)
    for (int i = 0; i < 56 && all; ++i)
      for (int j = 0; j < 56; ++j)
        if (y[(c * 56 + i) * 56 + j] != 12544.0f * c + 224.0f * i + 2.0f * j + 113.0f) all = false;
  CHECK(all);
  for (size_t n = 0; n < x.size(); ++n) x[n] = static_cast<float>((7919ull * n) % 1009);
  set_input(*m, 0, x, {1, 64, 112, 112});
  execute(*m);
  y = output<float>(*m, 0);
  CHECK(std::vector<float>(y.begin(), y.begin() + 8) == std::vector<float>{873, 873, 567, 964, 964, 658, 352, 902});
  double sum = 0;
  for (float v : y) sum += v;
  CHECK(sum == 154470561.0);
}

TEST_CASE("corpus: bundled_program.bpte verifies all 10 test cases", "[corpus][bundled]") {
  if (!have_corpus()) return;
  auto src = DataSource::from_file((corpus_dir() / "bundled_program.bpte").string());
  REQUIRE(src.has_value());
  auto bp = BundledProgram::load(*src);
  REQUIRE(bp.has_value());
  CHECK((*bp)->version() == 2);
  auto prog = Program::load((*bp)->program_source());
  REQUIRE(prog.has_value());
  auto m = load_method(*prog, "forward");
  for (size_t i = 0; i < 10; ++i) {
    REQUIRE((*bp)->load_inputs(*m, i).has_value());
    execute(*m);
    auto s = (*bp)->verify_outputs(*m, i, 1e-5, 1e-8);
    INFO((s ? std::string() : s.error().describe()));
    CHECK(s.has_value());
  }
  auto bad = (*bp)->load_inputs(*m, 10);
  REQUIRE_FALSE(bad.has_value());
  CHECK_THAT(bad.error().what, Catch::Contains("out of range"));
  set_input(*m, 0, std::vector<int32_t>{1, 2, 3, 4}, {2, 2});
  set_input(*m, 1, std::vector<int32_t>{10, 20, 30, 40}, {2, 2});
  execute(*m);
  CHECK(output<int32_t>(*m, 0) == std::vector<int32_t>{15, 28, 41, 54});
}

TEST_CASE("corpus: xor.pte needs its .ptd, and trains in place through its parameter outputs", "[corpus][ptd]") {
  if (!have_corpus()) return;
  auto p = load_program(corpus_dir() / "xor.pte");
  auto without = Method::load(p, "forward", options());
  REQUIRE_FALSE(without.has_value());
  CHECK_THAT(without.error().what, Catch::Contains("net.linear.weight"));
  for (const char* name : {"__et_training_gradients_index_forward", "__et_training_parameters_index_forward"}) {
    auto cm = load_method(p, name);
    execute(*cm);
    CHECK(cm->output(0).is_int());
  }
  auto fqn = load_method(p, "__et_training_fqn_forward");
  execute(*fqn);
  CHECK(fqn->output(0).string_unchecked() == "net.linear.weight");
  CHECK(fqn->output(3).string_unchecked() == "net.linear2.bias");

  auto ptd_src = DataSource::from_file((corpus_dir() / "xor.ptd").string());
  REQUIRE(ptd_src.has_value());
  auto ptd = FlatTensorData::load(*ptd_src);
  INFO((ptd ? std::string() : ptd.error().describe()));
  REQUIRE(ptd.has_value());
  CHECK((*ptd)->keys().size() == 4);
  auto m = load_method(p, "forward", ptd->get());
  set_input(*m, 0, std::vector<float>{1, 0}, {1, 2});
  set_input(*m, 1, std::vector<int64_t>{1}, {1});
  execute(*m);
  CHECK(output<float>(*m, 0)[0] == Approx(0.683540).margin(1e-5));
  CHECK(output<int64_t>(*m, 1)[0] == 1);
  const auto gb2 = output<float>(*m, 5);
  CHECK(gb2[0] == Approx(0.495173).margin(1e-5));
  CHECK(gb2[1] == Approx(-0.495173).margin(1e-5));
  const auto w1 = output<float>(*m, 6);
  CHECK(w1[0] == Approx(-0.00529398117).margin(1e-7));
}
