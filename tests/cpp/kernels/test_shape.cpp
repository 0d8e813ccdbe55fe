#include <catch2/catch.hpp>

#include <array>
#include <limits>
#include <numeric>
#include <random>

#include "etrt/kernels/ops/pad.h"
#include "etrt/kernels/ops/rearrange.h"
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

namespace {
/// copy_views of src (sizes, strides in elements) into a dense dst, against the element-by-element definition.
template <class U>
void check_copy_views(std::vector<int64_t> sizes, std::vector<int64_t> sstrides, int64_t base_offset) {
  int64_t span = 1, dn = 1;
  for (size_t i = 0; i < sizes.size(); ++i) span += (sizes[i] - 1) * std::abs(sstrides[i]), dn *= sizes[i];
  std::vector<U> src(static_cast<size_t>(span + base_offset));
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<U>(i * 2654435761u);
  std::vector<U> dst(static_cast<size_t>(dn)), want(static_cast<size_t>(dn));
  mv::View d, sv;
  d.data = reinterpret_cast<char*>(dst.data());
  sv.data = reinterpret_cast<char*>(src.data() + base_offset);
  int64_t stride = dn;
  for (size_t i = 0; i < sizes.size(); ++i) {
    stride /= sizes[i];
    d.push(sizes[i], stride);
    sv.push(sizes[i], sstrides[i]);
  }
  std::vector<int64_t> idx(sizes.size(), 0);
  for (int64_t k = 0; k < dn; ++k) {
    int64_t off = base_offset, rem = k;
    for (size_t i = sizes.size(); i-- > 0;) {
      off += (rem % sizes[i]) * sstrides[i];
      rem /= sizes[i];
    }
    want[static_cast<size_t>(k)] = src[static_cast<size_t>(off)];
  }
  mv::copy_views(sizeof(U), d, sv);
  int64_t wrong = 0;
  for (size_t k = 0; k < dst.size(); ++k) wrong += dst[k] != want[k];
  CHECK(wrong == 0);
}
}  // namespace

