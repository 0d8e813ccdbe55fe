// Regressions for undefined behaviour and escaping exceptions that data can drive (the reliability review): each
// case failed, or was undefined behaviour that the sanitizer build (tools/asan_tests.sh runtime) reported.
#include <catch2/catch.hpp>

#include <cmath>
#include <complex>
#include <limits>
#include <stdexcept>
#include <vector>

#include "test_support.h"  // the runtime first: the kernel utilities build on its types
#include "etrt/kernels/kernel.h"
#include "etrt/kernels/util/dtype_util.h"
#include "etrt/kernels/util/fast_math.h"
#include "etrt/kernels/util/parallel.h"
#include "etrt/kernels/ops/prim.h"
#include "etrt/kernels/ops/shape.h"
#include "etrt/kernels/ops/compare.h"

using namespace etrt;

TEST_CASE("reliability: exp_fast of NaN and infinities converts no NaN to an integer", "[reliability]") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  CHECK(std::isnan(kernels::exp_fast(nan)));
  CHECK(kernels::exp_fast(inf) == inf);
  CHECK(kernels::exp_fast(-inf) == 0.0f);
  CHECK(kernels::exp_fast(0.0f) == Approx(1.0f));
}

TEST_CASE("reliability: float to integer conversion saturates and maps NaN to 0", "[reliability]") {
  using kernels::convert;
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  CHECK(convert<uint8_t>(nan) == 0);
  CHECK(convert<uint8_t>(inf) == 255);
  CHECK(convert<uint8_t>(-inf) == 0);
  CHECK(convert<uint8_t>(300.0f) == 255);
  CHECK(convert<int64_t>(1e30) == std::numeric_limits<int64_t>::max());
  CHECK(convert<int32_t>(-1e30f) == std::numeric_limits<int32_t>::min());
  CHECK(convert<int32_t>(-7.9f) == -7);
}

TEST_CASE("reliability: complex to integer conversion takes the real part with the same rules", "[reliability]") {
  // A fuzz finding (tests/fuzz/regressions/ubsan-complex-to-uint8-out-of-range.pte): the real part 6.7e36 was
  // cast to uint8 directly, undefined behaviour.
  using kernels::convert;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(convert<uint8_t>(std::complex<float>(6.72547e36f, 1.0f)) == 255);
  CHECK(convert<uint8_t>(std::complex<float>(nan, 0.0f)) == 0);
  CHECK(convert<int64_t>(std::complex<double>(-1e300, 0.0)) == std::numeric_limits<int64_t>::min());
  CHECK(convert<int32_t>(std::complex<double>(-7.9, 3.0)) == -7);
  CHECK(convert<float>(std::complex<double>(2.5, -1.0)) == 2.5f);
}

TEST_CASE("reliability: integer add, sub and mul wrap instead of overflowing", "[reliability]") {
  using kernels::wrapping_add, kernels::wrapping_mul, kernels::wrapping_sub;
  constexpr int64_t mx = std::numeric_limits<int64_t>::max(), mn = std::numeric_limits<int64_t>::min();
  CHECK(wrapping_sub<int64_t>(mn, 1) == mx);
  CHECK(wrapping_add<int64_t>(mx, 1) == mn);
  CHECK(wrapping_mul<int64_t>(mx, 2) == -2);
  CHECK(wrapping_mul<int16_t>(int16_t{300}, int16_t{300}) == static_cast<int16_t>(90000 - 65536));
  CHECK(wrapping_mul<uint16_t>(uint16_t{65535}, uint16_t{65535}) == 1);  // promoted to int, this overflowed
  CHECK(wrapping_add<float>(1.5f, 2.0f) == 3.5f);
}

TEST_CASE("reliability: sizes whose strides overflow are an error even with a zero dim", "[reliability]") {
  const int64_t big = int64_t{1} << 40;
  const std::array<int64_t, 3> sizes{0, big, big};
  auto t = Tensor::make(ScalarType::Float, sizes, {}, nullptr);
  REQUIRE_FALSE(t.has_value());
  CHECK(t.error().what.find("overflow") != std::string::npos);
}

