// Tests for the quantized-LLM kernels: packed / group-wise embeddings (quantized_embedding.h), choose_qparams and
// per-token quantization (quantized_per_token.h), mixed_mm / mixed_linear / quantized add (quantized_mixed.h).
// Expected values are worked out by hand from the packing and the formulas in the headers' comments; the same ops
// are checked against upstream's runtime on exported programs in tests/python/test_quantized_ops.py.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "etrt/kernels/ops/quantized_embedding.h"
#include "etrt/kernels/ops/quantized_mixed.h"
#include "etrt/kernels/ops/quantized_per_token.h"
#include "kernel_test_util.h"

namespace {
using namespace etrt;
using namespace etrt::kernels;
using namespace etrt::ktest;
using Q = types<uint8_t, int8_t, int16_t, int32_t, uint16_t>;

std::string message(const Status& s) { return s ? std::string() : s.error().what; }
}  // namespace

TEST_CASE("embedding_4bit: high nibble first, -8 offset, per-row and group-wise scales", "[kernels][quantized_llm]") {
  KernelContext ctx;
  // Row 0: 0x9C 0x07 -> nibbles 9, 12, 0, 7 -> values 1, 4, -8, -1. Row 1: 0xF8 0x81 -> 7, 0, 0, -7.
  std::vector<uint8_t> w{0x9C, 0x07, 0xF8, 0x81};
  std::vector<float> sc{0.5f, 2.0f};
  std::vector<int64_t> idx{1, 0, 1};
  std::vector<float> o(12);
  Tensor out = mk(o, {3, 4});
  REQUIRE(embedding_4bit_out<float_types>(ctx, mk(w, {2, 2}), mk(sc, {2}), nullptr, -8, 7, mk(idx, {3}), out));
  CHECK(o == std::vector<float>{14, 0, 0, -14, 0.5f, 2, -4, -0.5f, 14, 0, 0, -14});
  // Two groups per row with zero points: row 0 groups (1, 4) and (-8, -1).
  std::vector<float> sg{0.5f, 0.25f, 1.f, 2.f}, zg{1.f, -2.f, 0.f, 1.f};
  std::vector<int32_t> idx32{0, 1};
  std::vector<float> og(8);
  Tensor outg = mk(og, {2, 4});
  Tensor tz = mk(zg, {2, 2});
  REQUIRE(embedding_4bit_dtype_out<float_types>(ctx, mk(w, {2, 2}), mk(sg, {2, 2}), &tz, -8, 7, mk(idx32, {2}),
                                                ScalarType::Float, outg));
  CHECK(og == std::vector<float>{0.f, 1.5f, -1.5f, 0.25f, 7, 0, -2, -16});
  // Half output; a requested dtype that differs from out's is refused.
  std::vector<uint16_t> oh(4);
  Tensor th = mk(oh, {1, 4}, ScalarType::Half);
  std::vector<int64_t> one{0};
  REQUIRE(embedding_4bit_dtype_out<float_types>(ctx, mk(w, {2, 2}), mk(sc, {2}), nullptr, -8, 7, mk(one, {1}),
                                                std::nullopt, th));
  CHECK(Half::to_float(oh[3]) == -0.5f);
  auto st = embedding_4bit_dtype_out<float_types>(ctx, mk(w, {2, 2}), mk(sc, {2}), nullptr, -8, 7, mk(one, {1}),
                                                  ScalarType::Float, th);
  CHECK_THAT(message(st), Catch::Contains("embedding_4bit.dtype_out") && Catch::Contains("requested dtype"));
  CHECK(slots_of("quantized_decomposed::embedding_4bit.dtype_out") == 9);
  CHECK(slots_of("quantized_decomposed::embedding_4bit.out") == 8);
}

