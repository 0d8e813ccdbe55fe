// Tests for where, masked_fill and the copy family (include/etrt/kernels/ops/select_where.h).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "etrt/kernels/ops/select_where.h"
#include "kernel_test_util.h"

namespace {
using namespace etrt;
using namespace etrt::kernels;
using namespace etrt::ktest;
}  // namespace

TEST_CASE("where.self_out broadcasts three operands", "[kernels][select_where]") {
  KernelContext ctx;
  std::vector<uint8_t> c{1, 0, 1};  // Bool [3]
  std::vector<float> a{1, 2, 3, 4, 5, 6};  // [2, 3]
  std::vector<float> b{-1, -2};           // [2, 1]
  std::vector<float> o(6);
  Tensor tc = mk(c, {3}, ScalarType::Bool), ta = mk(a, {2, 3}), tb = mk(b, {2, 1}), to = mk(o, {2, 3});
  REQUIRE(where_self_out<real_bool_types>(ctx, tc, ta, tb, to));
  CHECK(o == std::vector<float>{1, -1, 3, 4, -2, 6});

  // Dense fast path and a double output with int inputs converted.
  std::vector<uint8_t> c2{0, 1, 1, 0};
  std::vector<int32_t> a2{1, 2, 3, 4};
  std::vector<double> b2{0.5};
  std::vector<double> o2(4);
  Tensor u = mk(o2, {4});
  REQUIRE(where_self_out<real_bool_types>(ctx, mk(c2, {4}, ScalarType::Byte), mk(a2, {4}), mk(b2, {}), u));
  CHECK(o2 == std::vector<double>{0.5, 2, 3, 0.5});

  // Rank-0 everything.
  std::vector<uint8_t> c3{1};
  std::vector<float> a3{7}, b3{8}, o3{0};
  Tensor t3 = mk(o3, {});
  REQUIRE(where_self_out<real_bool_types>(ctx, mk(c3, {}, ScalarType::Bool), mk(a3, {}), mk(b3, {}), t3));
  CHECK(o3[0] == 7);

  // Empty.
  std::vector<float> e;
  Tensor te = mk(e, {0, 3});
  REQUIRE(where_self_out<real_bool_types>(ctx, tc, mk(e, {0, 3}), mk(e, {0, 3}), te));
}

TEST_CASE("where.self_out failures", "[kernels][select_where]") {
  KernelContext ctx;
  std::vector<float> c{1, 0, 1}, a{1, 2, 3}, o(3);
  Tensor to = mk(o, {3});
  auto s = where_self_out<real_bool_types>(ctx, mk(c, {3}), mk(a, {3}), mk(a, {3}), to);
  REQUIRE(!s);
  CHECK(s.error().code == Error::InvalidArgument);
  CHECK(s.error().what.find("condition dtype") != std::string::npos);
  std::vector<uint8_t> cb{1, 0};
  s = where_self_out<real_bool_types>(ctx, mk(cb, {2}, ScalarType::Bool), mk(a, {3}), mk(a, {3}), to);
  REQUIRE(!s);
  CHECK(s.error().what.find("cannot be broadcast") != std::string::npos);
  // Static output of the wrong shape.
  std::vector<float> o4(4);
  Tensor t4 = mk(o4, {4});
  s = where_self_out<real_bool_types>(ctx, mk(cb, {1}, ScalarType::Bool), mk(a, {3}), mk(a, {3}), t4);
  REQUIRE(!s);
  CHECK(s.error().code == Error::NotSupported);
}

TEST_CASE("masked_fill.Scalar_out", "[kernels][select_where]") {
  KernelContext ctx;
  std::vector<float> a{1, 2, 3, 4, 5, 6}, o(6);
  std::vector<uint8_t> m{1, 0, 0};
  Tensor to = mk(o, {2, 3});
  REQUIRE(masked_fill_scalar_out<real_bool_types>(ctx, mk(a, {2, 3}), mk(m, {3}, ScalarType::Bool),
                                                  Scalar{-std::numeric_limits<double>::infinity()}, to));
  CHECK(std::isinf(o[0]));
  CHECK(std::isinf(o[3]));
  CHECK(o[1] == 2);
  CHECK(o[5] == 6);
  std::vector<int64_t> ai{1, 2, 3}, oi(3);
  Tensor toi = mk(oi, {3});
  REQUIRE(masked_fill_scalar_out<real_bool_types>(ctx, mk(ai, {3}), mk(m, {3}, ScalarType::Bool), Scalar{int64_t{9}},
                                                  toi));
  CHECK(oi == std::vector<int64_t>{9, 2, 3});
  auto s = masked_fill_scalar_out<real_bool_types>(ctx, mk(ai, {3}), mk(ai, {3}), Scalar{int64_t{9}}, toi);
  REQUIRE(!s);
  CHECK(s.error().what.find("mask dtype") != std::string::npos);
}

