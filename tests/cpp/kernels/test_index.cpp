#include <catch2/catch.hpp>

#include <random>

#include "etrt/kernels/ops/index.h"
#include "kernel_test_util.h"

using namespace etrt;
using namespace etrt::kernels;
using namespace etrt::ktest;

namespace {
}  // namespace

TEST_CASE("index_select and gather", "[index]") {
  KernelContext ctx;
  std::vector<float> x = {0, 1, 2, 3, 4, 5};  // [2, 3]
  Tensor in = mk(ScalarType::Float, {2, 3}, x.data());
  std::vector<int64_t> idx = {2, -3};
  Tensor ti = mk(ScalarType::Long, {2}, idx.data());
  std::vector<float> o(6);
  Tensor out = mk(ScalarType::Float, {2, 2}, o.data());
  REQUIRE(index_select_out<real_bool_types>(ctx, in, 1, ti, out));
  CHECK(std::vector<float>(o.begin(), o.begin() + 4) == std::vector<float>{2, 0, 5, 3});
  std::vector<int32_t> gi = {0, 2, 1, 1};  // int32 index [2, 2]
  Tensor tg = mk(ScalarType::Int, {2, 2}, gi.data());
  REQUIRE(gather_out<real_bool_types>(ctx, in, 1, tg, false, out));
  CHECK(std::vector<float>(o.begin(), o.begin() + 4) == std::vector<float>{0, 2, 4, 4});
  gi[1] = 3;
  auto st = gather_out<real_bool_types>(ctx, in, 1, tg, false, out);
  REQUIRE(!st);
  CHECK(st.error().code == Error::InvalidArgument);
  CHECK_THAT(st.error().what, Catch::Contains("out of bounds"));
  // rank-0 self
  int64_t s0 = 42, r0 = 0, i0 = 0;
  Tensor ts0 = mk(ScalarType::Long, {}, &s0), tr0 = mk(ScalarType::Long, {}, &r0), ti0 = mk(ScalarType::Long, {}, &i0);
  REQUIRE(gather_out<real_bool_types>(ctx, ts0, 0, ti0, false, tr0));
  CHECK(r0 == 42);
  CHECK(slots_of("aten::gather.out") == 6);
}

TEST_CASE("scatter src/value/add, select_scatter, slice_scatter", "[index]") {
  KernelContext ctx;
  std::vector<double> x(6, 0.0), src = {1, 2, 3, 4, 5, 6}, o(6);
  Tensor in = mk(ScalarType::Double, {2, 3}, x.data()), ts = mk(ScalarType::Double, {2, 3}, src.data()),
         out = mk(ScalarType::Double, {2, 3}, o.data());
  std::vector<int64_t> idx = {2, 0, 1, 1};  // [2, 2]
  Tensor ti = mk(ScalarType::Long, {2, 2}, idx.data());
  REQUIRE(scatter_src_out<real_bool_types>(ctx, in, 1, ti, ts, out));
  CHECK(o == std::vector<double>{2, 0, 1, 0, 5, 0});
  REQUIRE(scatter_value_out<real_bool_types>(ctx, in, 1, ti, Scalar{7.5}, out));
  CHECK(o == std::vector<double>{7.5, 0, 7.5, 0, 7.5, 0});
  REQUIRE(scatter_add_out<real_types>(ctx, in, 1, ti, ts, out));
  CHECK(o == std::vector<double>{2, 0, 1, 0, 9, 0});
  std::vector<double> row = {9, 8, 7};
  Tensor tr = mk(ScalarType::Double, {3}, row.data());
  REQUIRE(select_scatter_out<real_bool_types>(ctx, in, tr, 0, -1, out));
  CHECK(o == std::vector<double>{0, 0, 0, 9, 8, 7});
  std::vector<double> col = {1, 2, 3, 4};
  Tensor tc = mk(ScalarType::Double, {2, 2}, col.data());
  REQUIRE(slice_scatter_out<real_bool_types>(ctx, in, tc, 1, 0, std::nullopt, 2, out));
  CHECK(o == std::vector<double>{1, 0, 2, 3, 0, 4});
  auto st = slice_scatter_out<real_bool_types>(ctx, in, tr, 1, 0, std::nullopt, 2, out);
  REQUIRE(!st);
  CHECK_THAT(st.error().what, Catch::Contains("must have shape"));
}

