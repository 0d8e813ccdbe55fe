#include <catch2/catch.hpp>

#include <random>

#include "etrt/kernels/ops/pad.h"
#include "kernel_test_util.h"

using namespace etrt;
using namespace etrt::kernels;
using namespace etrt::ktest;

namespace {

using PadFn = Status (*)(KernelContext&, const Tensor&, std::span<const int64_t>, Tensor&);

template <class Dt>
PadFn pad_fn(bool reflect, int nsp) {
  switch (nsp) {
    case 1: return reflect ? &reflection_pad1d_out<Dt> : &replication_pad1d_out<Dt>;
    case 2: return reflect ? &reflection_pad2d_out<Dt> : &replication_pad2d_out<Dt>;
    default: return reflect ? &reflection_pad3d_out<Dt> : &replication_pad3d_out<Dt>;
  }
}

/// torch's per-axis source index, phrased the way its CPU loops phrase it (input/output start offsets for
/// negative pads); deliberately not the kernel's piecewise form.
int64_t ref_src(bool reflect, int64_t j, int64_t in, int64_t lo) {
  int64_t ix;
  if (j < lo) ix = reflect ? 2 * lo - j : lo;
  else if (j < in + lo) ix = j;
  else ix = reflect ? 2 * (in + lo - 1) - j : in + lo - 1;
  return ix - std::max<int64_t>(0, lo) + std::max<int64_t>(0, -lo);
}

int64_t numel_of(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t v : s) n *= v;
  return n;
}

/// Row-major index -> coordinates.
std::vector<int64_t> coords(int64_t flat, const std::vector<int64_t>& s) {
  std::vector<int64_t> c(s.size());
  for (size_t i = s.size(); i-- > 0;) {
    c[i] = flat % s[i];
    flat /= s[i];
  }
  return c;
}

/// Dim order with dim 1 (channels) last: NLC / NHWC / NDHWC.
std::vector<uint8_t> channels_last(size_t rank) {
  std::vector<uint8_t> o{0};
  for (size_t d = 2; d < rank; ++d) o.push_back(static_cast<uint8_t>(d));
  o.push_back(1);
  return o;
}

/// Pads a random T tensor of `shape` and compares every element with the reference index map. Storage is in the
/// tensors' memory order; values are read back through the logical -> storage offset of each layout.
template <class T>
void check_pad(bool reflect, int nsp, std::vector<int64_t> shape, std::vector<int64_t> pad, bool cl_in, bool cl_out) {
  INFO((reflect ? "reflection" : "replication") << nsp << "d shape " << shape_str(shape) << " pad " << shape_str(pad)
                                                << " cl_in " << cl_in << " cl_out " << cl_out);
  const size_t rank = shape.size();
  std::vector<int64_t> oshape = shape;
  for (int i = 0; i < nsp; ++i) oshape[rank - 1 - i] += pad[2 * i] + pad[2 * i + 1];
  std::vector<T> x(static_cast<size_t>(numel_of(shape))), o(static_cast<size_t>(numel_of(oshape)), T(-1));
  std::mt19937 gen(static_cast<unsigned>(numel_of(shape) * 7 + pad[0]));
  std::uniform_int_distribution<int> dist(-100, 100);
  for (auto& v : x) v = static_cast<T>(dist(gen));
  const auto oin = cl_in && rank >= 3 ? channels_last(rank) : std::vector<uint8_t>{};
  const auto oout = cl_out && rank >= 3 ? channels_last(rank) : std::vector<uint8_t>{};
  Tensor in = mk(dtype_of<T>, shape, x.data(), oin), out = mk(dtype_of<T>, oshape, o.data(), oout);
  KernelContext ctx;
  REQUIRE(pad_fn<real_types>(reflect, nsp)(ctx, in, pad, out));
  int64_t bad = 0, out_of_range = 0;
  for (int64_t f = 0; f < numel_of(oshape); ++f) {
    const auto c = coords(f, oshape);
    int64_t ioff = 0, ooff = 0;
    for (size_t d = 0; d < rank; ++d) {
      int64_t ic = c[d];
      if (d + nsp >= rank) {
        const int i = static_cast<int>(rank - 1 - d);
        ic = ref_src(reflect, c[d], shape[d], pad[2 * i]);
        if (ic < 0 || ic >= shape[d]) ++out_of_range;  // would mean a case torch's bounds should have refused
      }
      ioff += ic * in.stride(static_cast<int>(d));
      ooff += c[d] * out.stride(static_cast<int>(d));
    }
    if (out_of_range == 0 && !(o[ooff] == x[ioff])) ++bad;
  }
  REQUIRE(out_of_range == 0);
  CHECK(bad == 0);
}

template <class T>
std::vector<T> iota_vec(int64_t n) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<T>(i);
  return v;
}

