#include <catch2/catch.hpp>

#include "etrt/kernels/ops/embedding.h"
#include "etrt_generated/portable_kernels.h"

using namespace etrt;
using namespace etrt::kernels;

TEST_CASE("embedding gathers rows for Long and Int indices", "[embedding]") {
  KernelContext ctx;
  std::vector<float> w = {0, 1, 10, 11, 20, 21};  // [3, 2]
  Tensor tw = *Tensor::make(ScalarType::Float, std::vector<int64_t>{3, 2}, {}, w.data());
  std::vector<int64_t> li = {2, 0, 1, 2};
  const std::vector<int64_t> isz = {2, 2}, osz = {2, 2, 2};
  Tensor ti = *Tensor::make(ScalarType::Long, isz, {}, li.data());
  std::vector<float> o(8);
  Tensor out = *Tensor::make(ScalarType::Float, osz, {}, o.data());
  REQUIRE(embedding_out<real_types>(ctx, tw, ti, -1, false, false, out));
  CHECK(o == std::vector<float>{20, 21, 0, 1, 10, 11, 20, 21});
  std::vector<int32_t> ii = {1};
  std::vector<double> wd = {0.5, 1.5, 2.5, 3.5}, od(2);
  Tensor twd = *Tensor::make(ScalarType::Double, std::vector<int64_t>{2, 2}, {}, wd.data());
  Tensor tii = *Tensor::make(ScalarType::Int, std::vector<int64_t>{}, {}, ii.data());
  Tensor tod = *Tensor::make(ScalarType::Double, std::vector<int64_t>{2}, {}, od.data());
  REQUIRE(embedding_out<real_types>(ctx, twd, tii, 0, false, false, tod));
  CHECK(od == std::vector<double>{2.5, 3.5});
  li[1] = 3;
  auto st = embedding_out<real_types>(ctx, tw, ti, -1, false, false, out);
  REQUIRE(!st);
  CHECK(st.error().code == Error::InvalidArgument);
  CHECK_THAT(st.error().what, Catch::Contains("out of range"));
  int slots = -1;
  for (const auto& e : etrt::generated::portable_kernels())
    if (e.name == "aten::embedding.out") slots = e.num_slots;
  CHECK(slots == 7);
}
