// The CUDA delegate's kernels against its host path: without a GPU it must report "no CUDA device" cleanly; with one
// it runs graphs through CudaOps and compares them with HostOps (the CPU path the unit tests check), op by op, on
// long softmax / layer-norm rows, GEMM shapes, channels-last arguments, and the fallback SGEMM against cuBLAS.
// Built and run by tools/gpu/run_gpu_checks.sh:
//   nvcc -std=c++20 -O2 -Iinclude -Itests/cpp/device tools/gpu/cuda_kernel_check.cu bindings/cuda_delegate.cu
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "etrt/backends/cuda/cuda_backend.h"
#include "etrt/backends/cuda/cuda_device.h"
#include "etrt/backends/cuda/cuda_delegate_entry.h"
#include "etrt/backends/cuda/cuda_ops.cuh"
#include "etrt/backends/cuda/host_ops.h"
#include "etrt/device/host_emulated_device.h"
#include "payload_builder.h"

using namespace etrt;
using namespace etrt::cuda;
using test::Attr;
using test::PayloadBuilder;
using test::random_values;

static int failures = 0;
#define EXPECT(cond, ...)                      \
  do {                                         \
    if (!(cond)) {                             \
      ++failures;                              \
      std::printf("FAILED %s: ", #cond);       \
      std::printf(__VA_ARGS__);                \
      std::printf("\n");                       \
    }                                          \
  } while (0)

/// Runs `g` with Ops over `dev` (arguments in the payload's layouts, memory given as `mem`), returns output memory.
/// Bool arguments take each float cast to a byte and come back as 0/1 floats.
template <class Ops>
static std::vector<std::vector<float>> run(PayloadBuilder& g, const DeviceInterface& dev, bool device_memory,
                                           const std::vector<std::vector<float>>& inputs, std::string& error) {
  const auto bytes = g.bytes();
  auto p = parse_payload(bytes);
  if (!p) { error = p.error().describe(); return {}; }
  const Payload copy = *p;
  auto e = GraphExecutor<Ops>::create(std::move(*p), dev, 0);
  if (!e) { error = e.error().describe(); return {}; }
  std::vector<DeviceBuffer> bufs;
  std::vector<std::vector<uint8_t>> host;  // each argument's bytes
  std::vector<EValue> args;
  const auto add = [&](uint32_t id, const std::vector<float>* data) {
    const ValueDesc& v = copy.values[id];
    const std::vector<float> f = data ? *data : std::vector<float>(static_cast<size_t>(v.numel), -7.f);
    std::vector<uint8_t> bytes(v.nbytes());
    if (v.is_bool())
      for (size_t k = 0; k < f.size(); ++k) bytes[k] = static_cast<uint8_t>(f[k]);
    else if (!f.empty())
      std::memcpy(bytes.data(), f.data(), v.nbytes());
    host.push_back(std::move(bytes));
    void* mem = host.back().data();
    if (device_memory) {
      auto b = DeviceBuffer::allocate(dev, v.nbytes(), 0);
      if (!b) { error = b.error().describe(); return; }
      bufs.push_back(std::move(*b));
      mem = bufs.back().data();
      (void)dev.copy(mem, host.back().data(), v.nbytes(), CopyKind::HostToDevice, 0);
    }
    auto t = Tensor::make(v.dtype, v.shape(), v.order(), mem, ShapeDynamism::Static, Device{DeviceType::CUDA, 0});
    args.emplace_back(*t);
  };
  host.reserve(64);
  for (size_t i = 0; i < copy.inputs.size(); ++i) add(copy.inputs[i], &inputs[i]);
  for (uint32_t id : copy.outputs) add(id, nullptr);
  if (!error.empty()) return {};
  std::vector<EValue*> ptrs;
  for (auto& a : args) ptrs.push_back(&a);
  for (int rep = 0; rep < 2; ++rep)  // twice: scratch reuse across calls
    if (auto s = (*e)->execute(ptrs); !s) { error = s.error().describe(); return {}; }
  if (auto s = dev.synchronize(0); !s) { error = s.error().describe(); return {}; }
  std::vector<std::vector<float>> outs;
  for (size_t i = 0; i < copy.outputs.size(); ++i) {
    auto& h = host[copy.inputs.size() + i];
    if (device_memory)
      (void)dev.copy(h.data(), bufs[copy.inputs.size() + i].data(), h.size(), CopyKind::DeviceToHost, 0);
    const ValueDesc& v = copy.values[copy.outputs[i]];
    std::vector<float> f(static_cast<size_t>(v.numel));
    if (v.is_bool())
      for (size_t k = 0; k < f.size(); ++k) f[k] = h[k];
    else if (!f.empty())
      std::memcpy(f.data(), h.data(), h.size());
    outs.push_back(std::move(f));
  }
  return outs;
}

static void compare(const char* name, PayloadBuilder& g, const DeviceInterface& cuda,
                    const std::vector<std::vector<float>>& inputs, double tol) {
  HostEmulatedDevice host_dev;
  std::string e1, e2;
  const auto want = run<HostOps>(g, host_dev, false, inputs, e1);
  const auto got = run<CudaOps>(g, cuda, true, inputs, e2);
  EXPECT(e1.empty() && e2.empty(), "%s: host '%s' cuda '%s'", name, e1.c_str(), e2.c_str());
  if (!e1.empty() || !e2.empty()) return;
  double worst = 0;
  for (size_t o = 0; o < want.size(); ++o)
    for (size_t i = 0; i < want[o].size(); ++i) {
      const double d = std::abs(double(want[o][i]) - got[o][i]) / (1.0 + std::abs(double(want[o][i])));
      if (!(d <= worst)) worst = d;  // NaN counts as worst
    }
  EXPECT(worst <= tol, "%s: max relative difference %g > %g", name, worst, tol);
  std::printf("%-28s max rel diff %.3g\n", name, worst);
}

int main() {
  const CudaDevice& dev = cuda_device();
  const BackendInterface& delegate = cuda_delegate(dev);
  EXPECT(&delegate == &cuda_delegate(dev), "one instance");
  const int count = dev.device_count();
  std::printf("CUDA devices: %d, delegate available: %d\n", count, int(delegate.is_available()));
  auto g = test::all_ops_graph();
  const auto bytes = g.bytes();
  auto h = delegate.init(bytes, {});
  auto ops = CudaOps::create(0);
  if (count == 0) {
    EXPECT(!delegate.is_available(), "unavailable without a device");
    EXPECT(!h && h.error().what.find("no CUDA device") != std::string::npos, "init without a device");
    if (!h) std::printf("delegate.init: %s\n", h.error().describe().c_str());
    EXPECT(!ops && ops.error().what.find("no CUDA device") != std::string::npos, "CudaOps::create");
    if (!ops) std::printf("CudaOps::create: %s\n", ops.error().describe().c_str());
    std::printf(failures ? "FAILED\n" : "OK (no GPU: clean failures)\n");
    return failures ? 1 : 0;
  }
  EXPECT(h.has_value(), "init: %s", h ? "" : h.error().describe().c_str());
  EXPECT(ops.has_value(), "CudaOps::create: %s", ops ? "" : ops.error().describe().c_str());
  if (ops) std::printf("cuBLAS: %s\n", ops->uses_cublas() ? cublas()->library.c_str() : "not used");

  compare("all ops", g, dev, {random_values(24, 1, 0.5f, 2.f), random_values(4, 2, 0.5f, 2.f)}, 1e-4);
  for (int64_t len : {7, 1000, 4096}) {
    PayloadBuilder s;
    const uint32_t x = s.input({33, len}), o = s.output({33, len}), o2 = s.output({33, len});
    s.node(Op::Softmax, {x}, {o}, {Attr::i(1)});
    s.node(Op::Softmax, {x}, {o2}, {Attr::i(0)});
    compare(("softmax len " + std::to_string(len)).c_str(), s, dev, {random_values(33 * len, 3, -20.f, 20.f)}, 1e-5);
  }
  for (int64_t cols : {5, 768, 3000}) {
    PayloadBuilder s;
    const uint32_t x = s.input({17, cols}), w = s.input({cols}), b = s.input({cols});
    const uint32_t o = s.output({17, cols}), m = s.output({17, 1}), r = s.output({17, 1});
    s.node(Op::LayerNorm, {x, w, b}, {o, m, r}, {Attr::f(1e-5), Attr::i(1)});
    compare(("layer_norm cols " + std::to_string(cols)).c_str(), s, dev,
            {random_values(17 * cols, 4, 3.f, 5.f), random_values(cols, 5), random_values(cols, 6)}, 1e-4);
  }
  {
    PayloadBuilder s;
    const uint32_t a = s.input({257, 130}), b = s.input({130, 65}), c = s.input({65});
    const uint32_t a3 = s.input({5, 33, 17}), b3 = s.input({5, 17, 40});
    const uint32_t o = s.output({257, 65}), o2 = s.output({257, 65}), o3 = s.output({5, 33, 40});
    s.node(Op::Mm, {a, b}, {o});
    s.node(Op::Addmm, {c, a, b}, {o2}, {Attr::f(0.5), Attr::f(2.0)});
    s.node(Op::Bmm, {a3, b3}, {o3});
    compare("mm/addmm/bmm", s, dev,
            {random_values(257 * 130, 7), random_values(130 * 65, 8), random_values(65, 9),
             random_values(5 * 33 * 17, 10), random_values(5 * 17 * 40, 11)},
            1e-4);
  }
  {
    PayloadBuilder s;
    const uint32_t x = s.input({4, 8, 9, 10}, {0, 2, 3, 1}), y = s.input({8, 1, 1});
    const uint32_t o = s.output({4, 8, 9, 10}, {0, 2, 3, 1}), t = s.temp({4, 8, 9, 10}), p = s.output({10, 4, 9, 8});
    s.node(Op::Mul, {x, y}, {t});
    s.node(Op::Gelu, {t}, {o}, {Attr::i(1)});
    s.node(Op::Permute, {t}, {p}, {Attr::i(3), Attr::i(0), Attr::i(2), Attr::i(1)});
    compare("channels-last + permute", s, dev, {random_values(4 * 8 * 9 * 10, 12), random_values(8, 13)}, 1e-5);
  }
  {
    // The mask ops on shapes large enough for many blocks: SELECT, EQ_SCALAR (with -inf, NaN and equal elements),
    // LOGICAL_NOT, ANY over the innermost and a middle dim, FULL into both dtypes, WHERE with broadcasting, and
    // channels-last bool arguments converted at the boundary.
    PayloadBuilder s;
    const int64_t B = 6, R = 70, C = 301;
    const uint32_t x = s.input({B, R, C}), w = s.input({B, R, C});
    const uint32_t m = s.as_bool(s.input({B, 4, 5, 7}, {0, 2, 3, 1}));
    const uint32_t sel = s.output({B, C}), eq = s.as_bool(s.temp({B, R, C})), ne = s.as_bool(s.output({B, R, C}));
    const uint32_t any_last = s.as_bool(s.output({B, R, 1})), any_mid = s.as_bool(s.output({B, C}));
    const uint32_t zeros = s.temp({B, R, C}), ones = s.as_bool(s.output({3, 3}));
    const uint32_t guarded = s.output({B, R, C}), nm = s.as_bool(s.output({B, 4, 5, 7}, {0, 2, 3, 1}));
    s.node(Op::Select, {w}, {sel}, {Attr::i(1), Attr::i(R - 3)});  // w: finite, so the comparison is exact
    s.node(Op::EqScalar, {x}, {eq}, {Attr::f(-INFINITY)});
    s.node(Op::LogicalNot, {eq}, {ne});
    s.node(Op::Any, {eq}, {any_last}, {Attr::i(2), Attr::i(1)});
    s.node(Op::Any, {eq}, {any_mid}, {Attr::i(1), Attr::i(0)});
    s.node(Op::Full, {}, {zeros}, {Attr::f(0.0)});
    s.node(Op::Full, {}, {ones}, {Attr::f(1.0)});
    s.node(Op::Where, {any_last, zeros, w}, {guarded});
    s.node(Op::LogicalNot, {m}, {nm});
    auto vx = random_values(B * R * C, 16);
    for (size_t i = 0; i < vx.size(); i += 97) vx[i] = -INFINITY;
    for (size_t i = 5; i < vx.size(); i += 89) vx[i] = NAN;
    std::vector<float> vm(B * 4 * 5 * 7);
    for (size_t i = 0; i < vm.size(); ++i) vm[i] = static_cast<float>(i % 3);
    compare("mask ops", s, dev, {vx, random_values(B * R * C, 17), vm}, 0.0);
  }
  if (ops) {  // the SGEMM fallback against cuBLAS (or itself against the host when cuBLAS is missing)
    auto fallback = CudaOps::create(0, false);
    EXPECT(fallback && !fallback->uses_cublas(), "fallback ops");
    const GemmShape gs{3, 70, 45, 129};
    const auto a = random_values(gs.batch * gs.m * gs.k, 14), b = random_values(gs.batch * gs.k * gs.n, 15);
    std::vector<float> want(gs.batch * gs.m * gs.n, 1.f), got(want.size());
    HostOps().gemm(gs, 1.5f, a.data(), b.data(), 0.5f, want.data()).has_value();
    auto da = DeviceBuffer::allocate(dev, a.size() * 4, 0), db = DeviceBuffer::allocate(dev, b.size() * 4, 0),
         dc = DeviceBuffer::allocate(dev, got.size() * 4, 0);
    std::vector<float> ones(got.size(), 1.f);
    (void)dev.copy(da->data(), a.data(), a.size() * 4, CopyKind::HostToDevice, 0);
    (void)dev.copy(db->data(), b.data(), b.size() * 4, CopyKind::HostToDevice, 0);
    (void)dev.copy(dc->data(), ones.data(), ones.size() * 4, CopyKind::HostToDevice, 0);
    auto s = fallback->gemm(gs, 1.5f, static_cast<float*>(da->data()), static_cast<float*>(db->data()), 0.5f,
                            static_cast<float*>(dc->data()));
    EXPECT(s.has_value(), "fallback gemm");
    (void)dev.copy(got.data(), dc->data(), got.size() * 4, CopyKind::DeviceToHost, 0);
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(double(got[i]) - want[i]) / (1 + std::abs(want[i])));
    EXPECT(worst < 1e-4, "fallback sgemm max rel diff %g", worst);
    std::printf("%-28s max rel diff %.3g\n", "fallback sgemm", worst);
  }
  std::printf(failures ? "FAILED (%d)\n" : "OK\n", failures);
  return failures ? 1 : 0;
}