TEST_CASE("embedding_2bit: least significant field first, -2 offset", "[kernels][quantized_llm]") {
  KernelContext ctx;
  // 0xE4 = 0b11'10'01'00 -> fields 0, 1, 2, 3 -> values -2, -1, 0, 1; 0x1B -> fields 3, 2, 1, 0 -> 1, 0, -1, -2.
  std::vector<uint8_t> w{0xE4, 0x1B};
  std::vector<float> sc{0.5f, 3.f}, zp{1.f, -1.f};
  std::vector<int64_t> idx{0, 1};
  std::vector<float> o(8);
  Tensor out = mk(o, {2, 4}), tz = mk(zp, {2});
  REQUIRE(embedding_2bit_out<float_types>(ctx, mk(w, {2, 1}), mk(sc, {2}), &tz, -2, 1, mk(idx, {2}), out));
  CHECK(o == std::vector<float>{-1.5f, -1.f, -0.5f, 0.f, 6, 3, 0, -3});
}

TEST_CASE("embedding_byte: int8 and uint8 weights, index shapes, and every refusal names the op",
          "[kernels][quantized_llm]") {
  KernelContext ctx;
  std::vector<int8_t> w{-3, 0, 5, 127, -128, 1};  // [3, 2]
  std::vector<float> sc{1.f, 0.5f, 0.25f};
  std::vector<int64_t> idx{2, 0, 1, 2};  // [2, 2] -> out [2, 2, 2]
  std::vector<float> o(8);
  Tensor out = mk(o, {2, 2, 2});
  REQUIRE(embedding_byte_out<float_types>(ctx, mk(w, {3, 2}), mk(sc, {3}), nullptr, -128, 127, mk(idx, {2, 2}), out));
  CHECK(o == std::vector<float>{-32, 0.25f, -3, 0, 2.5f, 63.5f, -32, 0.25f});
  std::vector<uint8_t> wu{200, 10, 0, 255};  // [2, 2] with zero points 128
  std::vector<float> su{0.1f, 1.f}, zu{128.f, 128.f};
  std::vector<int64_t> i1{1};
  std::vector<float> o1(2);
  Tensor out1 = mk(o1, {1, 2}), tzu = mk(zu, {2});
  REQUIRE(embedding_byte_dtype_out<float_types>(ctx, mk(wu, {2, 2}), mk(su, {2}), &tzu, 0, 255, mk(i1, {1}),
                                                std::nullopt, out1));
  CHECK(o1 == std::vector<float>{-128, 127});

  const std::string_view op = "quantized_decomposed::embedding_byte.out";
  std::vector<int64_t> bad{3};
  auto st = embedding_byte_out<float_types>(ctx, mk(w, {3, 2}), mk(sc, {3}), nullptr, -128, 127, mk(bad, {1}), out1);
  CHECK_THAT(message(st), Catch::Contains(std::string(op)) && Catch::Contains("index 3 is out of range for 3"));
  bad[0] = -1;
  st = embedding_byte_out<float_types>(ctx, mk(w, {3, 2}), mk(sc, {3}), nullptr, -128, 127, mk(bad, {1}), out1);
  CHECK_THAT(message(st), Catch::Contains("index -1"));
  for (float corrupt : {0.f, -1.f, NAN, INFINITY}) {
    std::vector<float> sb{1.f, corrupt, 1.f};
    std::vector<int64_t> i{1};
    st = embedding_byte_out<float_types>(ctx, mk(w, {3, 2}), mk(sb, {3}), nullptr, -128, 127, mk(i, {1}), out1);
    CHECK_THAT(message(st), Catch::Contains(std::string(op)) && Catch::Contains("not a positive finite scale"));
  }
  std::vector<float> s3(9, 1.f);  // 3 groups do not divide a row of 2
  st = embedding_byte_out<float_types>(ctx, mk(w, {3, 2}), mk(s3, {3, 3}), nullptr, -128, 127, mk(i1, {1}), out1);
  CHECK_THAT(message(st), Catch::Contains("3 scale group(s) per row do not divide the row length 2"));
  std::vector<float> s2(2, 1.f);  // scales for 2 rows of a 3-row weight
  st = embedding_byte_out<float_types>(ctx, mk(w, {3, 2}), mk(s2, {2}), nullptr, -128, 127, mk(i1, {1}), out1);
  CHECK_THAT(message(st), Catch::Contains("needs 3 rows"));
  std::vector<int16_t> w16(6);
  st = embedding_byte_out<float_types>(ctx, mk(w16, {3, 2}), mk(sc, {3}), nullptr, -128, 127, mk(i1, {1}), out1);
  CHECK_THAT(message(st), Catch::Contains("weight must be uint8 or int8"));
  std::vector<float> fidx{0.f};
  st = embedding_byte_out<float_types>(ctx, mk(w, {3, 2}), mk(sc, {3}), nullptr, -128, 127, mk(fidx, {1}), out1);
  CHECK_THAT(message(st), Catch::Contains("indices must be Long or Int"));
  st = embedding_byte_out<float_types>(ctx, mk(w, {3, 2}), mk(sc, {3}), nullptr, 5, 1, mk(i1, {1}), out1);
  CHECK_THAT(message(st), Catch::Contains("weight_quant_min 5 > weight_quant_max 1"));
  std::vector<float> zbad(2);  // zero points shaped unlike the scales
  Tensor tzb = mk(zbad, {2});
  st = embedding_byte_out<float_types>(ctx, mk(w, {3, 2}), mk(sc, {3}), &tzb, -128, 127, mk(i1, {1}), out1);
  CHECK_THAT(message(st), Catch::Contains("must have the shape of weight_scales"));
  // A packed width mismatch: 4-bit weights are uint8 only, and 3 groups do not divide a 4-bit row of 2 bytes.
  std::vector<uint8_t> wp{0, 0, 0, 0};
  std::vector<float> sp(6, 1.f);
  st = embedding_4bit_out<float_types>(ctx, mk(wp, {2, 2}), mk(sp, {2, 3}), nullptr, -8, 7, mk(i1, {1}), out1);
  CHECK_THAT(message(st), Catch::Contains("embedding_4bit.out") && Catch::Contains("row length 4"));
  st = embedding_4bit_out<float_types>(ctx, mk(w, {3, 2}), mk(sc, {3}), nullptr, -8, 7, mk(i1, {1}), out1);
  CHECK_THAT(message(st), Catch::Contains("uint8 (packed)"));
  // The output's row length must be the unpacked one (a static out of the packed width cannot be resized).
  std::vector<float> o2(2);
  Tensor out2 = mk(o2, {1, 2});
  std::vector<float> s1(2, 1.f);
  st = embedding_4bit_out<float_types>(ctx, mk(wp, {2, 2}), mk(s1, {2}), nullptr, -8, 7, mk(i1, {1}), out2);
  CHECK_THAT(message(st), Catch::Contains("embedding_4bit.out: output"));
}

