// Shared helpers for the runtime tests: locating the shared corpus and the project's fixtures, running a method.
#pragma once

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "etrt/runtime.h"

namespace etrt::test {

/// The portable kernel table; defined in kernel_table.cpp, the only test TU that instantiates the kernels.
std::span<const KernelEntry> kernel_table();

inline std::filesystem::path env_dir(const char* var, const char* fallback) {
  const char* v = std::getenv(var);
  return v ? std::filesystem::path(v) : std::filesystem::path(fallback);
}
/// The upstream corpus (../shared/corpus beside the checkout); tests skip with a message where it is absent.
inline std::filesystem::path corpus_dir() { return env_dir("ETRT_CORPUS_DIR", ETRT_DEFAULT_CORPUS_DIR); }
inline std::filesystem::path fixture_dir() { return env_dir("ETRT_FIXTURE_DIR", ETRT_DEFAULT_FIXTURE_DIR); }
inline bool have_corpus() {
  if (std::filesystem::exists(corpus_dir() / "add.pte")) return true;
  WARN("shared corpus not found at " << corpus_dir() << "; skipping (set ETRT_CORPUS_DIR)");
  return false;
}

/// A reproducible corruption of a file: 1 to 4 random bit flips per call, from a fixed-seed xorshift generator, so
/// a failing trial can be replayed.
class BitFlipper {
 public:
  explicit BitFlipper(uint64_t seed) : state_(seed) {}
  std::vector<uint8_t> operator()(std::vector<uint8_t> bytes) {
    if (bytes.empty()) return bytes;
    const int flips = 1 + static_cast<int>(next() % 4);
    for (int k = 0; k < flips; ++k) bytes[next() % bytes.size()] ^= static_cast<uint8_t>(1u << (next() % 8));
    return bytes;
  }

 private:
  uint64_t next() {
    state_ ^= state_ << 13;
    state_ ^= state_ >> 7;
    state_ ^= state_ << 17;
    return state_;
  }
  uint64_t state_;
};

inline std::vector<uint8_t> read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

inline LoadOptions options(const FlatTensorData* data = nullptr) {
  return LoadOptions{kernel_table(), {}, data};
}

inline std::shared_ptr<const Program> load_program(const std::filesystem::path& p) {
  auto src = DataSource::from_file(p.string());
  REQUIRE(src.has_value());
  auto prog = Program::load(*src, Verification::InternalConsistency);
  INFO((prog ? std::string() : prog.error().describe()));
  REQUIRE(prog.has_value());
  return *prog;
}

inline std::unique_ptr<Method> load_method(const std::shared_ptr<const Program>& p, const std::string& name,
                                           const FlatTensorData* data = nullptr) {
  auto m = Method::load(p, name, options(data));
  INFO((m ? std::string() : m.error().describe()));
  REQUIRE(m.has_value());
  return std::move(*m);
}

/// Binds a contiguous host tensor as input `i`.
template <class T>
inline void set_input(Method& m, size_t i, const std::vector<T>& data, std::vector<int64_t> sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t s = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = s;
    s *= sizes[d];
  }
  InputTensor in{data.data(), dtype_of<T>, sizes, strides, Device{}, false};
  auto r = m.set_input(i, in);
  INFO((r ? std::string() : r.error().describe()));
  REQUIRE(r.has_value());
}

inline void execute(Method& m) {
  auto s = m.execute();
  INFO((s ? std::string() : s.error().describe()));
  REQUIRE(s.has_value());
}

template <class T>
inline std::vector<T> output(const Method& m, size_t i) {
  const Tensor& t = m.output(i).tensor_unchecked();
  const T* p = t.data_as<T>();
  return std::vector<T>(p, p + t.numel());
}

}  // namespace etrt::test
