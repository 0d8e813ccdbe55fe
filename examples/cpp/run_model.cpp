// Runs one method of a .pte with the header-only runtime: load, set the inputs, execute, read the outputs, and
// report every error (errors are values: etrt::Result<T> / etrt::Status; nothing here throws).
//
//   c++ $(python -m executorch_portable_lib config --cflags) -O2 examples/cpp/run_model.cpp -pthread -o run_model
//       # or: pkg-config --cflags executorch-portable-lib
//   ./run_model tests/fixtures/exported/add.pte forward
//
// Every float input is filled with 1, 2, 3, ...; other dtypes are zero. With the full kernel table this TU compiles
// every kernel family (minutes); for one model, generate a table of only its operators and include that instead:
//   python -m executorch_portable_lib selective model.pte -o model_kernels.h   (then -DETRT_KERNELS_HEADER=...)
#include <cstdio>
#include <vector>

#include <etrt/runtime.h>

#ifdef ETRT_KERNELS_HEADER
#include ETRT_KERNELS_HEADER
#else
#include <etrt_generated/portable_kernels.h>
#endif

namespace {

int fail(const char* what, const etrt::Failure& f) {
  std::fprintf(stderr, "%s: %s\n", what, f.describe().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.pte [METHOD]\n", argv[0]);
    return 2;
  }
  const char* method_name = argc > 2 ? argv[2] : "forward";

  auto source = etrt::DataSource::from_file(argv[1]);
  if (!source) return fail("open", source.error());
  auto program = etrt::Program::load(*source);
  if (!program) return fail("load program", program.error());
  etrt::LoadOptions options{etrt::generated::portable_kernels()};
  auto method = etrt::Method::load(*program, method_name, options);
  if (!method) return fail("load method", method.error());
  etrt::Method& m = **method;

  // Inputs: the caller owns the memory; set_input aliases or copies it as the plan requires.
  std::vector<std::vector<float>> storage(m.num_inputs());
  for (size_t i = 0; i < m.num_inputs(); ++i) {
    const etrt::ValueInfo& info = m.meta().inputs[i];
    if (!info.tensor) {
      std::fprintf(stderr, "input %zu is not a tensor; this example passes tensors only\n", i);
      return 1;
    }
    const auto& t = *info.tensor;
    const size_t bytes = t.nbytes();
    storage[i].assign((bytes + sizeof(float) - 1) / sizeof(float), 0.0f);
    if (t.dtype == etrt::ScalarType::Float)
      for (size_t k = 0; k < storage[i].size(); ++k) storage[i][k] = static_cast<float>(k + 1);
    std::vector<int64_t> strides(t.sizes.size());
    etrt::strides_from_dim_order(t.sizes, t.dim_order, strides);
    etrt::InputTensor in{storage[i].data(), t.dtype, t.sizes, strides};
    if (auto bound = m.set_input(i, in); !bound) return fail("set input", bound.error());
  }

  if (auto status = m.execute(); !status) return fail("execute", status.error());

  for (size_t i = 0; i < m.num_outputs(); ++i) {
    const etrt::EValue& out = m.output(i);
    if (!out.is_tensor()) {
      std::printf("output %zu: a %s\n", i, std::string(etrt::tag_name(out.tag())).c_str());
      continue;
    }
    const etrt::Tensor& t = out.tensor_unchecked();
    std::printf("output %zu: %s", i, t.describe().c_str());
    if (t.dtype() == etrt::ScalarType::Float) {
      const auto* v = static_cast<const float*>(t.data());
      for (int64_t k = 0; k < t.numel() && k < 8; ++k) std::printf(" %g", v[k]);
      if (t.numel() > 8) std::printf(" ...");
    }
    std::printf("\n");
  }
  return 0;
}
