// Tests for the factories and fills (include/etrt/kernels/ops/fill.h).
#include <catch2/catch.hpp>

#include <vector>

#include "etrt/kernels/ops/fill.h"
#include "kernel_test_util.h"

namespace {
using namespace etrt;
using namespace etrt::kernels;
using namespace etrt::ktest;
}  // namespace

TEST_CASE("full, zeros, ones, empty", "[kernels][fill]") {
  KernelContext ctx;
  std::vector<float> o(6, -1);
  Tensor to = mk(o, {2, 3});
  const std::vector<int64_t> size{2, 3};
  REQUIRE(full_out<real_bool_types>(ctx, size, Scalar{2.5}, to));
  CHECK(o == std::vector<float>(6, 2.5f));
  REQUIRE(zeros_out<real_bool_types>(ctx, size, to));
  CHECK(o == std::vector<float>(6, 0.0f));
  REQUIRE(ones_out<real_bool_types>(ctx, size, to));
  CHECK(o == std::vector<float>(6, 1.0f));
  std::vector<int64_t> oi(8);
  Tensor ti = mk(oi, {8}, ScalarType::Long, {}, ShapeDynamism::DynamicBound);
  const std::vector<int64_t> s3{3};
  REQUIRE(full_out<real_bool_types>(ctx, s3, Scalar{int64_t{7}}, ti));
  CHECK(ti.size(0) == 3);
  CHECK(oi[2] == 7);
  EValue none;
  const std::vector<int64_t> s5{5};
  REQUIRE(empty_out<real_bool_types>(ctx, s5, none, ti));
  CHECK(ti.size(0) == 5);
  std::vector<uint16_t> h{0};
  Tensor th = mk(h, {}, ScalarType::BFloat16);
  REQUIRE(full_out<real_bool_types>(ctx, {}, Scalar{1.5}, th));
  CHECK(static_cast<float>(BFloat16{std::bit_cast<BFloat16>(h[0])}) == 1.5f);
  auto s = full_out<real_bool_types>(ctx, size, Scalar{1.0}, ti);
  REQUIRE(!s);
  CHECK(s.error().code == Error::NotSupported);
  const std::vector<int64_t> neg{-1};
  s = zeros_out<real_bool_types>(ctx, neg, ti);
  REQUIRE(!s);
  CHECK(s.error().what.find("negative size") != std::string::npos);
}

TEST_CASE("full_like and fill", "[kernels][fill]") {
  KernelContext ctx;
  std::vector<double> a(4);
  std::vector<int32_t> o(4);
  Tensor to = mk(o, {2, 2});
  EValue none;
  REQUIRE(full_like_out<real_bool_types>(ctx, mk(a, {2, 2}), Scalar{int64_t{3}}, none, to));
  CHECK(o == std::vector<int32_t>(4, 3));
  REQUIRE(fill_scalar_out<real_bool_types>(ctx, mk(a, {2, 2}), Scalar{true}, to));
  CHECK(o == std::vector<int32_t>(4, 1));
  std::vector<float> v{-4.0f};
  REQUIRE(fill_tensor_out<real_bool_types>(ctx, mk(a, {2, 2}), mk(v, {}), to));
  CHECK(o == std::vector<int32_t>(4, -4));
  std::vector<float> v2{1, 2};
  auto s = fill_tensor_out<real_bool_types>(ctx, mk(a, {2, 2}), mk(v2, {2}), to);
  REQUIRE(!s);
  CHECK(s.error().what.find("0-dimensional") != std::string::npos);
  std::vector<float> e;
  Tensor te = mk(e, {0});
  REQUIRE(full_like_out<real_bool_types>(ctx, mk(e, {0}), Scalar{1.0}, none, te));
}

TEST_CASE("arange", "[kernels][fill]") {
  KernelContext ctx;
  std::vector<int64_t> o(16);
  Tensor to = mk(o, {16}, ScalarType::Long, {}, ShapeDynamism::DynamicBound);
  REQUIRE(arange_out<real_types>(ctx, Scalar{int64_t{5}}, to));
  CHECK(to.size(0) == 5);
  CHECK(std::vector<int64_t>(o.begin(), o.begin() + 5) == std::vector<int64_t>{0, 1, 2, 3, 4});
  REQUIRE(arange_start_out<real_types>(ctx, Scalar{int64_t{10}}, Scalar{int64_t{1}}, Scalar{int64_t{-3}}, to));
  CHECK(to.size(0) == 3);
  CHECK(std::vector<int64_t>(o.begin(), o.begin() + 3) == std::vector<int64_t>{10, 7, 4});
  std::vector<float> f(16);
  Tensor tf = mk(f, {16}, ScalarType::Float, {}, ShapeDynamism::DynamicBound);
  REQUIRE(arange_start_out<real_types>(ctx, Scalar{0.0}, Scalar{1.0}, Scalar{0.25}, tf));
  CHECK(tf.size(0) == 4);
  for (int i = 0; i < 4; ++i) CHECK(f[i] == Approx(0.25 * i));
  REQUIRE(arange_start_out<real_types>(ctx, Scalar{int64_t{0}}, Scalar{int64_t{0}}, Scalar{int64_t{1}}, tf));
  CHECK(tf.size(0) == 0);
  auto s = arange_start_out<real_types>(ctx, Scalar{int64_t{0}}, Scalar{int64_t{5}}, Scalar{int64_t{0}}, tf);
  REQUIRE(!s);
  CHECK(s.error().what.find("step must be nonzero") != std::string::npos);
  s = arange_start_out<real_types>(ctx, Scalar{int64_t{5}}, Scalar{int64_t{0}}, Scalar{int64_t{1}}, tf);
  REQUIRE(!s);
  CHECK(s.error().code == Error::InvalidArgument);
  std::vector<float> small(2);
  Tensor ts = mk(small, {2});
  s = arange_out<real_types>(ctx, Scalar{int64_t{5}}, ts);
  REQUIRE(!s);
}

TEST_CASE("fill wrappers have the schema's slot counts", "[kernels][fill]") {
  CHECK(slots_of("aten::full.out") == 4);
  CHECK(slots_of("aten::full_like.out") == 5);
  CHECK(slots_of("aten::fill.Scalar_out") == 4);
  CHECK(slots_of("aten::fill.Tensor_out") == 4);
  CHECK(slots_of("aten::zeros.out") == 3);
  CHECK(slots_of("aten::ones.out") == 3);
  CHECK(slots_of("aten::empty.out") == 4);
  CHECK(slots_of("aten::arange.out") == 3);
  CHECK(slots_of("aten::arange.start_out") == 5);
}
