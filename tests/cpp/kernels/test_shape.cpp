#include <catch2/catch.hpp>

#include <numeric>

#include "etrt/kernels/ops/shape.h"
#include "kernel_test_util.h"

using namespace etrt;
using namespace etrt::kernels;
using namespace etrt::ktest;

namespace {
template <class T>
std::vector<T> iota_vec(size_t n, T start = T(0)) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<T>(start + static_cast<T>(i));
  return v;
}
}  // namespace

TEST_CASE("shape: view_copy infers -1 and handles a permuted input", "[shape]") {
  KernelContext ctx;
  auto x = iota_vec<float>(6);
  Tensor in = mk(ScalarType::Float, {2, 3}, x.data());
  std::vector<float> o(6);
  Tensor out = mk(ScalarType::Float, {3, 2}, o.data());
  const int64_t size[] = {-1, 2};
  REQUIRE(view_copy_out<real_bool_types>(ctx, in, size, out));
  CHECK(o == x);
  // channels-last input [1,2,2,2] (dim order 0,2,3,1): logical order differs from memory order
  std::vector<int32_t> m = iota_vec<int32_t>(8);  // memory [h][w][c]
  Tensor cl = mk(ScalarType::Int, {1, 2, 2, 2}, m.data(), {0, 2, 3, 1});
  std::vector<int32_t> o2(8);
  Tensor out2 = mk(ScalarType::Int, {8}, o2.data());
  const int64_t s2[] = {8};
  REQUIRE(view_copy_out<real_bool_types>(ctx, cl, s2, out2));
  // logical (c,h,w) -> memory (h*2 + w)*2 + c
  for (int c = 0; c < 2; ++c)
    for (int h = 0; h < 2; ++h)
      for (int w = 0; w < 2; ++w) CHECK(o2[(c * 2 + h) * 2 + w] == (h * 2 + w) * 2 + c);
  const int64_t bad[] = {4, 2};
  auto st = view_copy_out<real_bool_types>(ctx, in, bad, out);
  REQUIRE(!st);
  CHECK(st.error().code == Error::InvalidArgument);
  CHECK_THAT(st.error().what, Catch::Contains("invalid for input of size 6"));
  CHECK(slots_of("aten::view_copy.out") == 4);
}

TEST_CASE("shape: permute, transpose, t", "[shape]") {
  KernelContext ctx;
  auto x = iota_vec<double>(24);
  Tensor in = mk(ScalarType::Double, {2, 3, 4}, x.data());
  std::vector<double> o(24);
  Tensor out = mk(ScalarType::Double, {4, 2, 3}, o.data());
  const int64_t dims[] = {2, 0, -2};
  REQUIRE(permute_copy_out<real_bool_types>(ctx, in, dims, out));
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 2; ++b)
      for (int c = 0; c < 3; ++c) CHECK(o[(a * 2 + b) * 3 + c] == x[(b * 3 + c) * 4 + a]);
  Tensor out2 = mk(ScalarType::Double, {4, 3, 2}, o.data());
  REQUIRE(transpose_copy_int_out<real_bool_types>(ctx, in, 0, -1, out2));
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 2; ++c) CHECK(o[(a * 3 + b) * 2 + c] == x[(c * 3 + b) * 4 + a]);
  std::vector<uint8_t> bx = {1, 0, 1, 1, 0, 0};
  Tensor b = mk(ScalarType::Bool, {2, 3}, bx.data());
  std::vector<uint8_t> bo(6);
  Tensor bt = mk(ScalarType::Bool, {3, 2}, bo.data());
  REQUIRE(t_copy_out<real_bool_types>(ctx, b, bt));
  CHECK(bo == std::vector<uint8_t>{1, 1, 0, 0, 1, 0});
  const int64_t dup[] = {0, 0, 1};
  auto st = permute_copy_out<real_bool_types>(ctx, in, dup, out);
  REQUIRE(!st);
  CHECK_THAT(st.error().what, Catch::Contains("repeats"));
}

