// Tests for comparisons, logical and bitwise binary ops (include/etrt/kernels/ops/compare.h).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "etrt/kernels/ops/compare.h"
#include "kernel_test_util.h"

namespace {
using namespace etrt;
using namespace etrt::kernels;
using namespace etrt::ktest;
}  // namespace

TEST_CASE("comparisons against tensors broadcast and handle NaN", "[kernels][compare]") {
  KernelContext ctx;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> a{1, 2, 3, nan, 5, 6};  // [2, 3]
  std::vector<float> b{2, 2, nan};           // [3]
  std::vector<uint8_t> o(6);
  Tensor ta = mk(a, {2, 3}), tb = mk(b, {3}), to = mk(o, {2, 3}, ScalarType::Bool);
  REQUIRE(lt_tensor_out<real_bool_types>(ctx, ta, tb, to));
  CHECK(o == std::vector<uint8_t>{1, 0, 0, 0, 0, 0});
  REQUIRE(le_tensor_out<real_bool_types>(ctx, ta, tb, to));
  CHECK(o == std::vector<uint8_t>{1, 1, 0, 0, 0, 0});
  REQUIRE(eq_tensor_out<real_bool_types>(ctx, ta, tb, to));
  CHECK(o == std::vector<uint8_t>{0, 1, 0, 0, 0, 0});
  REQUIRE(ne_tensor_out<real_bool_types>(ctx, ta, tb, to));
  CHECK(o == std::vector<uint8_t>{1, 0, 1, 1, 1, 1});
  REQUIRE(gt_tensor_out<real_bool_types>(ctx, ta, tb, to));
  CHECK(o == std::vector<uint8_t>{0, 0, 0, 0, 1, 0});
  REQUIRE(ge_tensor_out<real_bool_types>(ctx, ta, tb, to));
  CHECK(o == std::vector<uint8_t>{0, 1, 0, 0, 1, 0});
}

TEST_CASE("comparisons with mixed dtypes and a non-bool output", "[kernels][compare]") {
  KernelContext ctx;
  std::vector<int32_t> a{1, 2, 3};
  std::vector<double> b{1.5, 2.0, 2.5};
  std::vector<float> o(3);
  Tensor to = mk(o, {3});
  REQUIRE(gt_tensor_out<real_bool_types>(ctx, mk(a, {3}), mk(b, {3}), to));
  CHECK(o == std::vector<float>{0, 0, 1});
  // Scalar forms: int tensor vs float scalar compares in float.
  std::vector<uint8_t> ob(3);
  Tensor tob = mk(ob, {3}, ScalarType::Bool);
  REQUIRE(lt_scalar_out<real_bool_types>(ctx, mk(a, {3}), Scalar{2.5}, tob));
  CHECK(ob == std::vector<uint8_t>{1, 1, 0});
  REQUIRE(eq_scalar_out<real_bool_types>(ctx, mk(a, {3}), Scalar{int64_t{2}}, tob));
  CHECK(ob == std::vector<uint8_t>{0, 1, 0});
  REQUIRE(ne_scalar_out<real_bool_types>(ctx, mk(a, {3}), Scalar{int64_t{2}}, tob));
  CHECK(ob == std::vector<uint8_t>{1, 0, 1});
  REQUIRE(ge_scalar_out<real_bool_types>(ctx, mk(a, {3}), Scalar{int64_t{2}}, tob));
  CHECK(ob == std::vector<uint8_t>{0, 1, 1});
  REQUIRE(gt_scalar_out<real_bool_types>(ctx, mk(a, {3}), Scalar{int64_t{2}}, tob));
  CHECK(ob == std::vector<uint8_t>{0, 0, 1});
  REQUIRE(le_scalar_out<real_bool_types>(ctx, mk(a, {3}), Scalar{int64_t{2}}, tob));
  CHECK(ob == std::vector<uint8_t>{1, 1, 0});
  // Half input, rank 0 and empty.
  std::vector<uint16_t> h{Half(0.5f).bits};
  std::vector<uint8_t> o0{0};
  Tensor t0 = mk(o0, {}, ScalarType::Bool);
  REQUIRE(gt_scalar_out<real_bool_types>(ctx, mk(h, {}, ScalarType::Half), Scalar{0.25}, t0));
  CHECK(o0[0] == 1);
  std::vector<float> e;
  std::vector<uint8_t> oe;
  Tensor te = mk(oe, {0}, ScalarType::Bool);
  REQUIRE(eq_tensor_out<real_bool_types>(ctx, mk(e, {0}), mk(e, {0}), te));
}

TEST_CASE("comparison failures", "[kernels][compare]") {
  KernelContext ctx;
  std::vector<float> a{1, 2, 3}, b{1, 2};
  std::vector<uint8_t> o(3);
  Tensor to = mk(o, {3}, ScalarType::Bool);
  auto s = eq_tensor_out<real_bool_types>(ctx, mk(a, {3}), mk(b, {2}), to);
  REQUIRE(!s);
  CHECK(s.error().code == Error::InvalidArgument);
  CHECK(s.error().what.find("eq.Tensor_out") != std::string::npos);
}

