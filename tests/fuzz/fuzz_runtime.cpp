// libFuzzer target over everything a file reaches: the program loader at both verification levels, method loading
// (values, planned memory, instructions), the XNNPACK and CUDA delegate payload parsers and executors (the CUDA
// delegate runs its host kernels on a host-emulated device), bundled programs with their test cases, and .ptd data
// files, then execution on zero inputs and on inputs drawn from the file's own bytes.
//
// An input is dispatched by its identifier (bytes 4..7): "BP08" a bundled program, "FT01" a data file, anything else
// a program, so the seed corpus is the project's fixtures as they are. Built and run by tests/fuzz/run.sh.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <vector>

#include "etrt/backends/cuda/cuda_backend.h"
#include "etrt/backends/cuda/host_ops.h"
#include "etrt/backends/xnnpack/xnnpack_backend.h"
#include "etrt/bundled/bundled_program.h"
#include "etrt/device/host_emulated_device.h"
#include "etrt/runtime.h"

namespace etrt::fuzz {
std::span<const KernelEntry> kernel_table();  // fuzz_kernel_table.cpp
}  // namespace etrt::fuzz

namespace {

using namespace etrt;

/// What a fuzz input may make the harness itself allocate per tensor (the runtime bounds its own allocations).
constexpr size_t kMaxHarnessTensorBytes = size_t{1} << 24;

struct Runtime {
  HostEmulatedDevice dev{DeviceType::CUDA, 1};
  cuda::CudaDelegate<cuda::HostOps> cuda_delegate{dev};
  BackendEntry backends[2] = {{cuda::kCudaBackendId, &cuda_delegate},
                              {"XnnpackBackend", &xnnpack::xnnpack_delegate()}};
  LoadOptions options(const FlatTensorData* data = nullptr) {
    LoadOptions o{fuzz::kernel_table(), backends, data, &dev};
    // The load option services use for untrusted files. 256 MiB keeps a worst-case input (its arenas touched by
    // kernels, plus ASan's quarantine) well under the campaign's 2 GB RSS limit: libFuzzer's RSS is a peak.
    o.max_planned_bytes = uint64_t{256} << 20;
    return o;
  }
};

Runtime& runtime() {
  static Runtime r;
  return r;
}

/// A small deterministic generator seeded from the input, so a finding replays exactly.
class Rng {
 public:
  explicit Rng(std::span<const uint8_t> bytes) {
    for (uint8_t b : bytes.first(std::min<size_t>(bytes.size(), 256))) state_ = (state_ ^ b) * 0x100000001b3ull;
    if (state_ == 0) state_ = 1;
  }
  uint64_t next() {
    state_ ^= state_ << 13;
    state_ ^= state_ >> 7;
    state_ ^= state_ << 17;
    return state_;
  }