TEST_CASE("clone.out and alias copies respect the output dim order", "[kernels][select_where]") {
  KernelContext ctx;
  // NCHW [1, 2, 2, 3] contiguous -> channels-last output.
  std::vector<float> a(12);
  for (int i = 0; i < 12; ++i) a[i] = static_cast<float>(i);
  std::vector<float> o(12, -1);
  Tensor to = mk(o, {1, 2, 2, 3}, ScalarType::Float, {0, 2, 3, 1});
  EValue none;
  REQUIRE(clone_out<real_bool_types>(ctx, mk(a, {1, 2, 2, 3}), none, to));
  // out[n, c, h, w] lives at ((h * 3 + w) * 2 + c)
  for (int c = 0; c < 2; ++c)
    for (int h = 0; h < 2; ++h)
      for (int w = 0; w < 3; ++w) CHECK(o[(h * 3 + w) * 2 + c] == a[c * 6 + h * 3 + w]);

  std::vector<int32_t> b{1, 2, 3}, ob(3);
  Tensor tob = mk(ob, {3});
  REQUIRE(alias_copy_out<real_bool_types>(ctx, mk(b, {3}), tob));
  CHECK(ob == b);
  std::fill(ob.begin(), ob.end(), 0);
  REQUIRE(detach_copy_out<real_bool_types>(ctx, mk(b, {3}), tob));
  CHECK(ob == b);
  std::fill(ob.begin(), ob.end(), 0);
  REQUIRE(lift_fresh_copy_out<real_bool_types>(ctx, mk(b, {3}), tob));
  CHECK(ob == b);

  std::vector<double> od(3);
  Tensor tod = mk(od, {3});
  auto s = clone_out<real_bool_types>(ctx, mk(b, {3}), none, tod);
  REQUIRE(!s);
  CHECK(s.error().what.find("must equal input dtype") != std::string::npos);
}

TEST_CASE("clone.out resizes a bounded dynamic output", "[kernels][select_where]") {
  KernelContext ctx;
  std::vector<float> a{1, 2, 3}, o(8, 0);
  Tensor to = mk(o, {8}, ScalarType::Float, {}, ShapeDynamism::DynamicBound);
  EValue none;
  REQUIRE(clone_out<real_bool_types>(ctx, mk(a, {3}), none, to));
  CHECK(to.size(0) == 3);
  CHECK(o[2] == 3);
}

TEST_CASE("_to_dim_order_copy.out converts dtype and layout", "[kernels][select_where]") {
  KernelContext ctx;
  std::vector<float> a(24);
  for (int i = 0; i < 24; ++i) a[i] = static_cast<float>(i) * 0.5f - 3.0f;
  std::vector<uint16_t> o(24);  // Half storage
  Tensor to = mk(o, {2, 3, 2, 2}, ScalarType::Half, {0, 2, 3, 1});
  const std::vector<int64_t> order{0, 2, 3, 1};
  REQUIRE(to_dim_order_copy_out<real_bool_types>(ctx, mk(a, {2, 3, 2, 2}), false, std::span<const int64_t>(order), to));
  const Half* h = reinterpret_cast<const Half*>(o.data());
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < 2; ++y)
        for (int x = 0; x < 2; ++x)
          CHECK(static_cast<float>(h[n * 12 + (y * 2 + x) * 3 + c]) == a[n * 12 + c * 4 + y * 2 + x]);

  // Back to contiguous float via _clone_dim_order needs equal dtypes; via _to_dim_order_copy it converts.
  std::vector<float> back(24);
  Tensor tb = mk(back, {2, 3, 2, 2});
  REQUIRE(to_dim_order_copy_out<real_bool_types>(ctx, to, false, std::nullopt, tb));
  CHECK(back == a);
  auto s = clone_dim_order_out<real_bool_types>(ctx, to, false, std::nullopt, tb);
  REQUIRE(!s);
  CHECK(s.error().code == Error::InvalidArgument);

  // float -> int64 truncates; float -> bool.
  std::vector<float> f{1.7f, -2.5f, 0.0f};
  std::vector<int64_t> oi(3);
  Tensor toi = mk(oi, {3});
  REQUIRE(to_dim_order_copy_out<real_bool_types>(ctx, mk(f, {3}), false, std::nullopt, toi));
  CHECK(oi == std::vector<int64_t>{1, -2, 0});
  std::vector<uint8_t> ob(3);
  Tensor tob = mk(ob, {3}, ScalarType::Bool);
  REQUIRE(to_dim_order_copy_out<real_bool_types>(ctx, mk(f, {3}), false, std::nullopt, tob));
  CHECK(ob == std::vector<uint8_t>{1, 1, 0});

  const std::vector<int64_t> bad{0, 1, 2, 3};
  s = to_dim_order_copy_out<real_bool_types>(ctx, mk(a, {2, 3, 2, 2}), false, std::span<const int64_t>(bad), to);
  REQUIRE(!s);
  CHECK(s.error().what.find("dim_order") != std::string::npos);
}

