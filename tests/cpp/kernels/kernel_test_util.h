// Helpers shared by the kernel tests: tensors over local storage, and the generated table's slot counts.
#pragma once

#include <catch2/catch.hpp>

#include <random>
#include <string_view>
#include <vector>

#include "etrt/kernels/util/isa.h"
#include "etrt_generated/portable_kernels.h"

namespace etrt::ktest {

/// A tensor viewing `d` (which must outlive it) with the given sizes, dtype, dim order and dynamism.
template <class T>
Tensor mk(std::vector<T>& d, std::vector<int64_t> sizes, ScalarType st = dtype_of<T>, std::vector<uint8_t> order = {},
          ShapeDynamism dyn = ShapeDynamism::Static) {
  auto r = Tensor::make(st, sizes, order, d.data(), dyn);
  REQUIRE(r.has_value());
  return *r;
}

/// A tensor over raw storage (the caller keeps `data` alive), for tests that fill buffers of several dtypes.
inline Tensor mk(ScalarType st, std::vector<int64_t> sizes, void* data, std::vector<uint8_t> order = {},
                 ShapeDynamism dyn = ShapeDynamism::Static) {
  auto r = Tensor::make(st, sizes, order, data, dyn);
  REQUIRE(r.has_value());
  return *r;
}

/// n floats drawn uniformly from [-1, 1) by a generator seeded with `seed`.
inline std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

/// The argument-slot count the generated table registers for `name`, or -1.
inline int slots_of(std::string_view name) {
  for (const auto& e : etrt::generated::portable_kernels())
    if (e.name == name) return e.num_slots;
  return -1;
}

/// Runs f once per micro-kernel level (2 = AVX-512, 1 = AVX2, 0 = baseline; a level the CPU lacks runs as the
/// highest it has), then restores the automatic choice.
template <class F>
void each_level(F&& f) {
  for (int level : {2, 1, 0}) {
    kernels::isa::force_level = level;
    INFO("micro-kernel level " << level);
    f();
  }
  kernels::isa::force_level = -1;
}

}  // namespace etrt::ktest