TEST_CASE("shape: unsqueeze / squeeze / expand, rank-0 and empty", "[shape]") {
  KernelContext ctx;
  float v = 3.5f, r = 0;
  Tensor s0 = mk(ScalarType::Float, {}, &v);
  Tensor u = mk(ScalarType::Float, {1}, &r);
  REQUIRE(unsqueeze_copy_out<real_bool_types>(ctx, s0, 0, u));
  CHECK(r == 3.5f);
  auto x = iota_vec<int64_t>(3);
  Tensor in = mk(ScalarType::Long, {1, 3, 1}, x.data());
  std::vector<int64_t> o(3);
  Tensor sq = mk(ScalarType::Long, {3}, o.data());
  REQUIRE(squeeze_copy_out<real_bool_types>(ctx, in, sq));
  CHECK(o == x);
  Tensor sq1 = mk(ScalarType::Long, {3, 1}, o.data());
  REQUIRE(squeeze_copy_dim_out<real_bool_types>(ctx, in, 0, sq1));
  const int64_t dd[] = {0, -1};
  REQUIRE(squeeze_copy_dims_out<real_bool_types>(ctx, in, dd, sq));
  // expand [3,1] -> [2,3,4]
  Tensor e_in = mk(ScalarType::Long, {3, 1}, x.data());
  std::vector<int64_t> eo(24);
  Tensor e = mk(ScalarType::Long, {2, 3, 4}, eo.data());
  const int64_t es[] = {2, -1, 4};
  REQUIRE(expand_copy_out<real_bool_types>(ctx, e_in, es, false, e));
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 4; ++c) CHECK(eo[(a * 3 + b) * 4 + c] == b);
  const int64_t bad[] = {2, 5, 4};
  auto st = expand_copy_out<real_bool_types>(ctx, e_in, bad, false, e);
  REQUIRE(!st);
  CHECK(st.error().code == Error::InvalidArgument);
  // empty
  Tensor em = mk(ScalarType::Float, {0, 3}, nullptr);
  Tensor emo = mk(ScalarType::Float, {0, 1, 3}, nullptr);
  REQUIRE(unsqueeze_copy_out<real_bool_types>(ctx, em, 1, emo));
  // dtype mismatch
  Tensor wrong = mk(ScalarType::Int, {3}, o.data());
  auto st2 = squeeze_copy_out<real_bool_types>(ctx, in, wrong);
  REQUIRE(!st2);
  CHECK_THAT(st2.error().what, Catch::Contains("!= output dtype"));
}

TEST_CASE("shape: cat skips legacy empties, converts dtypes; stack", "[shape]") {
  KernelContext ctx;
  auto a = iota_vec<float>(4), b = iota_vec<float>(2, 10.f);
  Tensor ta = mk(ScalarType::Float, {2, 2}, a.data()), tb = mk(ScalarType::Float, {2, 1}, b.data());
  Tensor legacy = mk(ScalarType::Float, {0}, nullptr);
  std::vector<float> o(6);
  Tensor out = mk(ScalarType::Float, {2, 3}, o.data());
  std::vector<Tensor*> list{&ta, &legacy, &tb};
  REQUIRE(cat_out<real_bool_types>(ctx, list, -1, out));
  CHECK(o == std::vector<float>{0, 1, 10, 2, 3, 11});
  std::vector<int32_t> ib = {7, 8};
  Tensor tib = mk(ScalarType::Int, {2, 1}, ib.data());
  std::vector<Tensor*> list2{&ta, &tib};
  REQUIRE(cat_out<real_bool_types>(ctx, list2, 1, out));
  CHECK(o == std::vector<float>{0, 1, 7, 2, 3, 8});
  std::vector<Tensor*> bad{&ta, &tb};
  Tensor out0 = mk(ScalarType::Float, {3, 2}, o.data());
  auto st = cat_out<real_bool_types>(ctx, bad, 0, out0);
  REQUIRE(!st);
  CHECK_THAT(st.error().what, Catch::Contains("except in dim 0"));
  std::vector<float> so(8);
  Tensor sout = mk(ScalarType::Float, {2, 2, 2}, so.data());
  Tensor tc = mk(ScalarType::Float, {2, 2}, a.data());
  std::vector<Tensor*> sl{&ta, &tc};
  REQUIRE(stack_out<real_bool_types>(ctx, sl, 1, sout));
  CHECK(so == std::vector<float>{0, 1, 0, 1, 2, 3, 2, 3});
  CHECK(slots_of("aten::cat.out") == 4);
}

TEST_CASE("shape: slice, select, narrow, split, unbind", "[shape]") {
  KernelContext ctx;
  auto x = iota_vec<int16_t>(20);
  Tensor in = mk(ScalarType::Short, {4, 5}, x.data());
  std::vector<int16_t> o(20);
  Tensor sl = mk(ScalarType::Short, {4, 2}, o.data());
  REQUIRE(slice_copy_tensor_out<real_bool_types>(ctx, in, 1, 1, -1, 2, sl));
  CHECK(std::vector<int16_t>(o.begin(), o.begin() + 8) == std::vector<int16_t>{1, 3, 6, 8, 11, 13, 16, 18});
  Tensor sl2 = mk(ScalarType::Short, {0, 5}, o.data());
  REQUIRE(slice_copy_tensor_out<real_bool_types>(ctx, in, 0, 10, 20, 1, sl2));
  Tensor se = mk(ScalarType::Short, {4}, o.data());
  REQUIRE(select_copy_int_out<real_bool_types>(ctx, in, 1, -1, se));
  CHECK(std::vector<int16_t>(o.begin(), o.begin() + 4) == std::vector<int16_t>{4, 9, 14, 19});
  auto st = select_copy_int_out<real_bool_types>(ctx, in, 1, 5, se);
  REQUIRE(!st);
  CHECK_THAT(st.error().what, Catch::Contains("out of range"));
  Tensor na = mk(ScalarType::Short, {2, 5}, o.data());
  REQUIRE(narrow_copy_out<real_bool_types>(ctx, in, 0, 2, 2, na));
  CHECK(o[0] == 10);
  std::vector<int16_t> p0(10), p1(10);
  Tensor s0 = mk(ScalarType::Short, {4, 3}, p0.data()), s1 = mk(ScalarType::Short, {4, 2}, p1.data());
  std::vector<Tensor*> outs{&s0, &s1};
  REQUIRE(split_copy_tensor_out<real_bool_types>(ctx, in, 3, 1, outs));
  CHECK(p0[3] == 5);
  CHECK(p1[1] == 4);
  const int64_t sizes[] = {3, 2};
  REQUIRE(split_with_sizes_copy_out<real_bool_types>(ctx, in, sizes, -1, outs));
  const int64_t bad[] = {3, 3};
  REQUIRE(!split_with_sizes_copy_out<real_bool_types>(ctx, in, bad, -1, outs));
  std::vector<std::vector<int16_t>> ub(4, std::vector<int16_t>(5));
  std::vector<Tensor> ut;
  for (auto& v : ub) ut.push_back(mk(ScalarType::Short, {5}, v.data()));
  std::vector<Tensor*> up{&ut[0], &ut[1], &ut[2], &ut[3]};
  REQUIRE(unbind_copy_int_out<real_bool_types>(ctx, in, 0, up));
  CHECK(ub[3][4] == 19);
  CHECK(slots_of("aten::split_copy.Tensor_out") == 5);
}