TEST_CASE("reliability: an exception in a parallel chunk reaches the caller after every worker joined",
          "[reliability]") {
  const int saved = kernels::thread_count().load();
  kernels::thread_count() = 4;
  std::atomic<int> ran{0};
  CHECK_THROWS_AS(kernels::parallel_for(4000, 1000,
                                        [&](int64_t b, int64_t) {
                                          ++ran;
                                          if (b == 0) throw std::length_error("chunk 0");
                                        }),
                  std::length_error);
  CHECK(ran.load() == 4);  // every chunk ran; none was abandoned while its thread was joinable
  kernels::thread_count() = saved;
}

TEST_CASE("reliability: an exception inside the core becomes an error value", "[reliability]") {
  auto r = errors_as_values("loading", []() -> Result<int> { throw std::bad_alloc(); });
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == Error::MemoryAllocationFailed);
  Status s = errors_as_values("running", []() -> Status { throw std::length_error("vector"); });
  REQUIRE_FALSE(s);
  CHECK(s.error().code == Error::Internal);
  CHECK(s.error().what == "running: vector");
}

TEST_CASE("reliability: a huge declared arena allocates only what its tensors reach", "[reliability]") {
  auto bytes = etrt::test::read_file(etrt::test::fixture_dir() / "add.pte");
  // The arena size is the second int64 of non_const_buffer_sizes [0, 96]; find the unique 96 after a 0.
  const std::array<uint8_t, 16> pattern{0, 0, 0, 0, 0, 0, 0, 0, 96, 0, 0, 0, 0, 0, 0, 0};
  auto at = std::search(bytes.begin(), bytes.end(), pattern.begin(), pattern.end());
  REQUIRE(at != bytes.end());
  const int64_t huge = int64_t{1} << 45;  // 32 TiB
  std::memcpy(&*(at + 8), &huge, 8);
  auto program = Program::load(DataSource::copy_of(bytes));
  REQUIRE(program.has_value());
  auto m = Method::load(*program, "forward", etrt::test::options());
  INFO((m ? std::string() : m.error().describe()));
  REQUIRE(m.has_value());
  CHECK((*m)->meta().planned_buffer_sizes[0] == huge);  // reported as declared, never allocated
  LoadOptions capped = etrt::test::options();
  capped.max_planned_bytes = 64;
  auto refused = Method::load(*program, "forward", capped);
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().what.find("over the load option's cap of 64 bytes") != std::string::npos);
}

TEST_CASE("prim ops: Python's floor division and modulo, wrapping, division by zero is an error", "[prim]") {
  using namespace etrt::kernels;
  CHECK(prim::floor_div(-7, 2) == -4);
  CHECK(prim::floor_div(7, -2) == -4);
  CHECK(prim::floor_div(7, 2) == 3);
  CHECK(prim::floor_mod(-7, 2) == 1);
  CHECK(prim::floor_mod(7, -2) == -1);
  CHECK(prim::floor_div(std::numeric_limits<int64_t>::min(), -1) == std::numeric_limits<int64_t>::min());
  KernelContext ctx;
  EValue ret(int64_t{0});
  Scalar a{int64_t{7}}, zero{int64_t{0}}, half{0.5};
  REQUIRE_FALSE(prim_floordiv<all_types>(ctx, a, zero, ret));
  REQUIRE(prim_mul<all_types>(ctx, a, half, ret));
  CHECK(ret.is_double());
  CHECK(ret.double_unchecked() == 3.5);
  REQUIRE(prim_ceil<all_types>(ctx, Scalar{3.2}, ret));
  CHECK(ret.int_unchecked() == 4);
  REQUIRE_FALSE(prim_ceil<all_types>(ctx, Scalar{std::nan("")}, ret));  // NaN has no integer value
  // A return slot that holds a tensor is never overwritten (lists may point into it).
  float storage = 0;
  auto t = Tensor::make(ScalarType::Float, {}, {}, &storage);
  REQUIRE(t.has_value());
  EValue tensor_slot(std::move(*t));
  auto refused = prim_add<all_types>(ctx, a, a, tensor_slot);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().what.find("not a scalar") != std::string::npos);
}