/// Runs one pad op on arange(numel).reshape(shape) (float) and returns the output values in row-major order.
std::vector<float> run_arange(PadFn f, std::vector<int64_t> shape, std::vector<int64_t> pad,
                              std::vector<int64_t> oshape) {
  auto x = iota_vec<float>(numel_of(shape));
  std::vector<float> o(static_cast<size_t>(numel_of(oshape)), -1.f);
  Tensor in = mk(x, shape), out = mk(o, oshape);
  KernelContext ctx;
  REQUIRE(f(ctx, in, pad, out));
  return o;
}

}  // namespace

TEST_CASE("pad ops are registered with one slot per argument plus the return", "[pad]") {
  for (const char* n : {"aten::reflection_pad1d.out", "aten::reflection_pad2d.out", "aten::reflection_pad3d.out",
                        "aten::replication_pad1d.out", "aten::replication_pad2d.out", "aten::replication_pad3d.out"}) {
    INFO(n);
    CHECK(slots_of(n) == 4);
  }
}

TEST_CASE("reflection / replication pad against the index-map reference", "[pad]") {
  for (bool reflect : {true, false}) {
    // 1-D: unbatched [C, W] and batched [N, C, W]; positive, zero, negative (cropping) and mixed pads.
    for (auto pad : std::vector<std::vector<int64_t>>{{2, 3}, {0, 0}, {4, 4}, {-1, 2}, {-2, -2}, {3, -4}, {-6, 2}}) {
      check_pad<float>(reflect, 1, {3, 5}, pad, false, false);
      check_pad<int64_t>(reflect, 1, {2, 3, 5}, pad, false, false);
      check_pad<float>(reflect, 1, {2, 3, 5}, pad, true, false);
    }
    // 2-D
    for (auto pad : std::vector<std::vector<int64_t>>{
             {1, 1, 1, 1}, {3, 0, 2, 1}, {-1, 3, -1, 2}, {-5, 2, 0, 0}, {2, -3, -2, 2}, {0, 0, -3, 0}}) {
      check_pad<float>(reflect, 2, {2, 3, 4}, pad, false, false);
      check_pad<double>(reflect, 2, {2, 2, 3, 4}, pad, false, false);
      check_pad<int32_t>(reflect, 2, {2, 3, 3, 4}, pad, true, false);  // NHWC in
      check_pad<float>(reflect, 2, {2, 3, 3, 4}, pad, false, true);    // NHWC out
      check_pad<uint8_t>(reflect, 2, {1, 5, 3, 4}, pad, true, true);
    }
    // 3-D
    for (auto pad : std::vector<std::vector<int64_t>>{
             {1, 1, 1, 1, 1, 1}, {1, -2, 2, 0, 1, 1}, {-3, 2, 0, -2, 1, 0}, {0, 0, 0, 0, -1, -1}, {2, 3, 1, 2, 0, 1}}) {
      check_pad<float>(reflect, 3, {3, 2, 3, 4}, pad, false, false);
      check_pad<int16_t>(reflect, 3, {2, 3, 2, 3, 4}, pad, false, false);
      check_pad<float>(reflect, 3, {2, 3, 2, 3, 4}, pad, true, true);
    }
  }
  // Replication accepts pads at least as large as the input.
  check_pad<float>(false, 1, {2, 3}, {5, 7}, false, false);
  check_pad<int8_t>(false, 2, {1, 2, 3}, {4, 6, 3, 5}, false, false);
}