TEST_CASE("index.Tensor: broadcast indices, None, masks; index_put; nonzero", "[index]") {
  KernelContext ctx;
  std::vector<int32_t> x(24);
  for (int i = 0; i < 24; ++i) x[i] = i;
  Tensor in = mk(ScalarType::Int, {2, 3, 4}, x.data());
  // x[:, [0, 2], [[1], [3]]] -> indices broadcast to [2, 2]; adjacent -> out [2, 2, 2]
  std::vector<int64_t> i1 = {0, 2}, i2 = {1, 3};
  Tensor t1 = mk(ScalarType::Long, {2}, i1.data()), t2 = mk(ScalarType::Long, {2, 1}, i2.data());
  std::vector<Tensor*> ind{nullptr, &t1, &t2};
  std::vector<int32_t> o(8);
  Tensor out = mk(ScalarType::Int, {2, 2, 2}, o.data());
  REQUIRE(index_tensor_out<real_bool_types>(ctx, in, ind, out));
  for (int a = 0; a < 2; ++a)
    for (int p = 0; p < 2; ++p)
      for (int q = 0; q < 2; ++q) CHECK(o[(a * 2 + p) * 2 + q] == a * 12 + i1[q] * 4 + i2[p]);
  // non-adjacent: x[[1, 0], :, [2, 3]] -> [2, 3]
  std::vector<int64_t> j0 = {1, 0}, j2 = {2, 3};
  Tensor u0 = mk(ScalarType::Long, {2}, j0.data()), u2 = mk(ScalarType::Long, {2}, j2.data());
  std::vector<Tensor*> ind2{&u0, nullptr, &u2};
  std::vector<int32_t> o2(6);
  Tensor out2 = mk(ScalarType::Int, {2, 3}, o2.data());
  REQUIRE(index_tensor_out<real_bool_types>(ctx, in, ind2, out2));
  for (int b = 0; b < 2; ++b)
    for (int m = 0; m < 3; ++m) CHECK(o2[b * 3 + m] == j0[b] * 12 + m * 4 + j2[b]);
  // bool mask on the first dim
  std::vector<uint8_t> mask = {0, 1};
  Tensor tm = mk(ScalarType::Bool, {2}, mask.data());
  std::vector<Tensor*> ind3{&tm};
  std::vector<int32_t> o3(24);
  Tensor out3 = mk(ScalarType::Int, {2, 3, 4}, o3.data(), {}, ShapeDynamism::DynamicBound);
  REQUIRE(index_tensor_out<real_bool_types>(ctx, in, ind3, out3));
  CHECK(out3.size(0) == 1);
  CHECK(o3[0] == 12);
  i1[0] = 5;
  auto st = index_tensor_out<real_bool_types>(ctx, in, ind, out);
  REQUIRE(!st);
  CHECK_THAT(st.error().what, Catch::Contains("out of bounds"));
  // index_put with accumulate and a repeated index
  std::vector<float> y(4, 1.f), v = {10, 20, 30}, yo(4);
  Tensor ty = mk(ScalarType::Float, {4}, y.data()), tv = mk(ScalarType::Float, {3}, v.data()),
         tyo = mk(ScalarType::Float, {4}, yo.data());
  std::vector<int64_t> pi = {0, 3, 0};
  Tensor tpi = mk(ScalarType::Long, {3}, pi.data());
  std::vector<Tensor*> pind{&tpi};
  REQUIRE(index_put_out<real_bool_types>(ctx, ty, pind, tv, true, tyo));
  CHECK(yo == std::vector<float>{41, 1, 1, 21});
  REQUIRE(index_put_out<real_bool_types>(ctx, ty, pind, tv, false, tyo));
  CHECK(yo[3] == 20);
  // nonzero
  std::vector<float> nz = {0, 1.5f, 0, -2};
  Tensor tnz = mk(ScalarType::Float, {2, 2}, nz.data());
  std::vector<int64_t> no(8);
  Tensor tno = mk(ScalarType::Long, {4, 2}, no.data(), {}, ShapeDynamism::DynamicBound);
  REQUIRE(nonzero_out<real_bool_types>(ctx, tnz, tno));
  CHECK(tno.size(0) == 2);
  CHECK(std::vector<int64_t>(no.begin(), no.begin() + 4) == std::vector<int64_t>{0, 1, 1, 1});
  CHECK(slots_of("aten::index.Tensor_out") == 4);
}