TEST_CASE("logical_and/or/xor", "[kernels][compare]") {
  KernelContext ctx;
  std::vector<float> a{0, 1, 2, std::numeric_limits<float>::quiet_NaN()};
  std::vector<int64_t> b{0, 0, 3, 1};
  std::vector<uint8_t> o(4);
  Tensor to = mk(o, {4}, ScalarType::Bool);
  REQUIRE(logical_and_out<real_bool_types>(ctx, mk(a, {4}), mk(b, {4}), to));
  CHECK(o == std::vector<uint8_t>{0, 0, 1, 1});
  REQUIRE(logical_or_out<real_bool_types>(ctx, mk(a, {4}), mk(b, {4}), to));
  CHECK(o == std::vector<uint8_t>{0, 1, 1, 1});
  REQUIRE(logical_xor_out<real_bool_types>(ctx, mk(a, {4}), mk(b, {4}), to));
  CHECK(o == std::vector<uint8_t>{0, 1, 0, 0});
  std::vector<double> od(4);
  Tensor tod = mk(od, {4});
  std::vector<uint8_t> one{1};
  REQUIRE(logical_and_out<real_bool_types>(ctx, mk(a, {4}), mk(one, {}, ScalarType::Bool), tod));
  CHECK(od == std::vector<double>{0, 1, 1, 1});
}

TEST_CASE("bitwise ops", "[kernels][compare]") {
  KernelContext ctx;
  using IB = types<uint8_t, int8_t, int16_t, int32_t, int64_t, bool>;
  std::vector<int32_t> a{0b1100, 0b1010, -1}, b{0b1010, 0b0110, 5}, o(3);
  Tensor to = mk(o, {3});
  REQUIRE(bitwise_and_tensor_out<IB>(ctx, mk(a, {3}), mk(b, {3}), to));
  CHECK(o == std::vector<int32_t>{0b1000, 0b0010, 5});
  REQUIRE(bitwise_or_tensor_out<IB>(ctx, mk(a, {3}), mk(b, {3}), to));
  CHECK(o == std::vector<int32_t>{0b1110, 0b1110, -1});
  REQUIRE(bitwise_xor_tensor_out<IB>(ctx, mk(a, {3}), mk(b, {3}), to));
  CHECK(o == std::vector<int32_t>{0b0110, 0b1100, -6});
  REQUIRE(bitwise_and_scalar_out<IB>(ctx, mk(a, {3}), Scalar{int64_t{8}}, to));
  CHECK(o == std::vector<int32_t>{8, 8, 8});
  REQUIRE(bitwise_or_scalar_out<IB>(ctx, mk(a, {3}), Scalar{int64_t{1}}, to));
  CHECK(o == std::vector<int32_t>{0b1101, 0b1011, -1});
  REQUIRE(bitwise_xor_scalar_out<IB>(ctx, mk(a, {3}), Scalar{int64_t{-1}}, to));
  CHECK(o == std::vector<int32_t>{~0b1100, ~0b1010, 0});
  std::vector<uint8_t> x{1, 0, 1}, y{1, 1, 0}, ob(3);
  Tensor tob = mk(ob, {3}, ScalarType::Bool);
  REQUIRE(bitwise_xor_tensor_out<IB>(ctx, mk(x, {3}, ScalarType::Bool), mk(y, {3}, ScalarType::Bool), tob));
  CHECK(ob == std::vector<uint8_t>{0, 1, 1});
  std::vector<float> f(3);
  Tensor tf = mk(f, {3});
  auto s = bitwise_and_tensor_out<IB>(ctx, mk(a, {3}), mk(b, {3}), tf);
  REQUIRE(!s);
  CHECK(s.error().what.find("integral") != std::string::npos);
  s = bitwise_and_scalar_out<IB>(ctx, mk(a, {3}), Scalar{1.5}, to);
  REQUIRE(!s);
}

TEST_CASE("compare wrappers have the schema's slot counts", "[kernels][compare]") {
  for (const char* op : {"eq", "ne", "lt", "le", "gt", "ge"}) {
    CHECK(slots_of(std::string("aten::") + op + ".Tensor_out") == 4);
    CHECK(slots_of(std::string("aten::") + op + ".Scalar_out") == 4);
  }
  for (const char* op : {"and", "or", "xor"}) {
    CHECK(slots_of(std::string("aten::logical_") + op + ".out") == 4);
    CHECK(slots_of(std::string("aten::bitwise_") + op + ".Tensor_out") == 4);
    CHECK(slots_of(std::string("aten::bitwise_") + op + ".Scalar_out") == 4);
  }
}