TEST_CASE("choose_qparams.Tensor_out: upstream's range rules", "[kernels][quantized_llm]") {
  KernelContext ctx;
  double scale = 0;
  int64_t zp = 0;
  Tensor ts = mk(ScalarType::Double, {1}, &scale), tz = mk(ScalarType::Long, {1}, &zp);
  // [-1, 2] over [0, 255]: scale 3/255; both ends give 85.
  std::vector<float> x{2.f, -1.f, 0.5f};
  REQUIRE(choose_qparams_tensor_out<float_types>(ctx, mk(x, {3}), 0, 255, 1e-7, ScalarType::Byte, ts, tz));
  CHECK(scale == Approx(3.0 / 255).epsilon(1e-12));
  CHECK(zp == 85);
  // All positive: the range is widened to 0, so the zero point is qmin.
  std::vector<float> pos{1.f, 3.f};
  REQUIRE(choose_qparams_tensor_out<float_types>(ctx, mk(pos, {2}), -128, 127, 1e-7, ScalarType::Char, ts, tz));
  CHECK(scale == Approx(3.0 / 255).epsilon(1e-12));
  CHECK(zp == -128);
  // All zero: the scale falls back to 0.1; over [-128, 127] the max end has the smaller error, giving 127.
  std::vector<float> zeros{0.f, 0.f};
  REQUIRE(choose_qparams_tensor_out<float_types>(ctx, mk(zeros, {2}), -128, 127, 1e-7, ScalarType::Char, ts, tz));
  CHECK(scale == 0.1);
  CHECK(zp == 127);
  // A tiny range: the scale is raised to 6.1e-5 (as a float).
  std::vector<float> tiny{0.f, 1e-3f};
  REQUIRE(choose_qparams_tensor_out<float_types>(ctx, mk(tiny, {2}), -128, 127, 1e-7, ScalarType::Char, ts, tz));
  CHECK(scale == static_cast<double>(6.1e-5f));
  CHECK(zp == -128);
  std::vector<float> bad{1.f, NAN};
  auto st = choose_qparams_tensor_out<float_types>(ctx, mk(bad, {2}), -128, 127, 1e-7, ScalarType::Char, ts, tz);
  CHECK_THAT(message(st), Catch::Contains("choose_qparams.Tensor_out") && Catch::Contains("non-finite"));
  st = choose_qparams_tensor_out<float_types>(ctx, mk(x, {3}), 5, 5, 1e-7, ScalarType::Char, ts, tz);
  CHECK_THAT(message(st), Catch::Contains("must be less than quant_max"));
  float fscale = 0;
  Tensor tfs = mk(ScalarType::Float, {1}, &fscale);
  st = choose_qparams_tensor_out<float_types>(ctx, mk(x, {3}), 0, 255, 1e-7, ScalarType::Byte, tfs, tz);
  CHECK_THAT(message(st), Catch::Contains("scale_out must be one float64 element"));
  CHECK(slots_of("quantized_decomposed::choose_qparams.Tensor_out") == 8);
}