TEST_CASE("index_put_: in place, random rows and columns against a loop reference", "[index]") {
  CHECK(slots_of("aten::index_put_") == 5);
  KernelContext ctx;
  std::mt19937 g(21);
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  std::uniform_int_distribution<int64_t> row(-4, 3), col(0, 4);
  // self [4, 5]; x[rows, cols] (+)= values, with repeated positions among the 12 picks.
  std::vector<double> x(20);
  for (auto& e : x) e = u(g);
  std::vector<int64_t> ri(12);
  std::vector<int32_t> ci(12);
  std::vector<double> v(12);
  for (int i = 0; i < 12; ++i) {
    ri[i] = row(g);
    ci[i] = static_cast<int32_t>(col(g));
    v[i] = u(g);
  }
  Tensor tri = mk(ScalarType::Long, {12}, ri.data()), tci = mk(ScalarType::Int, {12}, ci.data());
  Tensor tv = mk(ScalarType::Double, {12}, v.data());
  std::vector<Tensor*> ind{&tri, &tci};
  for (bool accumulate : {true, false}) {
    std::vector<double> want = x;
    for (int i = 0; i < 12; ++i) {
      double& dst = want[static_cast<size_t>((ri[i] < 0 ? ri[i] + 4 : ri[i]) * 5 + ci[i])];
      dst = accumulate ? dst + v[i] : v[i];  // without accumulate the last write wins, as in torch's CPU loop
    }
    std::vector<double> y = x, o(20);
    Tensor ty = mk(ScalarType::Double, {4, 5}, y.data()), to = mk(ScalarType::Double, {4, 5}, o.data());
    REQUIRE(index_put_inplace<real_bool_types>(ctx, ty, ind, tv, accumulate));
    REQUIRE(index_put_out<real_bool_types>(ctx, mk(ScalarType::Double, {4, 5}, x.data()), ind, tv, accumulate, to));
    for (size_t i = 0; i < 20; ++i) {
      CHECK(y[i] == Approx(want[i]).margin(1e-12));
      CHECK(o[i] == y[i]);  // the same code path as index_put.out
    }
  }
}