TEST_CASE("shape: repeat, flip, roll, pad, as_strided, pixel_shuffle, tril", "[shape]") {
  KernelContext ctx;
  auto x = iota_vec<float>(6);
  Tensor in = mk(ScalarType::Float, {2, 3}, x.data());
  std::vector<float> o(64);
  Tensor rp = mk(ScalarType::Float, {2, 4, 3}, o.data());
  const int64_t reps[] = {2, 2, 1};
  REQUIRE(repeat_out<real_bool_types>(ctx, in, reps, rp));
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 4; ++b)
      for (int c = 0; c < 3; ++c) CHECK(o[(a * 4 + b) * 3 + c] == x[(b % 2) * 3 + c]);
  Tensor fl = mk(ScalarType::Float, {2, 3}, o.data());
  const int64_t fd[] = {0, 1};
  REQUIRE(flip_out<real_bool_types>(ctx, in, fd, fl));
  CHECK(std::vector<float>(o.begin(), o.begin() + 6) == std::vector<float>{5, 4, 3, 2, 1, 0});
  const int64_t sh[] = {1, -1}, rd[] = {0, 1};
  REQUIRE(roll_out<real_bool_types>(ctx, in, sh, rd, fl));
  CHECK(std::vector<float>(o.begin(), o.begin() + 6) == std::vector<float>{4, 5, 3, 1, 2, 0});
  const int64_t sh1[] = {2};
  REQUIRE(roll_out<real_bool_types>(ctx, in, sh1, {}, fl));
  CHECK(std::vector<float>(o.begin(), o.begin() + 6) == std::vector<float>{4, 5, 0, 1, 2, 3});
  Tensor pd = mk(ScalarType::Float, {3, 3}, o.data());
  const int64_t pad[] = {1, -1, 0, 1};
  REQUIRE(constant_pad_nd_out<real_bool_types>(ctx, in, pad, Scalar{-1.5}, pd));
  CHECK(std::vector<float>(o.begin(), o.begin() + 9) ==
        std::vector<float>{-1.5, 0, 1, -1.5, 3, 4, -1.5, -1.5, -1.5});
  Tensor as = mk(ScalarType::Float, {2, 2}, o.data());
  const int64_t asz[] = {2, 2}, ast[] = {1, 2};
  REQUIRE(as_strided_copy_out<real_bool_types>(ctx, in, asz, ast, 1, as));
  CHECK(std::vector<float>(o.begin(), o.begin() + 4) == std::vector<float>{1, 3, 2, 4});
  const int64_t ast_bad[] = {3, 2};
  auto st = as_strided_copy_out<real_bool_types>(ctx, in, asz, ast_bad, 1, as);
  REQUIRE(!st);
  CHECK_THAT(st.error().what, Catch::Contains("reaches element"));
  // pixel_shuffle [1, 4, 1, 2] r=2 -> [1, 1, 2, 4]
  auto px = iota_vec<int32_t>(8);
  Tensor pin = mk(ScalarType::Int, {1, 4, 1, 2}, px.data());
  std::vector<int32_t> po(8);
  Tensor pout = mk(ScalarType::Int, {1, 1, 2, 4}, po.data());
  REQUIRE(pixel_shuffle_out<real_bool_types>(ctx, pin, 2, pout));
  for (int h = 0; h < 2; ++h)
    for (int w = 0; w < 4; ++w) CHECK(po[h * 4 + w] == px[((h % 2) * 2 + (w % 2)) * 2 + w / 2]);
  std::vector<double> tx(9, 1.0), to(9);
  Tensor tin = mk(ScalarType::Double, {3, 3}, tx.data()), tout = mk(ScalarType::Double, {3, 3}, to.data());
  REQUIRE(tril_out<real_bool_types>(ctx, tin, -1, tout));
  CHECK(to == std::vector<double>{0, 0, 0, 1, 0, 0, 1, 1, 0});
  CHECK(slots_of("aten::constant_pad_nd.out") == 5);
}
