// Tests for the complex-number kernels (include/etrt/kernels/ops/complex.h).
#include <catch2/catch.hpp>

#include <cmath>
#include <complex>
#include <limits>
#include <random>
#include <vector>

#include "etrt/kernels/ops/complex.h"
#include "kernel_test_util.h"

namespace {
using namespace etrt;
using namespace etrt::kernels;
using namespace etrt::ktest;
using cf = std::complex<float>;
using cd = std::complex<double>;
}  // namespace

TEST_CASE("_conj_physical: torch spot values, random transposed complex128, real dtypes copy", "[kernels][complex]") {
  KernelContext ctx;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // A._conj_physical(torch.tensor([1+2j, -3.5-0.5j, complex(nan, 1), complex(0, -0.0)]))
  //   -> [1-2j, -3.5+0.5j, nan-1j, 0+0j]
  std::vector<cf> z{{1, 2}, {-3.5f, -0.5f}, {nan, 1}, {0, -0.0f}}, o(4);
  Tensor to = mk(o, {4});
  REQUIRE(conj_physical_out<all_types>(ctx, mk(z, {4}), to));
  CHECK(o[0] == cf(1, -2));
  CHECK(o[1] == cf(-3.5f, 0.5f));
  CHECK(std::isnan(o[2].real()));
  CHECK(o[2].imag() == -1);
  CHECK(o[3].imag() == 0);
  CHECK_FALSE(std::signbit(o[3].imag()));
  // Random complex128 [3, 5] stored with dim order {1, 0} into a contiguous output.
  std::mt19937 g(3);
  std::uniform_real_distribution<double> dist(-10, 10);
  std::vector<cd> zt(15), ot(15);
  for (auto& v : zt) v = cd(dist(g), dist(g));
  Tensor tot = mk(ot, {3, 5});
  REQUIRE(conj_physical_out<all_types>(ctx, mk(zt, {3, 5}, ScalarType::ComplexDouble, {1, 0}), tot));
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j) {
      const cd src = zt[j * 3 + i];
      CHECK(ot[i * 5 + j].real() == src.real());
      CHECK(ot[i * 5 + j].imag() == -src.imag());
    }
  // torch._conj_physical on real dtypes is a copy: torch.tensor([1, 0, 2]).long() -> [1, 0, 2]
  std::vector<int64_t> xi{1, 0, 2}, oi(3);
  Tensor toi = mk(oi, {3});
  REQUIRE(conj_physical_out<all_types>(ctx, mk(xi, {3}), toi));
  CHECK(oi == xi);
  std::vector<float> xf{1.5f, -2, 3, 4, 5, 6}, of(6);  // logical [2, 3] in dim order {1, 0}
  Tensor tof = mk(of, {2, 3});
  REQUIRE(conj_physical_out<all_types>(ctx, mk(xf, {2, 3}, ScalarType::Float, {1, 0}), tof));
  CHECK(of == std::vector<float>{1.5f, 3, 5, -2, 4, 6});
  CHECK(slots_of("aten::_conj_physical.out") == 3);
}

TEST_CASE("_conj_physical: errors", "[kernels][complex]") {
  KernelContext ctx;
  std::vector<cf> z{{1, 2}};
  // torch: "Expected out tensor to have dtype c10::complex<float>, but got float instead"
  std::vector<float> of(1);
  Tensor tof = mk(of, {1});
  auto st = conj_physical_out<all_types>(ctx, mk(z, {1}), tof);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("input dtype ComplexFloat != output dtype Float"));
  std::vector<cd> od(1);
  Tensor tod = mk(od, {1});
  st = conj_physical_out<all_types>(ctx, mk(z, {1}), tod);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("output dtype ComplexDouble"));
  std::vector<cf> o2(2);
  Tensor to2 = mk(o2, {2});
  st = conj_physical_out<all_types>(ctx, mk(z, {1}), to2);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("_conj_physical.out: output"));
}