TEST_CASE("shape: copy_views transposes in blocks, edges and batches included", "[shape][transpose]") {
  // NCHW -> NHWC of a 3-channel image (inner dim of 3), NHWC -> NCHW of 96 channels, sizes off the 8 x 8 block,
  // a batch dim, a flipped outer dim, 1-, 2-, 4- and 8-byte elements; large enough ones split across threads.
  for (auto [h, w, c] : {std::array<int64_t, 3>{13, 11, 3}, {7, 9, 96}, {8, 8, 8}, {17, 5, 19}, {300, 300, 3},
                         {112, 112, 24}}) {
    INFO("H " << h << " W " << w << " C " << c);
    check_copy_views<float>({h, w, c}, {w, 1, h * w}, 0);       // CHW read as HWC
    check_copy_views<float>({c, h, w}, {1, w * c, c}, 0);       // HWC read as CHW
    check_copy_views<uint16_t>({c, h * w}, {1, c}, 0);
    check_copy_views<uint8_t>({h, w, c}, {w, 1, h * w}, 0);                        // bytes (a quantized input)
    check_copy_views<uint8_t>({2, h * w, c}, {h * w * c, 1, h * w}, 0);
    check_copy_views<uint64_t>({h * w, c}, {1, h * w}, 0);
    check_copy_views<float>({2, c, h * w}, {h * w * c, 1, c}, 0);                  // batched
    check_copy_views<float>({2, c, h * w}, {-h * w * c, 1, c}, h * w * c);         // batch dim flipped
  }
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
  std::vector<int16_t> p0(12), p1(8);  // exactly [4,3] and [4,2]
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

TEST_CASE("shape: diagonal_copy over every dim pair and offset against a loop reference", "[shape]") {
  CHECK(slots_of("aten::diagonal_copy.out") == 6);
  KernelContext ctx;
  std::mt19937 g(17);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  const int64_t S[3] = {3, 4, 5};
  std::vector<double> x(60);
  for (auto& e : x) e = u(g);
  // The same values in a permuted layout (dim order 2, 0, 1) must give the same diagonals.
  std::vector<double> xp(60);
  for (int64_t a = 0; a < 3; ++a)
    for (int64_t b = 0; b < 4; ++b)
      for (int64_t c = 0; c < 5; ++c)
        xp[static_cast<size_t>((c * 3 + a) * 4 + b)] = x[static_cast<size_t>((a * 4 + b) * 5 + c)];
  Tensor in = mk(ScalarType::Double, {3, 4, 5}, x.data()), inp = mk(ScalarType::Double, {3, 4, 5}, xp.data(), {2, 0, 1});
  const std::pair<int64_t, int64_t> pairs[] = {{0, 1}, {1, 2}, {2, 0}, {-1, -2}, {0, -1}};
  int bad = 0, checked = 0;
  for (auto [d1, d2] : pairs)
    for (int64_t off = -6; off <= 6; ++off) {
      const int a = static_cast<int>(d1 < 0 ? d1 + 3 : d1), b = static_cast<int>(d2 < 0 ? d2 + 3 : d2);
      const int rest = 3 - a - b;  // the remaining dim
      const int64_t len = std::max<int64_t>(0, off >= 0 ? std::min(S[a], S[b] - off) : std::min(S[a] + off, S[b]));
      std::vector<double> want;
      for (int64_t r = 0; r < S[rest]; ++r)
        for (int64_t k = 0; k < len; ++k) {
          int64_t ix[3];
          ix[rest] = r;
          ix[a] = off >= 0 ? k : k - off;
          ix[b] = off >= 0 ? k + off : k;
          want.push_back(x[static_cast<size_t>((ix[0] * 4 + ix[1]) * 5 + ix[2])]);
        }
      for (const Tensor* src : {&in, &inp}) {
        std::vector<double> o(60, 7.0);
        Tensor out = mk(ScalarType::Double, {S[rest], 5}, o.data(), {}, ShapeDynamism::DynamicBound);
        REQUIRE(diagonal_copy_out<real_bool_types>(ctx, *src, off, d1, d2, out));
        ++checked;
        if (out.size(0) != S[rest] || out.size(1) != len ||
            std::vector<double>(o.begin(), o.begin() + static_cast<long>(want.size())) != want)
          ++bad;
      }
    }
  CHECK(checked == 130);
  CHECK(bad == 0);
}

TEST_CASE("shape: diagonal_copy torch spot values and errors", "[shape]") {
  KernelContext ctx;
  auto x = iota_vec<float>(24);  // torch.arange(24.).reshape(2, 3, 4)
  Tensor in = mk(ScalarType::Float, {2, 3, 4}, x.data());
  std::vector<float> o(24);
  // torch.diagonal_copy(x) -> [[0, 16], [1, 17], [2, 18], [3, 19]]
  Tensor o42 = mk(ScalarType::Float, {4, 2}, o.data());
  REQUIRE(diagonal_copy_out<real_bool_types>(ctx, in, 0, 0, 1, o42));
  CHECK(std::vector<float>(o.begin(), o.begin() + 8) == std::vector<float>{0, 16, 1, 17, 2, 18, 3, 19});
  // torch.diagonal_copy(x, 1, -1, 0) -> [[12], [16], [20]]
  Tensor o31 = mk(ScalarType::Float, {3, 1}, o.data());
  REQUIRE(diagonal_copy_out<real_bool_types>(ctx, in, 1, -1, 0, o31));
  CHECK(std::vector<float>(o.begin(), o.begin() + 3) == std::vector<float>{12, 16, 20});
  // torch.diagonal_copy(x, -1, 1, 2) -> [[4, 9], [16, 21]]
  Tensor o22 = mk(ScalarType::Float, {2, 2}, o.data());
  REQUIRE(diagonal_copy_out<real_bool_types>(ctx, in, -1, 1, 2, o22));
  CHECK(std::vector<float>(o.begin(), o.begin() + 4) == std::vector<float>{4, 9, 16, 21});
  // torch.diagonal_copy(x, -2**63, 1, 2).shape -> [2, 0]; likewise for 2**62
  Tensor o20 = mk(ScalarType::Float, {2, 0}, o.data());
  REQUIRE(diagonal_copy_out<real_bool_types>(ctx, in, std::numeric_limits<int64_t>::min(), 1, 2, o20));
  REQUIRE(diagonal_copy_out<real_bool_types>(ctx, in, int64_t{1} << 62, 1, 2, o20));

  auto st = diagonal_copy_out<real_bool_types>(ctx, in, 0, 1, -2, o42);
  REQUIRE_FALSE(st);
  CHECK(st.error().code == Error::InvalidArgument);
  CHECK_THAT(st.error().what, Catch::Contains("diagonal dimensions cannot be identical 1, -2"));
  Tensor v1 = mk(ScalarType::Float, {3}, x.data());
  st = diagonal_copy_out<real_bool_types>(ctx, v1, 0, 0, 1, o42);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("expected a tensor of rank >= 2, got float32[3]"));
  st = diagonal_copy_out<real_bool_types>(ctx, in, 0, 0, 3, o42);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("dim 3 is out of range"));
  st = diagonal_copy_out<real_bool_types>(ctx, in, 0, 0, 1, o22);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("output shape [4, 2] does not match the static shape [2, 2]"));
}