TEST_CASE("per token: choose, quantize, dequantize", "[kernels][quantized_llm]") {
  KernelContext ctx;
  // Two tokens of 3: [-1, 0, 2] (scale 3/255, zp -43) and [0.5, 1, 0.25] (range [0, 1]: scale 1/255, zp -128).
  std::vector<float> x{-1.f, 0.f, 2.f, 0.5f, 1.f, 0.25f};
  std::vector<double> sc(2);
  std::vector<int64_t> zp(2);
  Tensor ts = mk(sc, {2, 1}, ScalarType::Double, {}, ShapeDynamism::DynamicBound);
  Tensor tz = mk(zp, {2, 1}, ScalarType::Long, {}, ShapeDynamism::DynamicBound);
  REQUIRE(choose_qparams_per_token_asymmetric_out<float_types>(ctx, mk(x, {2, 3}), ScalarType::Char, ts, tz));
  CHECK(sc[0] == Approx(3.0 / 255).epsilon(1e-12));
  CHECK(sc[1] == Approx(1.0 / 255).epsilon(1e-12));
  // zero point of token 0: from the max end, 127 - 2 / (3/255) = -43.
  CHECK(zp == std::vector<int64_t>{-43, -128});
  std::vector<int8_t> q(6);
  Tensor tq = mk(q, {2, 3});
  REQUIRE(quantize_per_token_out<Q>(ctx, mk(x, {2, 3}), ts, tz, -128, 127, ScalarType::Char, tq));
  // token 0: x * 85 - 43 -> -128, -43, 127. Token 1 multiplies by 1 / float(1/255) = 254.99998 in float, so 0.5
  // gives 127.49999 -> 127 -> -1 (float arithmetic, as upstream; exact math would round 127.5 to 128).
  CHECK(q == std::vector<int8_t>{-128, -43, 127, -1, 127, -64});
  std::vector<float> y(6);
  Tensor ty = mk(y, {2, 3});
  REQUIRE(dequantize_per_token_out<Q>(ctx, tq, ts, tz, -128, 127, ScalarType::Char, ScalarType::Float, ty));
  for (int i = 0; i < 6; ++i) CHECK(y[i] == Approx(x[i]).margin(0.006));
  // Given parameters in other dtypes: float32 scales and int32 zero points are read too.
  std::vector<float> fs{0.5f, 0.25f};
  std::vector<int32_t> iz{0, 10};
  REQUIRE(quantize_per_token_out<Q>(ctx, mk(x, {2, 3}), mk(fs, {2}), mk(iz, {2}), -128, 127, ScalarType::Char, tq));
  CHECK(q == std::vector<int8_t>{-2, 0, 4, 12, 14, 11});
  // Refusals.
  std::vector<float> zero{0.5f, 0.f};
  auto st = quantize_per_token_out<Q>(ctx, mk(x, {2, 3}), mk(zero, {2}), mk(iz, {2}), -128, 127, ScalarType::Char, tq);
  CHECK_THAT(message(st), Catch::Contains("quantize_per_token.out") && Catch::Contains("scale 0 of token 1"));
  std::vector<float> three(3, 1.f);
  st = quantize_per_token_out<Q>(ctx, mk(x, {2, 3}), mk(three, {3}), mk(iz, {2}), -128, 127, ScalarType::Char, tq);
  CHECK_THAT(message(st), Catch::Contains("one element per token (2)"));
  st = quantize_per_token_out<Q>(ctx, mk(x, {2, 3}), mk(fs, {2}), mk(iz, {2}), 0, 255, ScalarType::Char, tq);
  CHECK_THAT(message(st), Catch::Contains("quant_max"));
  st = dequantize_per_token_out<Q>(ctx, tq, ts, tz, -128, 127, ScalarType::Byte, ScalarType::Float, ty);
  CHECK_THAT(message(st), Catch::Contains("dequantize_per_token.out: input dtype Char != dtype Byte"));
  st = dequantize_per_token_out<Q>(ctx, tq, ts, tz, -128, 127, ScalarType::Char, ScalarType::Half, ty);
  CHECK_THAT(message(st), Catch::Contains("output_dtype"));
  std::vector<float> inf{1.f, INFINITY, 0.f};
  st = choose_qparams_per_token_asymmetric_out<float_types>(ctx, mk(inf, {1, 3}), ScalarType::Char, ts, tz);
  CHECK_THAT(message(st), Catch::Contains("choose_qparams_per_token_asymmetric.out") && Catch::Contains("non-finite"));
}