TEST_CASE("view_as_real_copy: complex64/128, rank 0, transposed input and output", "[kernels][complex]") {
  KernelContext ctx;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // A.view_as_real_copy(torch.tensor([1+2j, -3.5-0.5j, complex(nan, 1), complex(0, -0.0)]))
  //   -> [[1, 2], [-3.5, -0.5], [nan, 1], [0, -0]]
  std::vector<cf> z{{1, 2}, {-3.5f, -0.5f}, {nan, 1}, {0, -0.0f}};
  std::vector<float> o(8);
  Tensor to = mk(o, {4, 2});
  REQUIRE(view_as_real_copy_out<types<cf, cd>>(ctx, mk(z, {4}), to));
  CHECK(o[0] == 1);
  CHECK(o[1] == 2);
  CHECK(o[2] == -3.5f);
  CHECK(o[3] == -0.5f);
  CHECK(std::isnan(o[4]));
  CHECK(o[5] == 1);
  CHECK(o[6] == 0);
  CHECK(std::signbit(o[7]));
  // A.view_as_real_copy(torch.tensor(1+2j)).shape -> [2]
  std::vector<cd> s{{1, 2}};
  std::vector<double> os(2);
  Tensor tos = mk(os, {2});
  REQUIRE(view_as_real_copy_out<types<cf, cd>>(ctx, mk(s, {}), tos));
  CHECK(os == std::vector<double>{1, 2});
  // Random complex128 [3, 4] in dim order {1, 0} -> output [3, 4, 2] in dim order {2, 0, 1} (parts outermost).
  std::mt19937 g(9);
  std::uniform_real_distribution<double> dist(-5, 5);
  std::vector<cd> zt(12);
  for (auto& v : zt) v = cd(dist(g), dist(g));
  std::vector<double> ot(24);
  Tensor tot = mk(ot, {3, 4, 2}, ScalarType::Double, {2, 0, 1});
  REQUIRE(view_as_real_copy_out<types<cf, cd>>(ctx, mk(zt, {3, 4}, ScalarType::ComplexDouble, {1, 0}), tot));
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      const cd src = zt[j * 3 + i];
      CHECK(ot[0 * 12 + i * 4 + j] == src.real());
      CHECK(ot[1 * 12 + i * 4 + j] == src.imag());
    }
  CHECK(slots_of("aten::view_as_real_copy.out") == 3);
}

TEST_CASE("view_as_real_copy: errors", "[kernels][complex]") {
  KernelContext ctx;
  // torch: "view_as_real is only supported for complex tensors"
  std::vector<float> x{1, 2}, o(4);
  Tensor to = mk(o, {2, 2});
  auto st = view_as_real_copy_out<types<cf, cd>>(ctx, mk(x, {2}), to);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("only supported for complex tensors, got Float"));
  // torch: "Expected out tensor to have dtype float, but got double instead"
  std::vector<cf> z{{1, 2}, {3, 4}};
  std::vector<double> od(4);
  Tensor tod = mk(od, {2, 2});
  st = view_as_real_copy_out<types<cf, cd>>(ctx, mk(z, {2}), tod);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("output dtype must be Float for a ComplexFloat input, got Double"));
  // The output must have the extra trailing dim of 2.
  std::vector<float> o2(4);
  Tensor to2 = mk(o2, {4});
  st = view_as_real_copy_out<types<cf, cd>>(ctx, mk(z, {2}), to2);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("cannot change rank"));
  // ComplexHalf has no element type here.
  std::vector<uint16_t> zh(4);
  std::vector<uint16_t> oh(4);
  Tensor toh = mk(oh, {2, 2}, ScalarType::Half);
  st = view_as_real_copy_out<types<cf, cd>>(ctx, mk(zh, {2}, ScalarType::ComplexHalf), toh);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("unsupported dtype ComplexHalf"));
}