TEST_CASE("reliability: a plan that overlaps a copy's input and output is no memcpy overlap", "[reliability]") {
  // Regression: squeeze_copy on overlapping planned tensors reached memcpy with overlapping ranges (ASan's
  // memcpy-param-overlap); the copy loops use memmove.
  std::array<float, 8> buf{0, 1, 2, 3, 4, 5, 6, 7};
  const std::array<int64_t, 2> in_sizes{1, 6};
  const std::array<int64_t, 1> out_sizes{6};
  auto in = Tensor::make(ScalarType::Float, in_sizes, {}, buf.data());
  auto out = Tensor::make(ScalarType::Float, out_sizes, {}, buf.data() + 1);
  REQUIRE(in.has_value());
  REQUIRE(out.has_value());
  KernelContext ctx;
  REQUIRE(kernels::squeeze_copy_dim_out<types<float>>(ctx, *in, 0, *out));
  CHECK(buf[1] == 0.0f);
  CHECK(buf[6] == 5.0f);
}

TEST_CASE("bitwise shifts: torch's results for out-of-range counts, never undefined behaviour", "[reliability]") {
  using kernels::detail::shift_left, kernels::detail::shift_right;
  CHECK(shift_left<int32_t>(1, 31) == std::numeric_limits<int32_t>::min());
  CHECK(shift_left<int32_t>(1, 32) == 0);
  CHECK(shift_left<int64_t>(-1, 3) == -8);
  CHECK(shift_left<int8_t>(1, -1) == 0);
  CHECK(shift_right<int32_t>(-8, 1) == -4);
  CHECK(shift_right<int32_t>(-8, 40) == -1);
  CHECK(shift_right<uint8_t>(200, 9) == 0);
  CHECK(shift_right<int64_t>(1024, 10) == 1);
}

TEST_CASE("reliability: no tensor is made or resized to sizes whose strides overflow, even without elements",
          "[reliability]") {
  // A dynamic tensor resized to [49, 0, 2^62] has no elements but strides of 2^62 elements, from which kernels
  // compute byte offsets (a slice of it): resize checked only the element count (found while tracing a fuzz
  // finding in slice_copy).
  const int64_t huge = int64_t{1} << 62;
  const std::vector<int64_t> bound = {64, 4, 8};
  auto t = etrt::Tensor::make(etrt::ScalarType::Float, bound, {}, nullptr, etrt::ShapeDynamism::DynamicUnbound);
  REQUIRE(t);
  const std::vector<int64_t> overflowing = {49, 0, huge};
  auto s = t->resize(overflowing);
  REQUIRE_FALSE(s);
  CHECK_THAT(s.error().what, Catch::Contains("overflows the strides"));
  CHECK(t->sizes()[0] == 64);  // unchanged
  const std::vector<int64_t> empty_ok = {49, 0, 8};
  CHECK(t->resize(empty_ok));
  // Made with such sizes: refused too; the element size counts (2^61 float32 elements span 2^63 bytes).
  CHECK_FALSE(etrt::Tensor::make(etrt::ScalarType::Float, overflowing, {}, nullptr));
  const std::vector<int64_t> byte_overflow = {0, int64_t{1} << 61};
  CHECK_FALSE(etrt::Tensor::make(etrt::ScalarType::Float, byte_overflow, {}, nullptr));
  CHECK(etrt::Tensor::make(etrt::ScalarType::Byte, byte_overflow, {}, nullptr));
}

TEST_CASE("first_non_bool_byte finds the first byte other than 0 or 1 at every position", "[reliability]") {
  // Note [bool bytes]: the scan OR-reduces 64-byte blocks before searching one; the index must be the first bad
  // byte's wherever it sits (in a block, at its edges, in the tail past the last whole block), or n for none.
  std::vector<uint8_t> bytes(300);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i % 3 == 0);
  CHECK(etrt::first_non_bool_byte(bytes.data(), bytes.size()) == bytes.size());
  CHECK(etrt::first_non_bool_byte(bytes.data(), 0) == 0);
  for (size_t at = 0; at < bytes.size(); ++at)
    for (uint8_t bad : {uint8_t{2}, uint8_t{0x80}, uint8_t{0xff}}) {
      std::vector<uint8_t> b = bytes;
      b[at] = bad;
      if (at + 7 < b.size()) b[at + 7] = 5;  // a later bad byte must not be the one reported
      INFO("bad byte " << int(bad) << " at " << at);
      REQUIRE(etrt::first_non_bool_byte(b.data(), b.size()) == at);
      REQUIRE(etrt::first_non_bool_byte(b.data(), at) == at);  // a prefix without it: none
    }
}