TEST_CASE("mixed_mm and mixed_linear: int8 weights with row and group scales", "[kernels][quantized_llm]") {
  KernelContext ctx;
  std::vector<float> x{1.f, 2.f, -1.f, 0.5f};  // [2, 2]
  std::vector<int8_t> w{3, -4, 10, 1, 0, -2};  // [2, 3]
  std::vector<float> s{0.5f, 2.f};
  std::vector<float> o(6);
  Tensor out = mk(o, {2, 3});
  REQUIRE(mixed_mm_out<float_types>(ctx, mk(x, {2, 2}), mk(w, {2, 3}), mk(s, {2}), nullptr, out));
  // row 0: 1 * (1.5, -2, 5) + 2 * (2, 0, -4) = (5.5, -2, -3); row 1: -(1.5, -2, 5) + 0.5 * (2, 0, -4) = (-0.5, 2, -7)
  CHECK(o == std::vector<float>{5.5f, -2, -3, -0.5f, 2, -7});
  // mixed_linear: weight [3, 4], two groups of 2 per row.
  std::vector<float> xl{1.f, -1.f, 2.f, 0.5f};  // [1, 4]
  std::vector<int8_t> wl{1, 2, 3, 4, -1, 0, 0, 8, 5, 5, -5, -5};
  std::vector<float> sl{1.f, 0.5f, 2.f, 0.25f, 0.1f, 1.f};
  std::vector<float> ol(3);
  Tensor outl = mk(ol, {1, 3});
  REQUIRE(mixed_linear_out<float_types>(ctx, mk(xl, {1, 4}), mk(wl, {3, 4}), mk(sl, {3, 2}), nullptr,
                                        ScalarType::Float, outl));
  // row 0: (1 - 2) * 1 + (6 + 2) * 0.5 = 3; row 1: (-1) * 2 + (4) * 0.25 = -1; row 2: 0 * 0.1 + (-10 - 2.5) * 1
  CHECK(ol == std::vector<float>{3.f, -1.f, -12.5f});
  std::vector<float> sbad(9, 1.f);
  auto st = mixed_linear_out<float_types>(ctx, mk(xl, {1, 4}), mk(wl, {3, 4}), mk(sbad, {3, 3}), nullptr,
                                          std::nullopt, outl);
  CHECK_THAT(message(st), Catch::Contains("mixed_linear.out: 3 scale group(s) do not divide the row length 4"));
  Tensor tz = mk(s, {2});
  st = mixed_mm_out<float_types>(ctx, mk(x, {2, 2}), mk(w, {2, 3}), mk(s, {2}), &tz, out);
  CHECK_THAT(message(st), Catch::Contains("mixed_mm.out") && Catch::Contains("zero_points are not supported"));
  std::vector<float> sneg{0.5f, -2.f};
  st = mixed_mm_out<float_types>(ctx, mk(x, {2, 2}), mk(w, {2, 3}), mk(sneg, {2}), nullptr, out);
  CHECK_THAT(message(st), Catch::Contains("not a positive finite scale"));
  std::vector<uint8_t> wu(6);
  st = mixed_mm_out<float_types>(ctx, mk(x, {2, 2}), mk(wu, {2, 3}), mk(s, {2}), nullptr, out);
  CHECK_THAT(message(st), Catch::Contains("weight must be int8"));
}

