// Corrupt CUDA programs (truncations and byte flips of the real-exporter CUDA fixtures) never crash: loading either
// fails with an error, or the method runs (device arenas, et_copy copies, the delegate's payload and kernels on the
// host-emulated device) and either works or fails with an error.
#include "emulated_cuda.h"

using namespace etrt;
using namespace etrt::test;

namespace {

std::vector<std::filesystem::path> cuda_programs() {
  std::vector<std::filesystem::path> files;
  if (!std::filesystem::exists(cuda_fixture_dir())) return files;
  for (const auto& e : std::filesystem::directory_iterator(cuda_fixture_dir()))
    if (e.path().extension() == ".pte") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

/// Loads every method of `bytes` and, when one loads, runs it on zero inputs placed where it expects them.
/// Returns how many methods executed successfully.
int load_and_run(EmulatedCuda& cuda, std::span<const uint8_t> bytes) {
  auto p = Program::load(DataSource::copy_of(bytes), Verification::InternalConsistency);
  if (!p) return 0;
  int ran = 0;
  for (const auto& name : (*p)->method_names()) {
    auto m = Method::load(*p, name, cuda.options());
    if (!m) continue;
    Method& method = **m;
    std::vector<std::vector<uint8_t>> inputs;  // host memory standing in for host or emulated device memory
    bool bound = true;
    for (size_t i = 0; i < method.num_inputs() && bound; ++i) {
      if (!method.input(i).is_tensor()) continue;
      const Tensor& t = method.input(i).tensor_unchecked();
      if (t.capacity_nbytes() > (size_t{1} << 26)) {
        bound = false;
        break;
      }
      inputs.emplace_back(t.capacity_nbytes() + 64, 0);
      std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end()), strides(t.strides().begin(), t.strides().end());
      bound = method.set_input(i, InputTensor{inputs.back().data(), t.dtype(), sizes, strides,
                                              method.expected_device(i), true})
                  .has_value();
    }
    std::vector<std::vector<uint8_t>> outputs;
    for (size_t o = 0; o < method.num_outputs() && bound; ++o) {
      if (!method.output_needs_storage(o)) continue;
      const size_t n = method.output(o).tensor_unchecked().capacity_nbytes();
      if (n > (size_t{1} << 26)) {
        bound = false;
        break;
      }
      outputs.emplace_back(n + 64, 0);
      bound = method.set_output_data_ptr(o, outputs.back().data(), n).has_value();
    }
    if (bound && method.execute().has_value()) ++ran;
  }
  return ran;
}

}  // namespace

TEST_CASE("device robustness: the intact CUDA fixtures all run", "[device][robustness]") {
  const auto files = cuda_programs();
  if (files.empty()) {
    WARN("CUDA fixtures not found at " << cuda_fixture_dir());
    return;
  }
  EmulatedCuda cuda;
  for (const auto& path : files) {
    INFO(path.filename().string());
    CHECK(load_and_run(cuda, read_file(path)) == 1);
  }
}

TEST_CASE("device robustness: every truncation of every CUDA fixture fails cleanly", "[device][robustness]") {
  EmulatedCuda cuda;
  for (const auto& path : cuda_programs()) {
    const auto bytes = read_file(path);
    INFO(path.filename().string());
    // Every prefix, up to the flatbuffer and a stride through the rest (the delegate segments and constants).
    for (size_t n = 0; n < bytes.size(); n += n < 4096 ? 1 : 61) {
      auto p = Program::load(DataSource::copy_of(std::span<const uint8_t>(bytes.data(), n)),
                             Verification::InternalConsistency);
      if (p) {
        (void)load_and_run(cuda, std::span<const uint8_t>(bytes.data(), n));
      } else {
        REQUIRE_FALSE(p.error().what.empty());
      }
    }
  }
  CHECK(cuda.dev.live_allocations == 0);
}

TEST_CASE("device robustness: byte flips never crash the loader, the copies or the delegate", "[device][robustness]") {
  EmulatedCuda cuda;
  BitFlipper flip(0x2545f4914f6cdd1dull);
  int executed = 0;
  for (const auto& path : cuda_programs()) {
    const auto original = read_file(path);
    INFO(path.filename().string());
    for (int trial = 0; trial < 300; ++trial) {
      const auto bytes = flip(original);
      executed += load_and_run(cuda, bytes);
    }
  }
  CHECK(cuda.dev.live_allocations == 0);
  if (!cuda_programs().empty()) CHECK(executed > 0);  // the sweep reached execution, not only the loader
}
