// Device placement in the core, on a host-emulated CUDA device: the real exporter's CUDA fixtures
// (tests/fixtures/cuda, EtrtCudaPartitioner) load with device arenas, copy across the device boundary with the
// et_copy kernels, bind device inputs, and run the delegate (host kernels) to the eager outputs.
#include <fstream>
#include <map>
#include <tuple>

#include "emulated_cuda.h"
#include "etrt/devtools/etdump_recorder.h"
#include "npz_reader.h"

using namespace etrt;
using namespace etrt::test;

namespace {

std::filesystem::path cuda_fixture(const std::string& name) { return cuda_fixture_dir() / name; }

std::vector<int64_t> contiguous_strides(std::span<const int64_t> sizes) {
  std::vector<int64_t> s(sizes.size());
  int64_t acc = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    s[d] = acc;
    acc *= sizes[d];
  }
  return s;
}

/// A copy of `a` laid out in `dim_order` (the method's layout), with the strides of that layout.
struct Laid {
  std::vector<float> data;
  std::vector<int64_t> strides;
};
Laid lay_out(const NpyArray& a, std::span<const uint8_t> dim_order) {
  Laid l;
  l.strides.resize(a.shape.size());
  strides_from_dim_order(a.shape, dim_order, l.strides);
  l.data.resize(a.data.size());
  copy_strided(l.data.data(), l.strides, a.data.data(), contiguous_strides(a.shape), a.shape, sizeof(float));
  return l;
}

/// Output `i` of `m` as logical row-major floats (reading device memory directly: the device is host-emulated).
std::vector<float> logical_output(const Method& m, size_t i) {
  const Tensor& t = m.output(i).tensor_unchecked();
  std::vector<float> out(static_cast<size_t>(t.numel()));
  copy_strided(out.data(), contiguous_strides(t.sizes()), t.data(), t.strides(), t.sizes(), sizeof(float));
  return out;
}

void check_close(const std::vector<float>& got, const NpyArray& want, float rtol, float atol) {
  REQUIRE(got.size() == want.data.size());
  for (size_t k = 0; k < got.size(); ++k) {
    INFO("element " << k);
    CHECK(std::abs(got[k] - want.data[k]) <= atol + rtol * std::abs(want.data[k]));
  }
}

/// Runs fixture `name` with every input placed where the method expects it; returns the method for inspection.
std::unique_ptr<Method> run_fixture(EmulatedCuda& cuda, const std::string& name, float rtol = 1e-4f,
                                    float atol = 1e-5f, InstructionObserver* observer = nullptr) {
  INFO(name);
  auto prog = load_program(cuda_fixture(name + ".pte"));
  auto m = Method::load(prog, "forward", cuda.options());
  INFO((m ? std::string() : m.error().describe()));
  REQUIRE(m.has_value());
  Method& method = **m;
  auto npz = read_npz(cuda_fixture(name + ".npz"));
  std::vector<Laid> inputs;
  std::vector<std::vector<uint8_t>> device_inputs;  // "device memory" the caller owns
  for (size_t i = 0; i < method.num_inputs(); ++i) {
    const NpyArray& a = npz.at("in" + std::to_string(i));
    const Tensor& t = method.input(i).tensor_unchecked();
    inputs.push_back(lay_out(a, t.dim_order()));
    const Device want = method.expected_device(i);
    InputTensor in{inputs.back().data.data(), ScalarType::Float, a.shape, inputs.back().strides, want, true};
    auto r = method.set_input(i, in);
    INFO((r ? std::string() : r.error().describe()));
    REQUIRE(r.has_value());
  }
  std::vector<DeviceBuffer> outs;
  for (size_t o = 0; o < method.num_outputs(); ++o) {
    if (!method.output_needs_storage(o)) continue;
    const Tensor& t = method.output(o).tensor_unchecked();
    REQUIRE(!t.device().is_cpu());  // every unplanned output of these fixtures lives on the device
    auto buf = DeviceBuffer::allocate(cuda.dev, t.capacity_nbytes(), t.device().index);
    REQUIRE(buf.has_value());
    outs.push_back(std::move(*buf));
    REQUIRE(method.set_output_data_ptr(o, outs.back().data(), outs.back().size()).has_value());
  }
  method.set_observer(observer);
  auto s = method.execute();
  INFO((s ? std::string() : s.error().describe()));
  REQUIRE(s.has_value());
  for (size_t o = 0; o < method.num_outputs(); ++o) {
    INFO("output " << o);
    check_close(logical_output(method, o), npz.at("out" + std::to_string(o)), rtol, atol);
  }
  if (!outs.empty()) {
    // The outputs above live in `outs`; the method must not keep them past this call's scope.
    for (size_t o = 0; o < method.num_outputs(); ++o)
      if (method.output_needs_storage(o)) (void)method.set_output_data_ptr(o, nullptr, 0);
  }
  return std::move(*m);
}