TEST_CASE("shape: unfold_copy against a loop reference, torch spot values, rank 0, errors", "[shape]") {
  CHECK(slots_of("aten::unfold_copy.out") == 6);
  KernelContext ctx;
  // Random sizes/steps on a [4, 9] int64 tensor, along both dims, also from a transposed layout.
  std::vector<int64_t> x(36);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<int64_t>(i * 7 % 36);
  std::vector<int64_t> xt(36);
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 9; ++c) xt[c * 4 + r] = x[r * 9 + c];
  Tensor in = mk(ScalarType::Long, {4, 9}, x.data()), tin = mk(ScalarType::Long, {4, 9}, xt.data(), {1, 0});
  int bad = 0;
  for (int d = 0; d < 2; ++d)
    for (int64_t size = 0; size <= (d ? 9 : 4); ++size)
      for (int64_t step = 1; step <= 4; ++step) {
        const int64_t n = d ? 9 : 4, win = (n - size) / step + 1, other = d ? 4 : 9;
        std::vector<int64_t> want;
        for (int64_t i = 0; i < (d ? other : win); ++i)
          for (int64_t j = 0; j < (d ? win : other); ++j)
            for (int64_t k = 0; k < size; ++k) {
              const int64_t r = d ? i : i * step + k, c = d ? j * step + k : j;
              want.push_back(x[static_cast<size_t>(r * 9 + c)]);
            }
        for (const Tensor* src : {&in, &tin}) {
          std::vector<int64_t> o(1000, -1);
          Tensor out = mk(ScalarType::Long, {10, 10, 10}, o.data(), {}, ShapeDynamism::DynamicBound);
          REQUIRE(unfold_copy_out<real_bool_types>(ctx, *src, d - 2, size, step, out));
          const std::vector<int64_t> shape = {d ? other : win, d ? win : other, size};
          if (std::vector<int64_t>(out.sizes().begin(), out.sizes().end()) != shape ||
              std::vector<int64_t>(o.begin(), o.begin() + static_cast<long>(want.size())) != want)
            ++bad;
        }
      }
  CHECK(bad == 0);
  // torch.unfold_copy(torch.arange(7.), 0, 3, 2) -> [[0, 1, 2], [2, 3, 4], [4, 5, 6]]
  auto y = iota_vec<float>(7);
  Tensor ty = mk(ScalarType::Float, {7}, y.data());
  std::vector<float> o(9);
  Tensor o33 = mk(ScalarType::Float, {3, 3}, o.data());
  REQUIRE(unfold_copy_out<real_bool_types>(ctx, ty, 0, 3, 2, o33));
  CHECK(o == std::vector<float>{0, 1, 2, 2, 3, 4, 4, 5, 6});
  // torch.unfold_copy(torch.arange(7.), 0, 7, 100) -> [[0, ..., 6]]; a huge step is one window
  Tensor o17 = mk(ScalarType::Float, {1, 7}, o.data());
  REQUIRE(unfold_copy_out<real_bool_types>(ctx, ty, 0, 7, std::numeric_limits<int64_t>::max(), o17));
  CHECK(std::vector<float>(o.begin(), o.begin() + 7) == y);
  // torch.unfold_copy(torch.arange(7.), 0, 0, 2).shape -> [4, 0]
  Tensor o40 = mk(ScalarType::Float, {4, 0}, o.data());
  REQUIRE(unfold_copy_out<real_bool_types>(ctx, ty, 0, 0, 2, o40));
  // torch.unfold_copy(torch.tensor(5.), 0, 1, 1) -> tensor([5.]); size 0 -> tensor([])
  float s = 5.f, so = 0.f;
  Tensor t0 = mk(ScalarType::Float, {}, &s), t1 = mk(ScalarType::Float, {1}, &so);
  REQUIRE(unfold_copy_out<real_bool_types>(ctx, t0, -1, 1, 3, t1));
  CHECK(so == 5.f);
  Tensor te = mk(ScalarType::Float, {0}, &so);
  REQUIRE(unfold_copy_out<real_bool_types>(ctx, t0, 0, 0, 1, te));

  auto st = unfold_copy_out<real_bool_types>(ctx, ty, 0, 8, 2, o33);
  REQUIRE_FALSE(st);
  CHECK(st.error().code == Error::InvalidArgument);
  CHECK_THAT(st.error().what, Catch::Contains("maximum size for tensor at dimension 0 is 7 but size is 8"));
  st = unfold_copy_out<real_bool_types>(ctx, ty, 0, -1, 2, o33);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("size is -1 but must be >= 0"));
  st = unfold_copy_out<real_bool_types>(ctx, ty, 0, 2, 0, o33);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("step is 0 but must be > 0"));
  st = unfold_copy_out<real_bool_types>(ctx, t0, 0, 2, 1, t1);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("maximum size for tensor at dimension 0 is 1 but size is 2"));
  st = unfold_copy_out<real_bool_types>(ctx, ty, 1, 2, 1, o33);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("dim 1 is out of range"));
}

