// Tests for preprocess::tile_crop.out (include/etrt/kernels/ops/preprocess.h).
#include <catch2/catch.hpp>

#include <numeric>
#include <vector>

#include "etrt/kernels/ops/preprocess.h"
#include "kernel_test_util.h"

namespace {
using namespace etrt;
using namespace etrt::kernels;
using namespace etrt::ktest;
std::string message(const Status& s) { return s ? std::string() : s.error().what; }
}  // namespace

TEST_CASE("tile_crop: tiles row-major over the grid, channels inside each tile", "[kernels][preprocess]") {
  KernelContext ctx;
  // [C=2, H=4, W=6] with tile 2: a 2 x 3 grid of [2, 2, 2] tiles.
  std::vector<int32_t> in(48);
  std::iota(in.begin(), in.end(), 0);
  std::vector<int32_t> o(48);
  Tensor out = mk(o, {8, 2, 2, 2}, ScalarType::Int, {}, ShapeDynamism::DynamicBound);
  REQUIRE(tile_crop_out<all_types>(ctx, mk(in, {2, 4, 6}), 2, out));
  REQUIRE(out.size(0) == 6);
  for (int64_t ty = 0; ty < 2; ++ty)
    for (int64_t tx = 0; tx < 3; ++tx)
      for (int64_t c = 0; c < 2; ++c)
        for (int64_t h = 0; h < 2; ++h)
          for (int64_t w = 0; w < 2; ++w)
            CHECK(o[(((ty * 3 + tx) * 2 + c) * 2 + h) * 2 + w] == in[(c * 4 + ty * 2 + h) * 6 + tx * 2 + w]);
  // A channels-last image gives the same tiles.
  std::vector<int32_t> cl(48);
  for (int c = 0; c < 2; ++c)
    for (int h = 0; h < 4; ++h)
      for (int w = 0; w < 6; ++w) cl[(h * 6 + w) * 2 + c] = in[(c * 4 + h) * 6 + w];
  std::vector<int32_t> o2(48);
  Tensor out2 = mk(o2, {6, 2, 2, 2});
  REQUIRE(tile_crop_out<all_types>(ctx, mk(cl, {2, 4, 6}, ScalarType::Int, {1, 2, 0}), 2, out2));
  CHECK(std::equal(o2.begin(), o2.end(), o.begin()));
  CHECK(slots_of("preprocess::tile_crop.out") == 4);
}

TEST_CASE("tile_crop refusals name the op", "[kernels][preprocess]") {
  KernelContext ctx;
  std::vector<float> in(2 * 4 * 6), o(48);
  Tensor out = mk(o, {6, 2, 2, 2});
  CHECK_THAT(message(tile_crop_out<all_types>(ctx, mk(in, {2, 4, 6}), 4, out)),
             Catch::Contains("preprocess::tile_crop.out") && Catch::Contains("not a whole number of 4x4 tiles"));
  CHECK_THAT(message(tile_crop_out<all_types>(ctx, mk(in, {2, 4, 6}), 0, out)), Catch::Contains("tile_size 0"));
  CHECK_THAT(message(tile_crop_out<all_types>(ctx, mk(in, {48}), 2, out)), Catch::Contains("must be [C, H, W]"));
  std::vector<double> od(48);
  Tensor tod = mk(od, {6, 2, 2, 2});
  CHECK_THAT(message(tile_crop_out<all_types>(ctx, mk(in, {2, 4, 6}), 2, tod)), Catch::Contains("dtype"));
  std::vector<float> small(16);  // a static out too small for 6 tiles
  Tensor tsmall = mk(small, {2, 2, 2, 2});
  CHECK_THAT(message(tile_crop_out<all_types>(ctx, mk(in, {2, 4, 6}), 2, tsmall)),
             Catch::Contains("tile_crop.out: output"));
}