TEST_CASE("pad spot values from torch", "[pad]") {
  // torch.ops.aten.reflection_pad1d(torch.arange(5.).reshape(1, 5), p) for p = [2, 2], [-6, 2], [2, -4]
  CHECK(run_arange(&reflection_pad1d_out<real_types>, {1, 5}, {2, 2}, {1, 9}) ==
        std::vector<float>{2, 1, 0, 1, 2, 3, 4, 3, 2});
  CHECK(run_arange(&reflection_pad1d_out<real_types>, {1, 5}, {-6, 2}, {1, 1}) == std::vector<float>{2});
  CHECK(run_arange(&reflection_pad1d_out<real_types>, {1, 5}, {2, -4}, {1, 3}) == std::vector<float>{2, 1, 0});
  // torch.ops.aten.replication_pad1d(torch.arange(5.).reshape(1, 5), p) for p = [-6, 2], [2**40, -2**40]
  CHECK(run_arange(&replication_pad1d_out<real_types>, {1, 5}, {-6, 2}, {1, 1}) == std::vector<float>{4});
  CHECK(run_arange(&replication_pad1d_out<real_types>, {1, 5}, {int64_t{1} << 40, -(int64_t{1} << 40)}, {1, 5}) ==
        std::vector<float>{0, 0, 0, 0, 0});
  // torch.ops.aten.reflection_pad2d(torch.arange(12.).reshape(1, 3, 4), [2, 1, 1, 2]).flatten()
  CHECK(run_arange(&reflection_pad2d_out<real_types>, {1, 3, 4}, {2, 1, 1, 2}, {1, 6, 7}) ==
        std::vector<float>{6, 5, 4, 5, 6, 7, 6, 2, 1, 0, 1, 2, 3, 2, 6,  5, 4, 5, 6, 7, 6,
                           10, 9, 8, 9, 10, 11, 10, 6, 5, 4, 5, 6, 7, 6, 2, 1, 0, 1, 2, 3, 2});
  // torch.ops.aten.replication_pad2d(torch.arange(12.).reshape(1, 3, 4), [2, 1, 1, 2]).flatten()
  CHECK(run_arange(&replication_pad2d_out<real_types>, {1, 3, 4}, {2, 1, 1, 2}, {1, 6, 7}) ==
        std::vector<float>{0, 0, 0, 1, 2, 3, 3, 0,  0,  0,  1, 2, 3, 3, 4,  4,  4,  5, 6, 7, 7,
                           8, 8, 8, 9, 10, 11, 11, 8, 8, 8, 9, 10, 11, 11, 8, 8, 8, 9, 10, 11, 11});
  // torch.ops.aten.reflection_pad2d(torch.arange(12.).reshape(1, 3, 4), [-5, 2, 0, 0]).flatten()
  CHECK(run_arange(&reflection_pad2d_out<real_types>, {1, 3, 4}, {-5, 2, 0, 0}, {1, 3, 1}) ==
        std::vector<float>{1, 5, 9});
  // torch.ops.aten.replication_pad3d(torch.arange(24.).reshape(1, 2, 3, 4), [-3, 2, 0, -2, 1, 0]).flatten()
  CHECK(run_arange(&replication_pad3d_out<real_types>, {1, 2, 3, 4}, {-3, 2, 0, -2, 1, 0}, {1, 3, 1, 3}) ==
        std::vector<float>{3, 3, 3, 3, 3, 3, 15, 15, 15});
  // torch.ops.aten.reflection_pad3d(torch.arange(24.).reshape(1, 2, 3, 4), [1, -2, 2, 0, 1, 1]).flatten()[:15]
  const auto r3 = run_arange(&reflection_pad3d_out<real_types>, {1, 2, 3, 4}, {1, -2, 2, 0, 1, 1}, {1, 4, 5, 3});
  CHECK(std::vector<float>(r3.begin(), r3.begin() + 15) ==
        std::vector<float>{21, 20, 21, 17, 16, 17, 13, 12, 13, 17, 16, 17, 21, 20, 21});
  // Half and BFloat16 move bits unchanged (NaN payloads included).
  std::vector<Half> hx = {Half(1.f), Half(std::nanf("")), Half(-3.f)}, ho(5);
  Tensor hin = mk(hx, {1, 3}), hout = mk(ho, {1, 5});
  KernelContext ctx;
  REQUIRE(reflection_pad1d_out<real_types>(ctx, hin, std::vector<int64_t>{1, 1}, hout));
  CHECK(std::isnan(static_cast<float>(ho[0])));
  CHECK(static_cast<float>(ho[1]) == 1.f);
  CHECK(static_cast<float>(ho[3]) == -3.f);
  CHECK(std::isnan(static_cast<float>(ho[4])));
}

TEST_CASE("pad empty batches and empty padded dims", "[pad]") {
  KernelContext ctx;
  std::vector<float> x(1), o(1);
  // torch: reflection_pad1d(zeros(0, 2, 5), [1, 1]) -> shape (0, 2, 7)
  Tensor in0 = mk(ScalarType::Float, {0, 2, 5}, x.data()), out0 = mk(ScalarType::Float, {0, 2, 7}, o.data());
  CHECK(reflection_pad1d_out<real_types>(ctx, in0, std::vector<int64_t>{1, 1}, out0));
  // torch: replication_pad2d(x[1, 3, 4], [0, 0, -3, 0]) -> shape (1, 0, 4): one padded dim may be empty
  std::vector<float> x2(12);
  Tensor in2 = mk(x2, {1, 3, 4}), out2 = mk(ScalarType::Float, {1, 0, 4}, o.data());
  CHECK(replication_pad2d_out<real_types>(ctx, in2, std::vector<int64_t>{0, 0, -3, 0}, out2));
  // The output is resized through the context.
  std::vector<float> big(128);
  Tensor dyn = mk(big, {2, 8, 8}, ScalarType::Float, {}, ShapeDynamism::DynamicBound);
  REQUIRE(reflection_pad2d_out<real_types>(ctx, in2, std::vector<int64_t>{1, 1, 2, 0}, dyn));
  CHECK(dyn.size(0) == 1);
  CHECK(dyn.size(1) == 5);
  CHECK(dyn.size(2) == 6);
}

