// Tests for executorch_prim::et_copy_index.tensor (include/etrt/kernels/ops/prim.h): the store at the end of each
// torch.map / scan iteration. The loop itself runs in tests/python/test_quantized_ops.py (an exported torch.map
// program, checked against upstream's runtime).
#include <catch2/catch.hpp>

#include <vector>

#include "etrt/kernels/ops/prim.h"
#include "kernel_test_util.h"

namespace {
using namespace etrt;
using namespace etrt::kernels;
using namespace etrt::ktest;
std::string message(const Status& s) { return s ? std::string() : s.error().what; }
}  // namespace

TEST_CASE("et_copy_index: a dynamic output grows row by row, a rerun starts over", "[kernels][prim]") {
  KernelContext ctx;
  std::vector<float> acc(12, -1.f);
  Tensor to = mk(acc, {4, 3}, ScalarType::Float, {}, ShapeDynamism::DynamicBound);
  for (int64_t i = 0; i < 3; ++i) {
    std::vector<float> row{float(i), float(i) + 0.5f, float(i) * 2};
    REQUIRE(et_copy_index<all_types>(ctx, to, mk(row, {3}), i));
    CHECK(to.size(0) == i + 1);
  }
  CHECK(std::vector<float>(acc.begin(), acc.begin() + 9) == std::vector<float>{0, 0.5f, 0, 1, 1.5f, 2, 2, 2.5f, 4});
  std::vector<float> row{7, 8, 9};
  REQUIRE(et_copy_index<all_types>(ctx, to, mk(row, {3}), 0));
  CHECK(to.size(0) == 1);
  // Past the bound: the resize fails and names the op.
  CHECK_THAT(message(et_copy_index<all_types>(ctx, to, mk(row, {3}), 4)),
             Catch::Contains("executorch_prim::et_copy_index.tensor: output"));
  CHECK(slots_of("executorch_prim::et_copy_index.tensor") == 3);  // no return slot
}

TEST_CASE("et_copy_index: static outputs, strided rows, refusals", "[kernels][prim]") {
  KernelContext ctx;
  std::vector<int64_t> acc(6, 0);
  Tensor to = mk(acc, {3, 2});
  std::vector<int64_t> row{5, 6};
  REQUIRE(et_copy_index<all_types>(ctx, to, mk(row, {2}), 2));
  CHECK(acc == std::vector<int64_t>{0, 0, 0, 0, 5, 6});
  CHECK_THAT(message(et_copy_index<all_types>(ctx, to, mk(row, {2}), 3)), Catch::Contains("index 3 is out of range"));
  CHECK_THAT(message(et_copy_index<all_types>(ctx, to, mk(row, {2}), -1)), Catch::Contains("negative index -1"));
  std::vector<int64_t> wide{1, 2, 3};
  CHECK_THAT(message(et_copy_index<all_types>(ctx, to, mk(wide, {3}), 1)), Catch::Contains("does not match the rows"));
  std::vector<int32_t> narrow{1, 2};
  CHECK_THAT(message(et_copy_index<all_types>(ctx, to, mk(narrow, {2}), 1)), Catch::Contains("differ in dtype"));
  CHECK_THAT(message(et_copy_index<all_types>(ctx, to, mk(row, {1, 2}), 1)), Catch::Contains("one more dim"));
  // A [2, 3] source stored transposed (dim order {1, 0}) lands in logical order.
  std::vector<float> acc3(12, 0.f), src{1, 4, 2, 5, 3, 6};  // logical [[1, 2, 3], [4, 5, 6]]
  Tensor to3 = mk(acc3, {2, 2, 3});
  REQUIRE(et_copy_index<all_types>(ctx, to3, mk(src, {2, 3}, ScalarType::Float, {1, 0}), 1));
  CHECK(std::vector<float>(acc3.begin() + 6, acc3.end()) == std::vector<float>{1, 2, 3, 4, 5, 6});
}