TEST_CASE("index_put_: torch spot values, masks, None, channels-last self", "[index]") {
  KernelContext ctx;
  // x = torch.zeros(5); x.index_put_((torch.tensor([0, 3, 0]),), torch.tensor([10., 20., 30.]), accumulate=True)
  //   -> [40, 0, 0, 20, 0]
  std::vector<float> x(5, 0.f), v = {10, 20, 30};
  std::vector<int64_t> i0 = {0, 3, 0};
  Tensor ti0 = mk(ScalarType::Long, {3}, i0.data());
  std::vector<Tensor*> ind0{&ti0};
  Tensor tx = mk(ScalarType::Float, {5}, x.data());
  REQUIRE(index_put_inplace<real_bool_types>(ctx, tx, ind0, mk(ScalarType::Float, {3}, v.data()), true));
  CHECK(x == std::vector<float>{40, 0, 0, 20, 0});
  // x = torch.arange(12).reshape(3, 4); x.index_put_((torch.tensor([True, False, True]),), torch.tensor([7, 8, 9, 10]))
  //   -> [[7, 8, 9, 10], [4, 5, 6, 7], [7, 8, 9, 10]]
  std::vector<int64_t> a(12), av = {7, 8, 9, 10};
  for (int i = 0; i < 12; ++i) a[i] = i;
  std::vector<uint8_t> mask = {1, 0, 1};
  Tensor tm = mk(ScalarType::Bool, {3}, mask.data());
  std::vector<Tensor*> ind1{&tm};
  Tensor ta = mk(ScalarType::Long, {3, 4}, a.data());
  REQUIRE(index_put_inplace<real_bool_types>(ctx, ta, ind1, mk(ScalarType::Long, {4}, av.data()), false));
  CHECK(a == std::vector<int64_t>{7, 8, 9, 10, 4, 5, 6, 7, 7, 8, 9, 10});
  // x = torch.arange(12).reshape(3, 4); torch.ops.aten.index_put_(x, [None, torch.tensor([1, 1])],
  //   torch.tensor([[1], [2], [3]]), True) -> [[0, 3, 2, 3], [4, 9, 6, 7], [8, 15, 10, 11]]
  for (int i = 0; i < 12; ++i) a[i] = i;
  std::vector<int64_t> i2 = {1, 1}, v2 = {1, 2, 3};
  Tensor ti2 = mk(ScalarType::Long, {2}, i2.data());
  std::vector<Tensor*> ind2{nullptr, &ti2};
  REQUIRE(index_put_inplace<real_bool_types>(ctx, ta, ind2, mk(ScalarType::Long, {3, 1}, v2.data()), true));
  CHECK(a == std::vector<int64_t>{0, 3, 2, 3, 4, 9, 6, 7, 8, 15, 10, 11});
  // Channels-last self [1, 3, 2, 2]: x[:, [2, 0]] = values [2, 1, 1] (broadcast over w); memory is n, h, w, c.
  std::vector<int32_t> cl(12, 0), cv = {5, 6, 7, 8};
  Tensor tcl = mk(ScalarType::Int, {1, 3, 2, 2}, cl.data(), {0, 2, 3, 1});
  std::vector<int64_t> ci = {2, 0};
  Tensor tci = mk(ScalarType::Long, {2}, ci.data());
  std::vector<Tensor*> ind3{nullptr, &tci};
  REQUIRE(index_put_inplace<real_bool_types>(ctx, tcl, ind3, mk(ScalarType::Int, {2, 2, 1}, cv.data()), false));
  for (int c = 0; c < 3; ++c)
    for (int h = 0; h < 2; ++h)
      for (int w = 0; w < 2; ++w) {
        const int want = c == 2 ? cv[h] : c == 0 ? cv[2 + h] : 0;
        CHECK(cl[(h * 2 + w) * 3 + c] == want);
      }
}

TEST_CASE("index_put_: errors leave self untouched", "[index]") {
  KernelContext ctx;
  std::vector<float> x = {1, 2, 3, 4}, v = {9, 9};
  const std::vector<float> before = x;
  Tensor tx = mk(ScalarType::Float, {4}, x.data()), tv = mk(ScalarType::Float, {2}, v.data());
  std::vector<int64_t> idx = {1, 4};  // 4 is out of bounds, and comes after a valid index
  Tensor ti = mk(ScalarType::Long, {2}, idx.data());
  std::vector<Tensor*> ind{&ti};
  auto st = index_put_inplace<real_bool_types>(ctx, tx, ind, tv, false);
  REQUIRE_FALSE(st);
  CHECK(st.error().code == Error::InvalidArgument);
  CHECK_THAT(st.error().what, Catch::Contains("index_put_: index 4 is out of bounds for dim 0 with size 4"));
  CHECK(x == before);
  idx[1] = 2;
  // torch: "Index put requires the source and destination dtypes match"
  std::vector<int64_t> iv = {9, 9};
  st = index_put_inplace<real_bool_types>(ctx, tx, ind, mk(ScalarType::Long, {2}, iv.data()), false);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("values dtype Long != self dtype Float"));
  std::vector<float> v3 = {1, 2, 3};
  st = index_put_inplace<real_bool_types>(ctx, tx, ind, mk(ScalarType::Float, {3}, v3.data()), true);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("values float32[3] cannot be broadcast to [2]"));
  std::vector<float> fi = {0, 1};
  Tensor tfi = mk(ScalarType::Float, {2}, fi.data());
  std::vector<Tensor*> find{&tfi};
  st = index_put_inplace<real_bool_types>(ctx, tx, find, tv, false);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("index tensor must be Long or Int, got Float"));
  std::vector<Tensor*> too_many{&ti, &ti};
  st = index_put_inplace<real_bool_types>(ctx, tx, too_many, tv, false);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("too many indices"));
  CHECK(x == before);
}