TEST_CASE("_clone_dim_order.out and _to_copy.out", "[kernels][select_where]") {
  KernelContext ctx;
  std::vector<double> a{1, 2, 3, 4, 5, 6}, o(6);
  Tensor to = mk(o, {2, 3}, ScalarType::Double, {1, 0});
  const std::vector<int64_t> order{1, 0};
  REQUIRE(clone_dim_order_out<real_bool_types>(ctx, mk(a, {2, 3}), false, std::span<const int64_t>(order), to));
  CHECK(o == std::vector<double>{1, 4, 2, 5, 3, 6});
  std::vector<int8_t> oc(6);
  Tensor toc = mk(oc, {2, 3});
  EValue none;
  REQUIRE(to_copy_out<real_bool_types>(ctx, mk(a, {2, 3}), false, none, toc));
  CHECK(oc == std::vector<int8_t>{1, 2, 3, 4, 5, 6});
  // Empty and rank 0.
  std::vector<double> e;
  Tensor te = mk(e, {0});
  REQUIRE(to_copy_out<real_bool_types>(ctx, mk(e, {0}), false, none, te));
  std::vector<float> z{0};
  std::vector<double> zd{2.5};
  Tensor tz = mk(z, {});
  REQUIRE(to_copy_out<real_bool_types>(ctx, mk(zd, {}), false, none, tz));
  CHECK(z[0] == 2.5f);
}

TEST_CASE("copy.out broadcasts src into self's shape", "[kernels][select_where]") {
  KernelContext ctx;
  std::vector<float> self(6), src{1, 2, 3}, o(6);
  Tensor to = mk(o, {2, 3});
  REQUIRE(copy_out<real_bool_types>(ctx, mk(self, {2, 3}), mk(src, {3}), false, to));
  CHECK(o == std::vector<float>{1, 2, 3, 1, 2, 3});
  std::vector<float> big(12);
  auto s = copy_out<real_bool_types>(ctx, mk(self, {2, 3}), mk(big, {4, 3}), false, to);
  REQUIRE(!s);
  CHECK(s.error().what.find("cannot be broadcast") != std::string::npos);
}

TEST_CASE("scalar_tensor.out", "[kernels][select_where]") {
  KernelContext ctx;
  std::vector<float> o{0};
  Tensor to = mk(o, {});
  REQUIRE(scalar_tensor_out<real_bool_types>(ctx, Scalar{3.25}, to));
  CHECK(o[0] == 3.25f);
  std::vector<int64_t> oi{0};
  Tensor toi = mk(oi, {});
  REQUIRE(scalar_tensor_out<real_bool_types>(ctx, Scalar{int64_t{-7}}, toi));
  CHECK(oi[0] == -7);
  std::vector<float> o2(2);
  Tensor t2 = mk(o2, {2});
  auto s = scalar_tensor_out<real_bool_types>(ctx, Scalar{1.0}, t2);
  REQUIRE(!s);
}

TEST_CASE("select_where wrappers have the schema's slot counts", "[kernels][select_where]") {
  CHECK(slots_of("aten::where.self_out") == 5);
  CHECK(slots_of("aten::masked_fill.Scalar_out") == 5);
  CHECK(slots_of("aten::clone.out") == 4);
  CHECK(slots_of("aten::alias_copy.out") == 3);
  CHECK(slots_of("aten::detach_copy.out") == 3);
  CHECK(slots_of("aten::lift_fresh_copy.out") == 3);
  CHECK(slots_of("aten::copy.out") == 5);
  CHECK(slots_of("aten::_to_copy.out") == 5);
  CHECK(slots_of("dim_order_ops::_to_dim_order_copy.out") == 5);
  CHECK(slots_of("dim_order_ops::_clone_dim_order.out") == 5);
  CHECK(slots_of("aten::scalar_tensor.out") == 3);

  // Through the table: where with EValues.
  std::vector<uint8_t> c{1, 0};
  std::vector<float> a{1, 2}, b{3, 4}, o(2);
  EValue ec(mk(c, {2}, ScalarType::Bool)), ea(mk(a, {2})), eb(mk(b, {2})), eo(mk(o, {2})), ret;
  EValue* args[] = {&ec, &ea, &eb, &eo, &ret};
  KernelContext ctx;
  for (const auto& e : etrt::generated::portable_kernels())
    if (e.name == "aten::where.self_out") REQUIRE(e.fn(ctx, std::span<EValue* const>(args)));
  CHECK(o == std::vector<float>{1, 4});
}