bool have_cuda_fixtures() {
  if (std::filesystem::exists(cuda_fixture("manifest.json"))) return true;
  WARN("CUDA fixtures not found at " << cuda_fixture(""));
  return false;
}

}  // namespace

TEST_CASE("device: every CUDA fixture runs on an emulated device and matches torch eager", "[device]") {
  if (!have_cuda_fixtures()) return;
  EmulatedCuda cuda;
  for (const char* name : {"cuda_add_default", "cuda_mlp_device_io", "cuda_mlp_unplanned_out", "cuda_channels_last",
                           "cuda_transformer_block", "cuda_mixed", "cuda_encoder_layer"}) {
    SECTION(name) { run_fixture(cuda, name); }
  }
  CHECK(cuda.dev.live_allocations == 0);  // arenas, delegate constants and scratch all released with the methods
}

TEST_CASE("device: ETDump names a delegate call DELEGATE_CALL and a kernel native_call_<op> + OPERATOR_CALL",
          "[device][etdump]") {
  if (!have_cuda_fixtures()) return;
  // {fixture, kernel instructions, delegate instructions} (the et_copy copies around the delegates are kernels)
  const std::tuple<const char*, size_t, size_t> cases[] = {{"cuda_add_default", 3, 1}, {"cuda_mixed", 6, 2}};
  for (const auto& [name, kernels, delegates] : cases) {
    SECTION(name) {
      EmulatedCuda cuda;
      etdump::ETDumpRecorder rec;
      rec.begin_execute("forward");
      auto m = run_fixture(cuda, name, 1e-4f, 1e-5f, &rec);
      REQUIRE(rec.end_execute().has_value());
      const std::vector<uint8_t> etdp = rec.take();
      const auto d = etdump::read_etdump(etdp);
      REQUIRE(d.has_value());
      REQUIRE(d->runs.size() == 1);
      std::map<int32_t, std::vector<std::string>> names;  // per instruction, in order
      for (const auto& e : d->runs[0].events) {
        const auto& p = std::get<etdump::ProfileEvent>(e);
        if (p.name == "Method::execute") continue;
        CHECK(p.chain_index == 0);
        CHECK(p.delegate_debug_id_int == -1);
        names[p.instruction_id].push_back(p.name);
      }
      REQUIRE(names.size() == m->meta().num_instructions);
      size_t seen_kernels = 0, seen_delegates = 0;
      for (const auto& [id, n] : names) {
        INFO("instruction " << id);
        if (n.size() == 1) {
          CHECK(n[0] == "DELEGATE_CALL");
          ++seen_delegates;
        } else {
          REQUIRE(n.size() == 2);
          CHECK(n[0].starts_with("native_call_"));
          CHECK(n[0] != "native_call_EtrtCudaBackend");
          CHECK(n[1] == "OPERATOR_CALL");
          ++seen_kernels;
        }
      }
      CHECK(seen_kernels == kernels);
      CHECK(seen_delegates == delegates);
    }
  }
}

TEST_CASE("device: default planning copies host->device and back around the delegate", "[device]") {
  if (!have_cuda_fixtures()) return;
  EmulatedCuda cuda;
  auto m = run_fixture(cuda, "cuda_add_default");
  CHECK(cuda.dev.copies[int(CopyKind::HostToDevice)] == 2);  // two inputs
  CHECK(cuda.dev.copies[int(CopyKind::DeviceToHost)] == 1);  // one output
  CHECK(m->meta().planned_buffer_devices.size() == 2);
  CHECK(m->meta().planned_buffer_devices[1] == Device{DeviceType::CUDA, 0});
  CHECK(m->output(0).tensor_unchecked().device().is_cpu());
  CHECK(m->expected_device(0).is_cpu());
}

