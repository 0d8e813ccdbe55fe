// The project's own fixtures, exported by the real exporter (tools/export): every bundled program verifies.
#include "test_support.h"

using namespace etrt;
using namespace etrt::test;

TEST_CASE("fixtures: every exported .bpte verifies all its test cases", "[fixtures]") {
  const auto dir = fixture_dir();
  REQUIRE(std::filesystem::exists(dir));
  int verified = 0;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".bpte") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    INFO(path.filename().string());
    auto src = DataSource::from_file(path.string());
    REQUIRE(src.has_value());
    auto bp = BundledProgram::load(*src);
    REQUIRE(bp.has_value());
    auto prog = Program::load((*bp)->program_source(), Verification::InternalConsistency);
    INFO((prog ? std::string() : prog.error().describe()));
    REQUIRE(prog.has_value());
    for (const auto& suite : (*bp)->suites()) {
      auto m = load_method(*prog, suite.method_name);
      for (size_t i = 0; i < suite.cases.size(); ++i) {
        auto li = (*bp)->load_inputs(*m, i);
        INFO((li ? std::string() : li.error().describe()));
        REQUIRE(li.has_value());
        // Unplanned outputs get storage from the caller, as the bindings do.
        std::vector<ArenaPtr> outs;
        for (size_t o = 0; o < m->num_outputs(); ++o) {
          if (!m->output_needs_storage(o)) continue;
          const size_t n = m->output(o).tensor_unchecked().capacity_nbytes();
          outs.push_back(allocate_aligned(n));
          REQUIRE(m->set_output_data_ptr(o, outs.back().get(), n).has_value());
        }
        execute(*m);
        auto s = (*bp)->verify_outputs(*m, i, 1e-4, 1e-5);
        INFO("method " << suite.method_name << " case " << i << ": " << (s ? std::string() : s.error().describe()));
        CHECK(s.has_value());
        ++verified;
      }
    }
  }
  CHECK(verified > 0);
}
