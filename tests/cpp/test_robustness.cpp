// No truncation or corruption of a real file crashes: every load either succeeds or returns an error.
#include "test_support.h"

using namespace etrt;
using namespace etrt::test;

namespace {
/// Loads every method of the bytes as a program (or a bundled program); returns true if anything failed cleanly.
void load_everything(std::span<const uint8_t> bytes) {
  auto src = DataSource::copy_of(bytes);
  std::shared_ptr<const DataSource> program_src = src;
  if (BundledProgram::is_bundled(bytes)) {
    auto bp = BundledProgram::load(src);
    if (!bp) return;
    program_src = (*bp)->program_source();
  }
  auto p = Program::load(program_src, Verification::InternalConsistency);
  if (!p) return;
  for (const auto& name : (*p)->method_names()) {
    auto m = Method::load(*p, name, options());
    (void)m;
  }
}

std::vector<std::filesystem::path> corpus_programs() {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(corpus_dir())) {
    const auto ext = e.path().extension();
    if (ext == ".pte" || ext == ".bpte") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}
}  // namespace

TEST_CASE("robustness: every truncation of every corpus file is an error, never a crash", "[robustness]") {
  if (!have_corpus()) return;
  for (const auto& path : corpus_programs()) {
    const auto bytes = read_file(path);
    INFO(path.filename().string());
    for (size_t n = 0; n < bytes.size(); ++n) {
      auto src = DataSource::copy_of(std::span<const uint8_t>(bytes.data(), n));
      if (BundledProgram::is_bundled(bytes)) {
        auto bp = BundledProgram::load(src);
        if (bp) load_everything(std::span<const uint8_t>(bytes.data(), n));
        continue;
      }
      auto p = Program::load(src, Verification::InternalConsistency);
      if (p) {  // a truncation that kept the whole flatbuffer may load; its methods must still fail cleanly or work
        for (const auto& name : (*p)->method_names()) (void)Method::load(*p, name, options());
      } else {
        REQUIRE(p.error().code != Error::Ok);
        REQUIRE_FALSE(p.error().what.empty());
      }
    }
  }
}

TEST_CASE("robustness: truncated programs report InvalidProgram with a message", "[robustness]") {
  if (!have_corpus()) return;
  const auto bytes = read_file(corpus_dir() / "arduino_add_model.pte");
  auto p = Program::load(DataSource::copy_of(std::span<const uint8_t>(bytes.data(), bytes.size() / 2)));
  REQUIRE_FALSE(p.has_value());
  CHECK(p.error().code == Error::InvalidProgram);
  CHECK_THAT(p.error().what, Catch::Contains("program"));
}

TEST_CASE("robustness: a deterministic byte-flip sweep never crashes the loader or a run", "[robustness]") {
  if (!have_corpus()) return;
  BitFlipper flip(0x9e3779b97f4a7c15ull);
  for (const auto& path : corpus_programs()) {
    const auto original = read_file(path);
    INFO(path.filename().string());
    if (original.size() > 20000) continue;
    for (int trial = 0; trial < 300; ++trial) {
      const auto bytes = flip(original);
      load_everything(bytes);
    }
  }
}

TEST_CASE("robustness: wrong identifiers are rejected with their name", "[robustness]") {
  std::vector<uint8_t> bytes(64, 0);
  std::memcpy(bytes.data() + 4, "ET11", 4);
  auto p = Program::load(DataSource::copy_of(bytes));
  REQUIRE_FALSE(p.has_value());
  CHECK_THAT(p.error().what, Catch::Contains("incompatible version"));
  std::memcpy(bytes.data() + 4, "XXXX", 4);
  p = Program::load(DataSource::copy_of(bytes));
  REQUIRE_FALSE(p.has_value());
  CHECK_THAT(p.error().what, Catch::Contains("not an ExecuTorch program"));
  auto empty = Program::load(DataSource::copy_of({}));
  REQUIRE_FALSE(empty.has_value());
}