TEST_CASE("device: device inputs are aliased, device outputs planned in the device arena", "[device]") {
  if (!have_cuda_fixtures()) return;
  EmulatedCuda cuda;
  auto prog = load_program(cuda_fixture("cuda_mlp_device_io.pte"));
  auto m = Method::load(prog, "forward", cuda.options());
  REQUIRE(m.has_value());
  Method& method = **m;
  REQUIRE(method.expected_device(0) == Device{DeviceType::CUDA, 0});
  std::vector<float> x(4 * 16, 0.5f);
  const std::vector<int64_t> sizes{4, 16}, strides{16, 1};

  // The same memory claimed to be on the host, or on another CUDA device, is refused with both places named.
  auto host = method.set_input(0, InputTensor{x.data(), ScalarType::Float, sizes, strides, Device{}, true});
  REQUIRE(!host.has_value());
  CHECK_THAT(host.error().what, Catch::Contains("is on cpu, the method expects it on cuda:0") &&
                                    Catch::Contains("from_host"));
  auto other = method.set_input(0, InputTensor{x.data(), ScalarType::Float, sizes, strides,
                                               Device{DeviceType::CUDA, 1}, true});
  REQUIRE(!other.has_value());
  CHECK_THAT(other.error().what, Catch::Contains("cuda:1") && Catch::Contains("cuda:0"));

  // A device input in another layout cannot be reordered by the host.
  const std::vector<int64_t> transposed{1, 4};
  auto bad = method.set_input(0, InputTensor{x.data(), ScalarType::Float, sizes, transposed,
                                             Device{DeviceType::CUDA, 0}, true});
  REQUIRE(!bad.has_value());
  CHECK_THAT(bad.error().what, Catch::Contains("must already be in the exported layout"));

  auto ok = method.set_input(0, InputTensor{x.data(), ScalarType::Float, sizes, strides,
                                            Device{DeviceType::CUDA, 0}, true});
  REQUIRE(ok.has_value());
  CHECK(*ok == InputBinding::Aliased);
  CHECK(method.input(0).tensor_unchecked().data() == x.data());

  // A read-only device input is copied on the device (device-to-device), never aliased.
  const auto d2d = cuda.dev.copies[int(CopyKind::DeviceToDevice)].load();
  auto ro = method.set_input(0, InputTensor{x.data(), ScalarType::Float, sizes, strides,
                                            Device{DeviceType::CUDA, 0}, false});
  REQUIRE(ro.has_value());
  CHECK(*ro == InputBinding::Copied);
  CHECK(method.input(0).tensor_unchecked().data() != x.data());
  CHECK(cuda.dev.copies[int(CopyKind::DeviceToDevice)] == d2d + 1);

  REQUIRE(method.execute().has_value());
  const Tensor& out = method.output(0).tensor_unchecked();
  CHECK(out.device() == Device{DeviceType::CUDA, 0});
  CHECK(!method.output_needs_storage(0));  // planned in the device arena
}

TEST_CASE("device: without a device layer, device programs fail to load with a clear error", "[device]") {
  if (!have_cuda_fixtures()) return;
  auto planned = load_program(cuda_fixture("cuda_add_default.pte"));
  auto m = Method::load(planned, "forward", options());
  REQUIRE(!m.has_value());
  CHECK(m.error().code == Error::NotSupported);
  CHECK_THAT(m.error().what, Catch::Contains("cuda:0") && Catch::Contains("CUDA-enabled build"));

  // No arena on the device, but a delegate nobody registered.
  auto unplanned = load_program(cuda_fixture("cuda_mlp_unplanned_out.pte"));
  auto u = Method::load(unplanned, "forward", options());
  REQUIRE(!u.has_value());
  CHECK_THAT(u.error().what, Catch::Contains("EtrtCudaBackend"));

  // A device layer that reports no device (a CUDA build on a machine without a GPU).
  HostEmulatedDevice none{DeviceType::CUDA, 0};
  auto n = Method::load(planned, "forward", LoadOptions{kernel_table(), {}, nullptr, &none});
  REQUIRE(!n.has_value());
  CHECK_THAT(n.error().what, Catch::Contains("0 CUDA device"));
}

TEST_CASE("device: the et_copy kernels refuse to run without a device layer", "[device]") {
  // Direct kernel call: a host tensor copied "to the device" with no device layer fails, naming the build.
  const auto& table = kernel_table();
  const auto it = std::find_if(table.begin(), table.end(),
                               [](const KernelEntry& e) { return e.name == "et_copy::_h2d_copy.out"; });
  REQUIRE(it != table.end());
  CHECK(it->device_aware);
  std::vector<float> a(6, 1.f), b(6, 0.f);
  const std::vector<int64_t> sizes{2, 3};
  const std::vector<uint8_t> order{0, 1};
  auto src = Tensor::make(ScalarType::Float, sizes, order, a.data());
  auto dst = Tensor::make(ScalarType::Float, sizes, order, b.data(), ShapeDynamism::Static,
                          Device{DeviceType::CUDA, 0});
  REQUIRE(src.has_value());
  REQUIRE(dst.has_value());
  EValue vs(std::move(*src)), vd(std::move(*dst));
  EValue* slots[] = {&vs, &vd, &vd};  // self, out, and the return slot (the exporter passes out twice)
  const std::span<EValue* const> args(slots);
  KernelContext ctx;
  auto s = it->fn(ctx, args);
  REQUIRE(!s.has_value());
  CHECK_THAT(s.error().what, Catch::Contains("CUDA-enabled build"));

  HostEmulatedDevice dev;
  ctx.device = &dev;
  REQUIRE(it->fn(ctx, args).has_value());
  CHECK(b == a);
}