TEST_CASE("pad argument errors", "[pad]") {
  KernelContext ctx;
  std::vector<float> x(60), o(400);
  auto expect_fail = [&](Status st, const char* text) {
    REQUIRE_FALSE(st);
    CHECK(st.error().code == Error::InvalidArgument);
    CHECK_THAT(st.error().what, Catch::Contains(text));
  };
  Tensor x15 = mk(ScalarType::Float, {1, 5}, x.data());
  Tensor o19 = mk(ScalarType::Float, {1, 9}, o.data());
  // torch: "padding size is expected to be 2, but got: 1"
  expect_fail(reflection_pad1d_out<real_types>(ctx, x15, std::vector<int64_t>{1}, o19),
              "padding size is expected to be 2");
  expect_fail(replication_pad2d_out<real_types>(ctx, mk(ScalarType::Float, {1, 3, 4}, x.data()),
                                                std::vector<int64_t>{1, 1, 1}, o19),
              "padding size is expected to be 4");
  // torch: "Expected 2D or 3D (batch mode) tensor ... but got: [5]" and likewise for rank 4
  expect_fail(reflection_pad1d_out<real_types>(ctx, mk(ScalarType::Float, {5}, x.data()), std::vector<int64_t>{1, 1},
                                               o19),
              "expected a 2-D or 3-D");
  expect_fail(replication_pad3d_out<real_types>(ctx, mk(ScalarType::Float, {3, 4, 5}, x.data()),
                                                std::vector<int64_t>{1, 1, 1, 1, 1, 1}, o19),
              "expected a 4-D or 5-D");
  // torch refuses empty non-batch dims: reflection_pad1d(zeros(2, 0, 5), [1, 1])
  expect_fail(reflection_pad1d_out<real_types>(ctx, mk(ScalarType::Float, {2, 0, 5}, x.data()),
                                               std::vector<int64_t>{1, 1}, o19),
              "non-zero sizes");
  // torch: reflection_pad1d(arange(5).reshape(1, 5), [5, 0]) -> "Padding size should be less than the
  // corresponding input dimension"; replication accepts it.
  expect_fail(reflection_pad1d_out<real_types>(ctx, x15, std::vector<int64_t>{5, 0}, o19), "must be less than");
  expect_fail(reflection_pad2d_out<real_types>(ctx, mk(ScalarType::Float, {1, 3, 4}, x.data()),
                                               std::vector<int64_t>{0, 0, 0, 3}, o19),
              "at dim 1");
  // torch: "input (W: 5) is too small. Calculated output W: 0"
  expect_fail(replication_pad1d_out<real_types>(ctx, x15, std::vector<int64_t>{-3, -2}, o19), "too small");
  // torch: "input (H: 3, W: 4) is too small. Calculated output H: 0 W: 0"
  expect_fail(reflection_pad2d_out<real_types>(ctx, mk(ScalarType::Float, {2, 3, 4}, x.data()),
                                               std::vector<int64_t>{-4, 0, -3, 0}, o19),
              "too small");
  // torch: replication_pad2d(x[1, 3, 4], [-5, 0, 0, 0]) -> negative dimension -1
  expect_fail(replication_pad2d_out<real_types>(ctx, mk(ScalarType::Float, {1, 3, 4}, x.data()),
                                                std::vector<int64_t>{-5, 0, 0, 0}, o19),
              "negative output size");
  // Pads whose sum overflows int64.
  expect_fail(replication_pad1d_out<real_types>(ctx, x15, std::vector<int64_t>{INT64_MAX, 1}, o19), "too large");
  // dtype: out must match, bool is not a padding dtype in torch.
  std::vector<double> od(9);
  Tensor od_t = mk(od, {1, 9});
  expect_fail(reflection_pad1d_out<real_types>(ctx, x15, std::vector<int64_t>{2, 2}, od_t), "dtype");
  std::vector<uint8_t> bx(5), bo(9);
  Tensor bo_t = mk(ScalarType::Bool, {1, 9}, bo.data());
  expect_fail(reflection_pad1d_out<real_types>(ctx, mk(ScalarType::Bool, {1, 5}, bx.data()), std::vector<int64_t>{2, 2},
                                               bo_t),
              "unsupported dtype");
  // A static out of the wrong shape is refused by the resize.
  auto st = reflection_pad1d_out<real_types>(ctx, x15, std::vector<int64_t>{1, 1}, o19);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().what, Catch::Contains("reflection_pad1d.out: output"));
}