TEST_CASE("quantized add: dequantize, add in float, requantize with clamping", "[kernels][quantized_llm]") {
  KernelContext ctx;
  using I = types<uint8_t, int8_t, int16_t, int32_t, int64_t>;
  std::vector<uint8_t> a{10, 20, 255, 0}, b{100, 0, 255, 7}, o(4);
  Tensor out = mk(o, {2, 2});
  REQUIRE(quantized_add_out<I>(ctx, mk(a, {2, 2}), 0.5, 10, 0, 255, mk(b, {2, 2}), 0.25, 100, 0, 255, 1.0, 5, 0, 255,
                               out));
  // (0 + 0) + 5 = 5; (5 - 25) + 5 = -15 -> 0; (122.5 + 38.75) = 161.25 -> 161 + 5 = 166; (-5 - 23.25) -> 0
  CHECK(o == std::vector<uint8_t>{5, 0, 166, 0});
  // int8 with signed ranges (upstream only accepts [0, 255] ranges; here any range valid for the dtype).
  std::vector<int8_t> ai{-100, 50}, bi{-100, 50}, oi(2);
  Tensor outi = mk(oi, {2});
  REQUIRE(quantized_add_out<I>(ctx, mk(ai, {2}), 1.0, 0, -128, 127, mk(bi, {2}), 1.0, 0, -128, 127, 1.0, 0, -128, 127,
                               outi));
  CHECK(oi == std::vector<int8_t>{-128, 100});
  auto st = quantized_add_out<I>(ctx, mk(a, {2, 2}), 0.0, 10, 0, 255, mk(b, {2, 2}), 0.25, 100, 0, 255, 1.0, 5, 0, 255,
                                 out);
  CHECK_THAT(message(st), Catch::Contains("add.out: a_scale 0 is not a positive finite scale"));
  st = quantized_add_out<I>(ctx, mk(a, {2, 2}), 0.5, 10, 0, 255, mk(b, {2, 2}), 0.25, 100, 0, 255, 1.0, 5, 0, 300, out);
  CHECK_THAT(message(st), Catch::Contains("out_quant_max 300 are invalid for Byte"));
  st = quantized_add_out<I>(ctx, mk(a, {4}), 0.5, 10, 0, 255, mk(b, {2, 2}), 0.25, 100, 0, 255, 1.0, 5, 0, 255, out);
  CHECK_THAT(message(st), Catch::Contains("same shape"));
  CHECK(slots_of("quantized_decomposed::add.out") == 16);
}