TEST_CASE("shape: repeat_interleave.Tensor_out", "[shape]") {
  CHECK(slots_of("aten::repeat_interleave.Tensor_out") == 4);
  using Ints = types<int32_t, int64_t>;
  KernelContext ctx;
  // torch.repeat_interleave(torch.tensor([2, 0, 3])) -> [0, 0, 2, 2, 2]
  std::vector<int64_t> r = {2, 0, 3}, o(8, -1);
  Tensor tr = mk(ScalarType::Long, {3}, r.data());
  Tensor out = mk(ScalarType::Long, {8}, o.data(), {}, ShapeDynamism::DynamicBound);
  REQUIRE(repeat_interleave_tensor_out<Ints>(ctx, tr, std::nullopt, out));
  REQUIRE(out.size(0) == 5);
  CHECK(std::vector<int64_t>(o.begin(), o.begin() + 5) == std::vector<int64_t>{0, 0, 2, 2, 2});
  REQUIRE(repeat_interleave_tensor_out<Ints>(ctx, tr, int64_t{5}, out));
  // Random Int repeats, zeros included.
  std::mt19937 g(4);
  std::uniform_int_distribution<int32_t> u(0, 4);
  std::vector<int32_t> ri(40);
  for (auto& e : ri) e = u(g);
  std::vector<int32_t> want;
  for (int i = 0; i < 40; ++i)
    for (int k = 0; k < ri[i]; ++k) want.push_back(i);
  std::vector<int32_t> oi(200, -1);
  Tensor toi = mk(ScalarType::Int, {200}, oi.data(), {}, ShapeDynamism::DynamicUnbound);
  REQUIRE(repeat_interleave_tensor_out<Ints>(ctx, mk(ScalarType::Int, {40}, ri.data()), std::nullopt, toi));
  REQUIRE(toi.size(0) == static_cast<int64_t>(want.size()));
  CHECK(std::vector<int32_t>(oi.begin(), oi.begin() + static_cast<long>(want.size())) == want);
  // torch.repeat_interleave(torch.tensor([], dtype=torch.long)) -> tensor([])
  REQUIRE(repeat_interleave_tensor_out<Ints>(ctx, mk(ScalarType::Long, {0}, r.data()), std::nullopt, out));
  CHECK(out.size(0) == 0);

  // torch: "allocated size does not match required size"
  auto st = repeat_interleave_tensor_out<Ints>(ctx, tr, int64_t{4}, out);
  REQUIRE_FALSE(st);
  CHECK(st.error().code == Error::InvalidArgument);
  CHECK_THAT(st.error().what, Catch::Contains("output_size 4 does not match the sum of repeats 5"));
  r[1] = -1;  // torch: "repeats can not be negative"
  st = repeat_interleave_tensor_out<Ints>(ctx, tr, std::nullopt, out);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("repeats can not be negative, got -1 at index 1"));
  r[1] = std::numeric_limits<int64_t>::max();
  st = repeat_interleave_tensor_out<Ints>(ctx, tr, std::nullopt, out);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("overflows int64"));
  r[1] = 0;
  Tensor fixed = mk(ScalarType::Long, {4}, o.data());
  st = repeat_interleave_tensor_out<Ints>(ctx, tr, std::nullopt, fixed);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("output shape [5] does not match the static shape [4]"));
  // torch: "repeat_interleave only accept 1D vector as repeat"
  st = repeat_interleave_tensor_out<Ints>(ctx, mk(ScalarType::Long, {3, 1}, r.data()), std::nullopt, out);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("repeats must be 1-D, got int64[3, 1]"));
  // torch: "repeat_interleave_cpu" not implemented for 'Short'
  st = repeat_interleave_tensor_out<Ints>(ctx, mk(ScalarType::Short, {3}, r.data()), std::nullopt, out);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("repeats must be Long or Int, got Short"));
  // torch: "Expected out tensor to have dtype long int, but got int instead"
  st = repeat_interleave_tensor_out<Ints>(ctx, tr, std::nullopt, toi);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("out dtype Int != repeats dtype Long"));
}