 private:
  uint64_t state_ = 0xcbf29ce484222325ull;
};

/// Fills a host tensor buffer: zeros, or values from `rng` that stay valid for the dtype (bools 0/1) but include
/// NaN, infinities, extremes and negatives.
void fill(std::vector<uint8_t>& buf, ScalarType dtype, Rng* rng) {
  if (!rng) return;
  if (dtype == ScalarType::Bool) {
    for (auto& b : buf) b = static_cast<uint8_t>(rng->next() & 1);
    return;
  }
  if (dtype == ScalarType::Float) {
    static constexpr float kSpecial[] = {0.f, -0.f, 1.f, -1.f, std::numeric_limits<float>::quiet_NaN(),
                                         std::numeric_limits<float>::infinity(),
                                         -std::numeric_limits<float>::infinity(), 3.4e38f, -3.4e38f, 1e-45f};
    for (size_t k = 0; k + 4 <= buf.size(); k += 4) {
      const uint64_t r = rng->next();
      const float v = (r & 7) == 0 ? kSpecial[(r >> 3) % std::size(kSpecial)]
                                   : static_cast<float>(static_cast<int64_t>(r >> 40) - (1 << 23)) / 65536.f;
      std::memcpy(buf.data() + k, &v, 4);
    }
    return;
  }
  for (auto& b : buf) b = static_cast<uint8_t>(rng->next());
  // Floating dtypes with raw random bits are fine (any bit pattern is a valid half/bfloat16/double).
}

/// Binds inputs (zeros or random) and output storage, then executes twice. Errors are expected; crashes are findings.
void run_method(Method& method, Rng* rng) {
  std::vector<std::vector<uint8_t>> storage;
  storage.reserve(method.num_inputs() + method.num_outputs());
  for (size_t i = 0; i < method.num_inputs(); ++i) {
    if (!method.input(i).is_tensor()) continue;
    const Tensor& t = method.input(i).tensor_unchecked();
    if (t.capacity_nbytes() > kMaxHarnessTensorBytes) return;
    std::vector<int64_t> sizes(t.max_sizes().begin(), t.max_sizes().end());
    if (rng && t.dynamism() != ShapeDynamism::Static)  // a smaller shape within the bounds
      for (auto& s : sizes) s = s > 0 ? static_cast<int64_t>(rng->next() % static_cast<uint64_t>(s + 1)) : 0;
    auto made = Tensor::make(t.dtype(), sizes, t.dim_order(), nullptr);
    if (!made) return;
    storage.emplace_back(made->nbytes() + 8, 0);
    fill(storage.back(), t.dtype(), rng);
    std::vector<int64_t> strides(made->strides().begin(), made->strides().end());
    if (!method.set_input(i, InputTensor{storage.back().data(), t.dtype(), sizes, strides,
                                         method.expected_device(i), (i & 1) == 0})) {
      return;
    }
  }
  for (size_t o = 0; o < method.num_outputs(); ++o) {
    if (!method.output_needs_storage(o)) continue;
    const size_t n = method.output(o).tensor_unchecked().capacity_nbytes();
    if (n > kMaxHarnessTensorBytes) return;
    storage.emplace_back(n + 8, 0);
    if (!method.set_output_data_ptr(o, storage.back().data(), n)) return;
  }
  for (int k = 0; k < 2; ++k)
    if (!method.execute()) return;
}

void fuzz_program(std::span<const uint8_t> bytes, const FlatTensorData* data) {
  const Verification v = (bytes.size() & 1) ? Verification::InternalConsistency : Verification::Minimal;
  auto program = Program::load(DataSource::copy_of(bytes), v);
  if (!program) return;
  Rng rng(bytes);
  for (const auto& name : (*program)->method_names()) {
    (void)(*program)->method_meta(name);
    auto method = Method::load(*program, name, runtime().options(data));
    if (!method) continue;
    run_method(**method, nullptr);
    run_method(**method, &rng);
  }
}

void fuzz_bundle(std::span<const uint8_t> bytes) {
  auto bundle = BundledProgram::load(DataSource::copy_of(bytes));
  if (!bundle) return;
  auto program = Program::load((*bundle)->program_source(), Verification::InternalConsistency);
  if (!program) return;
  for (const auto& name : (*program)->method_names()) {
    auto method = Method::load(*program, name, runtime().options());
    if (!method) continue;
    for (size_t tc = 0; tc < 8; ++tc) {
      if (!(*bundle)->load_inputs(**method, tc)) break;
      if ((*method)->execute()) (void)(*bundle)->verify_outputs(**method, tc, 1e-3, 1e-5);
    }
  }
}

void fuzz_data_file(std::span<const uint8_t> bytes) {
  auto data = FlatTensorData::load(DataSource::copy_of(bytes));
  if (!data) return;
  // A data file feeds a program's external tensors: run the project's program-data-separation fixture over it.
  static const std::vector<uint8_t> program = [] {
    std::vector<uint8_t> p;
    if (FILE* f = std::fopen(ETRT_FUZZ_PTD_PROGRAM, "rb")) {
      uint8_t buf[4096];
      for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) p.insert(p.end(), buf, buf + n);
      std::fclose(f);
    }
    return p;
  }();
  if (!program.empty()) fuzz_program(program, data->get());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  if (BundledProgram::is_bundled(bytes))
    fuzz_bundle(bytes);
  else if (size >= 8 && std::memcmp(data + 4, "FT01", 4) == 0)
    fuzz_data_file(bytes);
  else
    fuzz_program(bytes, nullptr);
  return 0;
}
