// Tests for the llama:: custom operators (include/etrt/kernels/ops/llama_*.h) against plain double-precision
// references written here. tests/python/test_llm_ops.py compares the same kernels with upstream's runtime.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "etrt/kernels/ops/llama_gated_delta.h"
#include "etrt/kernels/ops/llama_hadamard.h"
#include "etrt/kernels/ops/llama_kv_cache.h"
#include "etrt/kernels/ops/llama_moe.h"
#include "etrt/kernels/ops/llama_sdpa.h"
#include "kernel_test_util.h"

namespace {
using namespace etrt;
using namespace etrt::kernels;
using namespace etrt::ktest;

std::vector<float> randn(size_t n, uint32_t seed, float sd = 1.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

void require_error(const Status& s, const char* what) {
  REQUIRE(!s);
  CHECK(s.error().code == Error::InvalidArgument);
  CHECK_THAT(s.error().what, Catch::Contains("llama::"));
  CHECK_THAT(s.error().what, Catch::Contains(what));
}

/// Attention in double: q [B, S, H, D], caches [B, L, Hkv, D]; keys [0, nkv) (or the whole cache with a mask).
std::vector<double> ref_attention(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                                  int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D, int64_t L, int64_t start,
                                  bool causal, const std::vector<float>* mask) {
  std::vector<double> out(static_cast<size_t>(B * S * H * D));
  const int64_t nkv = mask ? L : start + S, rep = H / Hkv;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t g = h / rep, lim = causal ? std::min(start + s + 1, nkv) : nkv;
        std::vector<double> w(static_cast<size_t>(lim));
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < lim; ++j) {
          double d = 0;
          for (int64_t i = 0; i < D; ++i)
            d += static_cast<double>(q[((b * S + s) * H + h) * D + i]) * k[((b * L + j) * Hkv + g) * D + i];
          w[j] = d * scale + (mask ? (*mask)[s * L + j] : 0.0);
          mx = std::max(mx, w[j]);
        }
        for (double& x : w) sum += (x = std::exp(x - mx));
        for (int64_t i = 0; i < D; ++i) {
          double acc = 0;
          for (int64_t j = 0; j < lim; ++j) acc += w[j] * v[((b * L + j) * Hkv + g) * D + i];
          out[((b * S + s) * H + h) * D + i] = acc / sum;
        }
      }
  return out;
}

}  // namespace

TEST_CASE("update_cache writes only the new rows, in place", "[llama]") {
  KernelContext ctx;
  const int64_t B = 2, L = 6, H = 3, D = 4, S = 2;
  std::vector<float> cache(B * L * H * D, -1.0f), value = randn(B * S * H * D, 1), dummy(1, 7.0f);
  Tensor tc = mk(cache, {B, L, H, D}), tv = mk(value, {B, S, H, D}), to = mk(dummy, {1});
  REQUIRE(update_cache_out<all_types>(ctx, tv, tc, 3, to));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t l = 0; l < L; ++l)
      for (int64_t i = 0; i < H * D; ++i) {
        const float got = cache[(b * L + l) * H * D + i];
        if (l >= 3 && l < 5) CHECK(got == value[(b * S + (l - 3)) * H * D + i]);
        else CHECK(got == -1.0f);
      }
  CHECK(dummy[0] == 7.0f);
  // int8 and int64 caches are plain byte copies too.
  std::vector<int8_t> c8(1 * 4 * 1 * 2, 0), v8 = {5, -6};
  Tensor t8 = mk(c8, {1, 4, 1, 2});
  REQUIRE(update_cache_out<all_types>(ctx, mk(v8, {1, 1, 1, 2}), t8, 3, to));
  CHECK(c8 == std::vector<int8_t>{0, 0, 0, 0, 0, 0, 5, -6});

  require_error(update_cache_out<all_types>(ctx, tv, tc, 5, to), "exceeds the cache length 6");
  require_error(update_cache_out<all_types>(ctx, tv, tc, 6, to), "start_pos 6");
  require_error(update_cache_out<all_types>(ctx, tv, tc, -1, to), "negative");
  std::vector<float> wrong(B * S * 2 * D);
  require_error(update_cache_out<all_types>(ctx, mk(wrong, {B, S, 2, D}), tc, 0, to), "head count");
  require_error(update_cache_out<all_types>(ctx, mk(wrong, {B * S * 2 * D}), tc, 0, to), "value must be 4-D");
  std::vector<double> vd(B * S * H * D);
  require_error(update_cache_out<all_types>(ctx, mk(vd, {B, S, H, D}), tc, 0, to), "element size");
  std::vector<float> perm(B * S * H * D);
  require_error(update_cache_out<all_types>(ctx, mk(perm, {B, S, H, D}, ScalarType::Float, {0, 2, 1, 3}), tc, 0, to),
                "contiguous dim order");
}

TEST_CASE("update_cache_with_indices: scattered rows, last duplicate wins, bad indices change nothing", "[llama]") {
  KernelContext ctx;
  const int64_t B = 2, L = 5, H = 2, D = 3, S = 3;
  std::vector<float> cache(B * L * H * D, 0.0f), value = randn(B * S * H * D, 2), dummy(1);
  std::vector<int64_t> idx = {4, 0, 4, 1, 2, 3};
  Tensor tc = mk(cache, {B, L, H, D}), tv = mk(value, {B, S, H, D}), to = mk(dummy, {1});
  REQUIRE(update_cache_with_indices_out<all_types>(ctx, tv, tc, 99, mk(idx, {B, S}), to));
  auto row = [&](const std::vector<float>& t, int64_t b, int64_t s, int64_t n) {
    return std::vector<float>(t.begin() + (b * n + s) * H * D, t.begin() + (b * n + s + 1) * H * D);
  };
  CHECK(row(cache, 0, 4, L) == row(value, 0, 2, S));  // position 4 written twice: the later row stays
  CHECK(row(cache, 0, 0, L) == row(value, 0, 1, S));
  CHECK(row(cache, 0, 1, L) == std::vector<float>(H * D, 0.0f));
  CHECK(row(cache, 1, 1, L) == row(value, 1, 0, S));
  CHECK(row(cache, 1, 3, L) == row(value, 1, 2, S));
  const std::vector<float> before = cache;
  for (int64_t bad : {5, -1}) {
    std::vector<int64_t> bidx = {0, 1, 2, 3, bad, 0};
    require_error(update_cache_with_indices_out<all_types>(ctx, tv, tc, 0, mk(bidx, {B, S}), to), "out of range");
    CHECK(cache == before);
  }
  std::vector<int32_t> i32(B * S);
  std::vector<int64_t> short_idx(B * 2);
  require_error(update_cache_with_indices_out<all_types>(ctx, tv, tc, 0, mk(i32, {B, S}), to), "indices must be Long");
  require_error(update_cache_with_indices_out<all_types>(ctx, tv, tc, 0, mk(short_idx, {B, 2}), to),
                "[batch, seq_len]");
}

TEST_CASE("fallback copies its input", "[llama]") {
  KernelContext ctx;
  std::vector<int32_t> in = {1, 2, 3, 4, 5, 6}, out(6);
  Tensor to = mk(out, {2, 3});
  REQUIRE(fallback_out<all_types>(ctx, mk(in, {2, 3}), to));
  CHECK(out == in);
  std::vector<float> f(6);
  Tensor tf = mk(f, {2, 3});
  require_error(fallback_out<all_types>(ctx, mk(in, {2, 3}), tf), "dtype");
}

TEST_CASE("custom_sdpa: causal, start_pos > 0, GQA, masks, several query blocks", "[llama]") {
  KernelContext ctx;
  struct Case {
    int64_t B, S, H, Hkv, D, L, start;
    bool causal, masked;
  };
  const Case cases[] = {
      {1, 1, 4, 2, 8, 16, 7, true, false},     // decode step
      {2, 5, 4, 1, 16, 12, 3, true, false},    // small prefill after a prefix, multi-query
      {1, 70, 6, 3, 32, 96, 10, true, false},  // three query blocks, GEMM path
      {1, 40, 2, 2, 24, 64, 0, false, false},  // non-causal: all of [0, start + S)
      {1, 3, 4, 2, 8, 10, 2, false, true},     // additive mask over the whole cache
      {1, 37, 2, 1, 16, 50, 0, false, true},
  };
  uint32_t seed = 10;
  for (const Case& c : cases) {
    CAPTURE(c.B, c.S, c.H, c.Hkv, c.D, c.L, c.start, c.causal, c.masked);
    auto q = randn(c.B * c.S * c.H * c.D, seed++), k = randn(c.B * c.L * c.Hkv * c.D, seed++),
         v = randn(c.B * c.L * c.Hkv * c.D, seed++), mask = randn(c.S * c.L, seed++);
    for (size_t i = 0; i < mask.size(); i += 3) mask[i] = -INFINITY;
    for (int64_t s = 0; s < c.S; ++s) mask[s * c.L] = 0.0f;  // every row keeps one key
    std::vector<float> out(q.size());
    Tensor tq = mk(q, {c.B, c.S, c.H, c.D}), tk = mk(k, {c.B, c.L, c.Hkv, c.D}), tv = mk(v, {c.B, c.L, c.Hkv, c.D}),
           tm = mk(mask, {c.S, c.L}), to = mk(out, {c.B, c.S, c.H, c.D});
    REQUIRE(custom_sdpa_out<float_types>(ctx, tq, tk, tv, c.start, c.masked ? &tm : nullptr, 0.0, c.causal,
                                         std::nullopt, to));
    const auto ref = ref_attention(q, k, v, c.B, c.S, c.H, c.Hkv, c.D, c.L, c.start, c.causal,
                                   c.masked ? &mask : nullptr);
    for (size_t i = 0; i < out.size(); ++i) REQUIRE(out[i] == Approx(ref[i]).margin(2e-5));
  }
}

TEST_CASE("custom_sdpa decode blocks: head sizes with a tail, key counts not a multiple of four, every ISA level",
          "[llama]") {
  KernelContext ctx;
  struct Case {
    int64_t S, H, Hkv, D, L, start;
  };
  const Case cases[] = {
      {1, 6, 6, 48, 128, 40},  // a stories15M decode step: six whole AVX2 registers per head
      {1, 4, 2, 13, 20, 10},   // a 13-float head: one register and a scalar tail; 11 keys
      {2, 4, 1, 20, 16, 5},    // two query rows of four heads on one KV head: R = 8
      {1, 2, 2, 7, 9, 0},      // one key, a head narrower than a register
  };
  uint32_t seed = 70;
  for (const Case& c : cases) {
    auto q = randn(c.S * c.H * c.D, seed++), k = randn(c.L * c.Hkv * c.D, seed++), v = randn(c.L * c.Hkv * c.D, seed++);
    // Cache rows past the last position are never weighted: a NaN there must not reach the output.
    for (int64_t j = c.start + c.S; j < c.L; ++j)
      for (int64_t i = 0; i < c.Hkv * c.D; ++i) v[static_cast<size_t>(j * c.Hkv * c.D + i)] = std::nanf("");
    const auto ref = ref_attention(q, k, v, 1, c.S, c.H, c.Hkv, c.D, c.L, c.start, true, nullptr);
    for (int level : {-1, 0}) {
      etrt::kernels::isa::force_level = level;
      CAPTURE(c.S, c.H, c.Hkv, c.D, c.L, c.start, level);
      std::vector<float> out(q.size());
      Tensor tq = mk(q, {1, c.S, c.H, c.D}), tk = mk(k, {1, c.L, c.Hkv, c.D}), tv = mk(v, {1, c.L, c.Hkv, c.D}),
             to = mk(out, {1, c.S, c.H, c.D});
      REQUIRE(custom_sdpa_out<float_types>(ctx, tq, tk, tv, c.start, nullptr, 0.0, true, std::nullopt, to));
      for (size_t i = 0; i < out.size(); ++i) REQUIRE(out[i] == Approx(ref[i]).margin(2e-5));
    }
    etrt::kernels::isa::force_level = -1;
  }
}

TEST_CASE("custom_sdpa: explicit scale, Half, and every refused argument", "[llama]") {
  KernelContext ctx;
  const int64_t S = 2, H = 4, Hkv = 2, D = 8, L = 6, start = 3;
  auto q = randn(S * H * D, 40), k = randn(L * Hkv * D, 41), v = randn(L * Hkv * D, 42);
  std::vector<float> out(q.size());
  Tensor tq = mk(q, {1, S, H, D}), tk = mk(k, {1, L, Hkv, D}), tv = mk(v, {1, L, Hkv, D}), to = mk(out, {1, S, H, D});
  // scale 0.5 on q equals the default scale on q * 0.5 * sqrt(D).
  REQUIRE(custom_sdpa_out<float_types>(ctx, tq, tk, tv, start, nullptr, 0.0, true, 0.5, to));
  std::vector<float> q2(q);
  for (float& x : q2) x *= 0.5f * std::sqrt(static_cast<float>(D));
  const auto ref = ref_attention(q2, k, v, 1, S, H, Hkv, D, L, start, true, nullptr);
  for (size_t i = 0; i < out.size(); ++i) CHECK(out[i] == Approx(ref[i]).margin(2e-5));

  std::vector<Half> qh(q.begin(), q.end()), kh(k.begin(), k.end()), vh(v.begin(), v.end()), oh(q.size());
  Tensor th = mk(oh, {1, S, H, D});
  REQUIRE(custom_sdpa_out<float_types>(ctx, mk(qh, {1, S, H, D}), mk(kh, {1, L, Hkv, D}), mk(vh, {1, L, Hkv, D}), start,
                                       nullptr, 0.0, true, std::nullopt, th));
  const auto refh = ref_attention(std::vector<float>(qh.begin(), qh.end()), std::vector<float>(kh.begin(), kh.end()),
                                  std::vector<float>(vh.begin(), vh.end()), 1, S, H, Hkv, D, L, start, true, nullptr);
  for (size_t i = 0; i < oh.size(); ++i) CHECK(static_cast<float>(oh[i]) == Approx(refh[i]).margin(2e-3));

  require_error(custom_sdpa_out<float_types>(ctx, tq, tk, tv, 5, nullptr, 0.0, true, std::nullopt, to),
                "exceeds the key/value cache length 6");
  require_error(custom_sdpa_out<float_types>(ctx, tq, tk, tv, -2, nullptr, 0.0, true, std::nullopt, to), "negative");
  std::vector<float> k3(L * 3 * D);
  require_error(custom_sdpa_out<float_types>(ctx, tq, mk(k3, {1, L, 3, D}), mk(k3, {1, L, 3, D}), 0, nullptr, 0.0,
                                             true, std::nullopt, to),
                "multiple of the key/value head count 3");
  std::vector<float> m(S * L);
  Tensor tm = mk(m, {S, L});
  require_error(custom_sdpa_out<float_types>(ctx, tq, tk, tv, 0, &tm, 0.0, true, std::nullopt, to),
                "cannot both be set");
  std::vector<float> m2(S * 5);
  Tensor tm2 = mk(m2, {S, 5});
  require_error(custom_sdpa_out<float_types>(ctx, tq, tk, tv, 0, &tm2, 0.0, false, std::nullopt, to),
                "[seq_len, cache length]");
  require_error(custom_sdpa_out<float_types>(ctx, mk(q, {S, H, D}), tk, tv, 0, nullptr, 0.0, true, std::nullopt, to),
                "query must be 4-D");
  std::vector<double> kd(k.size());
  require_error(custom_sdpa_out<float_types>(ctx, tq, mk(kd, {1, L, Hkv, D}), tv, 0, nullptr, 0.0, true, std::nullopt,
                                             to),
                "dtype of query");
  std::vector<float> k16(L * Hkv * 16);
  require_error(custom_sdpa_out<float_types>(ctx, tq, mk(k16, {1, L, Hkv, 16}), mk(k16, {1, L, Hkv, 16}), 0, nullptr,
                                             0.0, true, std::nullopt, to),
                "same head dim");
}

TEST_CASE("sdpa_with_kv_cache updates the caches then attends; a bad call leaves them unchanged", "[llama]") {
  KernelContext ctx;
  const int64_t S = 3, H = 4, Hkv = 2, D = 8, L = 8, start = 2;
  auto q = randn(S * H * D, 50), k = randn(S * Hkv * D, 51), v = randn(S * Hkv * D, 52);
  auto kc = randn(L * Hkv * D, 53), vc = randn(L * Hkv * D, 54);
  std::vector<float> out(q.size());
  Tensor tq = mk(q, {1, S, H, D}), tk = mk(k, {1, S, Hkv, D}), tv = mk(v, {1, S, Hkv, D}), tkc = mk(kc, {1, L, Hkv, D}),
         tvc = mk(vc, {1, L, Hkv, D}), to = mk(out, {1, S, H, D});
  const auto kc0 = kc, vc0 = vc;
  require_error(sdpa_with_kv_cache_out<float_types>(ctx, tq, tk, tv, tkc, tvc, 6, S, nullptr, 0.0, true, std::nullopt,
                                                    to),
                "exceeds the key cache length 8");
  CHECK(kc == kc0);
  CHECK(vc == vc0);
  REQUIRE(sdpa_with_kv_cache_out<float_types>(ctx, tq, tk, tv, tkc, tvc, start, S, nullptr, 0.0, true, std::nullopt,
                                              to));
  auto ek = kc0, ev = vc0;
  std::copy(k.begin(), k.end(), ek.begin() + start * Hkv * D);
  std::copy(v.begin(), v.end(), ev.begin() + start * Hkv * D);
  CHECK(kc == ek);
  CHECK(vc == ev);
  const auto ref = ref_attention(q, ek, ev, 1, S, H, Hkv, D, L, start, true, nullptr);
  for (size_t i = 0; i < out.size(); ++i) CHECK(out[i] == Approx(ref[i]).margin(2e-5));
}

TEST_CASE("custom_quantized_sdpa: int8 q/k/v with per-row parameters, both layouts", "[llama]") {
  KernelContext ctx;
  const int64_t S = 5, H = 4, Hkv = 2, D = 16, L = 9, start = 3;
  std::mt19937 g(60);
  std::uniform_int_distribution<int> qd(-128, 127), zd(-20, 20);
  std::uniform_real_distribution<float> sd(0.005f, 0.05f);
  for (bool seq2 : {false, true}) {
    CAPTURE(seq2);
    auto make = [&](int64_t heads, int64_t len, std::vector<int8_t>& x, std::vector<float>& sc,
                    std::vector<int8_t>& zp) {
      x.resize(heads * len * D);
      sc.resize(heads * len);
      zp.resize(heads * len);
      for (auto& e : x) e = static_cast<int8_t>(qd(g));
      for (auto& e : sc) e = sd(g);
      for (auto& e : zp) e = static_cast<int8_t>(zd(g));
    };
    std::vector<int8_t> q, k, v, qz, kz, vz;
    std::vector<float> qs, ks, vs;
    make(H, S, q, qs, qz);
    make(Hkv, L, k, ks, kz);
    make(Hkv, L, v, vs, vz);
    // Dequantized [B, S, H, D] copies for the reference.
    auto deq = [&](const std::vector<int8_t>& x, const std::vector<float>& sc, const std::vector<int8_t>& zp,
                   int64_t heads, int64_t len) {
      std::vector<float> r(x.size());
      for (int64_t s = 0; s < len; ++s)
        for (int64_t h = 0; h < heads; ++h) {
          const int64_t p = seq2 ? h * len + s : s * heads + h;  // parameter index
          for (int64_t i = 0; i < D; ++i)
            r[(s * heads + h) * D + i] = static_cast<float>(x[p * D + i] - zp[p]) * sc[p];
        }
      return r;
    };
    const auto ref = ref_attention(deq(q, qs, qz, H, S), deq(k, ks, kz, Hkv, L), deq(v, vs, vz, Hkv, L), 1, S, H, Hkv,
                                   D, L, start, true, nullptr);
    auto shape = [&](int64_t heads, int64_t len, int64_t d) {
      return seq2 ? std::vector<int64_t>{1, heads, len, d} : std::vector<int64_t>{1, len, heads, d};
    };
    std::vector<float> out(S * H * D);
    Tensor to = mk(out, shape(H, S, D));
    Tensor tqz = mk(qz, shape(H, S, 1)), tqs = mk(qs, shape(H, S, 1)), tkz = mk(kz, shape(Hkv, L, 1)),
           tks = mk(ks, shape(Hkv, L, 1)), tvz = mk(vz, shape(Hkv, L, 1)), tvs = mk(vs, shape(Hkv, L, 1));
    REQUIRE(custom_quantized_sdpa_out<float_types>(ctx, mk(q, shape(H, S, D)), mk(k, shape(Hkv, L, D)),
                                                   mk(v, shape(Hkv, L, D)), start, nullptr, 0.0, true, std::nullopt,
                                                   &tqz, &tqs, &tkz, &tks, &tvz, &tvs, seq2, to));
    for (int64_t s = 0; s < S; ++s)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < D; ++i) {
          const int64_t at = seq2 ? (h * S + s) * D + i : (s * H + h) * D + i;
          CHECK(out[at] == Approx(ref[(s * H + h) * D + i]).margin(2e-5));
        }
    require_error(custom_quantized_sdpa_out<float_types>(ctx, mk(q, shape(H, S, D)), mk(k, shape(Hkv, L, D)),
                                                         mk(v, shape(Hkv, L, D)), start, nullptr, 0.0, true,
                                                         std::nullopt, &tqz, &tqs, nullptr, &tks, &tvz, &tvs, seq2, to),
                  "key needs its scales and zero points");
    std::vector<float> none;
    Tensor tempty = mk(none, shape(Hkv, L, 0));
    require_error(custom_quantized_sdpa_out<float_types>(ctx, mk(q, shape(H, S, D)), mk(k, shape(Hkv, L, D)),
                                                         mk(v, shape(Hkv, L, D)), start, nullptr, 0.0, true,
                                                         std::nullopt, &tqz, &tqs, &tkz, &tempty, &tvz, &tvs, seq2, to),
                  "hold no value per row");
  }
}

TEST_CASE("fast_hadamard_transform: powers of two and 28 * 2^k", "[llama]") {
  KernelContext ctx;
  for (int64_t n : {1, 2, 8, 64, 28, 56, 112}) {
    CAPTURE(n);
    const bool has28 = n % 28 == 0;
    const int64_t m = has28 ? n / 28 : n;
    auto x = randn(3 * n, 70 + static_cast<uint32_t>(n));
    std::vector<float> y(x.size());
    Tensor ty = mk(y, {3, n});
    REQUIRE(fast_hadamard_transform_out<float_types>(ctx, mk(x, {3, n}), ty));
    // Reference: the dense matrix, entry (i, j) = sign28(i / m, j / m) * (-1)^popcount((i % m) & (j % m)) / sqrt(m).
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t i = 0; i < n; ++i) {
        double acc = 0;
        for (int64_t j = 0; j < n; ++j) {
          double s = (__builtin_popcountll(static_cast<unsigned long long>((i % m) & (j % m))) % 2) ? -1.0 : 1.0;
          if (has28 && ((llama::hadamard::kHad28Negative[i / m] >> (j / m)) & 1u)) s = -s;
          acc += s * x[r * n + j];
        }
        CHECK(y[r * n + i] == Approx(acc / std::sqrt(static_cast<double>(m))).margin(1e-4));
      }
  }
  // The 28 x 28 matrix is a Hadamard matrix: rows are orthogonal.
  for (int a = 0; a < 28; ++a)
    for (int b = a + 1; b < 28; ++b) {
      int dot = 0;
      for (int c = 0; c < 28; ++c)
        dot += (((llama::hadamard::kHad28Negative[a] ^ llama::hadamard::kHad28Negative[b]) >> c) & 1u) ? -1 : 1;
      REQUIRE(dot == 0);
    }
  std::vector<double> xd = {1, 2, 3, 4}, yd(4);
  Tensor tyd = mk(yd, {4});
  REQUIRE(fast_hadamard_transform_out<float_types>(ctx, mk(xd, {4}), tyd));
  CHECK(yd == std::vector<double>{5, -1, -2, 0});
  std::vector<float> x12(12), y12(12);
  Tensor ty12 = mk(y12, {12});
  require_error(fast_hadamard_transform_out<float_types>(ctx, mk(x12, {12}), ty12), "power of 2");
}

namespace {
/// Gated delta rule in double, straight from the definition.
void ref_gdr(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
             const std::vector<float>& g, const std::vector<float>& beta, const std::vector<float>& s0, int64_t B,
             int64_t Hq, int64_t H, int64_t T, int64_t K, int64_t V, bool per_channel, std::vector<double>& out,
             std::vector<double>& state) {
  out.assign(B * Hq * T * V, 0.0);
  state.assign(s0.begin(), s0.end());
  const int64_t rep = Hq / H;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      double* S = state.data() + (b * H + h) * K * V;
      for (int64_t t = 0; t < T; ++t) {
        const int64_t row = (b * H + h) * T + t;
        std::vector<double> pred(V, 0.0);
        for (int64_t i = 0; i < K; ++i)
          for (int64_t j = 0; j < V; ++j) {
            S[i * V + j] *= per_channel ? g[row * K + i] : g[row];
            pred[j] += S[i * V + j] * k[row * K + i];
          }
        for (int64_t i = 0; i < K; ++i)
          for (int64_t j = 0; j < V; ++j) S[i * V + j] += k[row * K + i] * (v[row * V + j] - pred[j]) * beta[row];
        for (int64_t r = 0; r < rep; ++r) {
          const int64_t qrow = (b * Hq + h * rep + r) * T + t;
          for (int64_t j = 0; j < V; ++j)
            for (int64_t i = 0; i < K; ++i) out[qrow * V + j] += S[i * V + j] * q[qrow * K + i];
        }
      }
    }
}
}  // namespace

TEST_CASE("gated_delta_rule: per-channel and per-token decay, grouped query heads, alias", "[llama]") {
  KernelContext ctx;
  const int64_t B = 2, Hq = 4, H = 2, T = 5, K = 6, V = 3;
  auto q = randn(B * Hq * T * K, 80), k = randn(B * H * T * K, 81, 0.4f), v = randn(B * H * T * V, 82);
  auto s0 = randn(B * H * K * V, 83);
  std::vector<float> gc(B * H * T * K), gs(B * H * T), beta(B * H * T);
  std::mt19937 rg(84);
  std::uniform_real_distribution<float> u(0.1f, 1.0f);
  for (auto* vec : {&gc, &gs, &beta})
    for (float& x : *vec) x = u(rg);
  for (bool per_channel : {true, false}) {
    CAPTURE(per_channel);
    std::vector<float> out(B * Hq * T * V), st(B * H * K * V);
    const auto s0_copy = s0;
    Tensor to = mk(out, {B, Hq, T, V}), ts = mk(st, {B, H, K, V});
    Tensor tg = per_channel ? mk(gc, {B, H, T, K}) : mk(gs, {B, H, T});
    REQUIRE(gated_delta_rule_out<float_types>(ctx, mk(q, {B, Hq, T, K}), mk(k, {B, H, T, K}), mk(v, {B, H, T, V}), tg,
                                              mk(beta, {B, H, T}), mk(s0, {B, H, K, V}), to, ts));
    CHECK(s0 == s0_copy);
    std::vector<double> ro, rs;
    ref_gdr(q, k, v, per_channel ? gc : gs, beta, s0, B, Hq, H, T, K, V, per_channel, ro, rs);
    for (size_t i = 0; i < out.size(); ++i) CHECK(out[i] == Approx(ro[i]).margin(1e-4));
    for (size_t i = 0; i < st.size(); ++i) CHECK(st[i] == Approx(rs[i]).margin(1e-4));
    std::vector<float> out2(out.size()), st2(st.size());
    Tensor to2 = mk(out2, {B, Hq, T, V}), ts2 = mk(st2, {B, H, K, V});
    REQUIRE(channelwise_gated_delta_rule_out<float_types>(ctx, mk(q, {B, Hq, T, K}), mk(k, {B, H, T, K}),
                                                          mk(v, {B, H, T, V}), tg, mk(beta, {B, H, T}),
                                                          mk(s0, {B, H, K, V}), to2, ts2));
    CHECK(out2 == out);
    CHECK(st2 == st);
  }
  std::vector<float> out(B * Hq * T * V), st(B * H * K * V), bad_g(B * H * 4);
  Tensor to = mk(out, {B, Hq, T, V}), ts = mk(st, {B, H, K, V}), tsi = mk(s0, {B, H, K, V});
  require_error(gated_delta_rule_out<float_types>(ctx, mk(q, {B, Hq, T, K}), mk(k, {B, H, T, K}), mk(v, {B, H, T, V}),
                                                  mk(bad_g, {B, H, 4}), mk(beta, {B, H, T}), tsi, to, ts),
                "decay");
  require_error(gated_delta_rule_out<float_types>(ctx, mk(q, {B, Hq, T, K}), mk(k, {B, H, T, K}), mk(v, {B, H, T, V}),
                                                  mk(gs, {B, H, T}), mk(beta, {B, H, T}), tsi, to, tsi),
                "must not overlap");
  std::vector<float> q3(B * 3 * T * K), o3(B * 3 * T * V);
  Tensor to3 = mk(o3, {B, 3, T, V});
  require_error(gated_delta_rule_out<float_types>(ctx, mk(q3, {B, 3, T, K}), mk(k, {B, H, T, K}), mk(v, {B, H, T, V}),
                                                  mk(gs, {B, H, T}), mk(beta, {B, H, T}), tsi, to3, ts),
                "multiple of the key head count");
}

namespace {
/// Symmetric group quantization of w [n, k] and its torchao "universal" blob (the layout llama_moe.h reads).
std::vector<uint8_t> pack_universal(const std::vector<float>& w, int64_t n, int64_t k, int64_t gs, int nbit,
                                    std::vector<float>& dequant) {
  const int qmax = (1 << (nbit - 1)) - 1, qmin = -(1 << (nbit - 1));
  std::vector<int8_t> q(n * k);
  std::vector<float> sc(n * (k / gs));
  dequant.assign(n * k, 0.0f);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t g = 0; g < k / gs; ++g) {
      float amax = 0;
      for (int64_t i = 0; i < gs; ++i) amax = std::max(amax, std::fabs(w[r * k + g * gs + i]));
      const float s = std::max(amax / ((qmax - qmin) / 2.0f), 1e-7f);
      sc[r * (k / gs) + g] = s;
      for (int64_t i = 0; i < gs; ++i) {
        const int64_t at = r * k + g * gs + i;
        q[at] = static_cast<int8_t>(std::clamp<float>(std::nearbyint(w[at] / s), qmin, qmax));
        dequant[at] = q[at] * s;
      }
    }
  std::vector<uint8_t> blob(64, 0);
  const int32_t hdr[2] = {6712, 1};
  std::memcpy(blob.data(), hdr, sizeof(hdr));
  auto put = [&](const void* p, size_t nbytes) {
    blob.insert(blob.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + nbytes);
  };
  for (int64_t n0 = 0; n0 < (n + 7) / 8 * 8; n0 += 8)
    for (int64_t g = 0; g < k / gs; ++g) {
      int32_t sums[8] = {};
      for (int64_t c = 0; c < gs / 16; ++c) {
        int8_t vals[128];
        for (int s = 0; s < 2; ++s)
          for (int r = 0; r < 8; ++r)
            for (int i = 0; i < 8; ++i) {
              const int64_t row = n0 + r, col = g * gs + c * 16 + s * 8 + i;
              vals[(s * 8 + r) * 8 + i] = row < n ? q[row * k + col] : 0;
              sums[r] += vals[(s * 8 + r) * 8 + i];
            }
        if (nbit == 8) {
          put(vals, 128);
        } else {
          for (int b = 0; b < 128; b += 32)
            for (int i = 0; i < 16; ++i) {
              const uint8_t lo = static_cast<uint8_t>(vals[b + i] + 8), hi = static_cast<uint8_t>(vals[b + i + 16] + 8);
              blob.push_back(static_cast<uint8_t>((hi << 4) | lo));
            }
        }
      }
      float s8[8];
      for (int r = 0; r < 8; ++r) s8[r] = n0 + r < n ? sc[(n0 + r) * (k / gs) + g] : 0.0f;
      put(s8, sizeof(s8));
      put(sums, sizeof(sums));
    }
  return blob;
}
}  // namespace

TEST_CASE("quantized_moe_ffn: routing, 4- and 8-bit packed experts, refused arguments", "[llama]") {
  KernelContext ctx;
  const int64_t T = 6, D = 32, F = 48, E = 5, K = 2, gs = 16;
  for (int nbit : {4, 8})
    for (bool sigmoid : {true, false}) {
      CAPTURE(nbit, sigmoid);
      auto x = randn(T * D, 90), gate = randn(E * D, 91, 0.3f), bias = randn(E, 92);
      std::vector<uint8_t> p13, p2;
      std::vector<std::vector<float>> w13(E), w2(E);
      for (int64_t e = 0; e < E; ++e) {
        const auto b13 = pack_universal(randn(2 * F * D, 100 + e, 0.2f), 2 * F, D, gs, nbit, w13[e]);
        const auto b2 = pack_universal(randn(D * F, 200 + e, 0.2f), D, F, gs, nbit, w2[e]);
        p13.insert(p13.end(), b13.begin(), b13.end());
        p2.insert(p2.end(), b2.begin(), b2.end());
      }
      const int64_t n13 = static_cast<int64_t>(p13.size()) / E, n2 = static_cast<int64_t>(p2.size()) / E;
      std::vector<float> out(T * D), empty;
      Tensor to = mk(out, {T, D}), tb = sigmoid ? mk(bias, {E}) : mk(empty, {0});
      REQUIRE(quantized_moe_ffn_out<float_types>(ctx, mk(x, {T, D}), mk(gate, {E, D}), tb, mk(p13, {E, n13}),
                                                 mk(p2, {E, n2}), K, E, F, D, gs, nbit,
                                                 sigmoid ? "sigmoid" : "softmax", 2.5, to));
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> sc(E), rank(E);
        for (int64_t e = 0; e < E; ++e) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d) s += static_cast<double>(x[t * D + d]) * gate[e * D + d];
          sc[e] = sigmoid ? 1.0 / (1.0 + std::exp(-s)) : s;
          rank[e] = sc[e] + (sigmoid ? bias[e] : 0.0);
        }
        std::vector<int64_t> order(E);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return rank[a] > rank[b]; });
        std::vector<double> wt(K);
        double sum = 0, mx = -INFINITY;
        for (int64_t j = 0; j < K; ++j) mx = std::max(mx, sc[order[j]]);
        for (int64_t j = 0; j < K; ++j) sum += (wt[j] = sigmoid ? sc[order[j]] : std::exp(sc[order[j]] - mx));
        for (int64_t j = 0; j < K; ++j) wt[j] = sigmoid ? wt[j] * 2.5 / sum : wt[j] / sum;
        std::vector<double> ref(D, 0.0);
        for (int64_t j = 0; j < K; ++j) {
          const int64_t e = order[j];
          std::vector<double> mid(F);
          for (int64_t f = 0; f < F; ++f) {
            double h1 = 0, h3 = 0;
            for (int64_t d = 0; d < D; ++d) {
              h1 += w13[e][f * D + d] * static_cast<double>(x[t * D + d]);
              h3 += w13[e][(F + f) * D + d] * static_cast<double>(x[t * D + d]);
            }
            mid[f] = h1 / (1.0 + std::exp(-h1)) * h3;
          }
          for (int64_t d = 0; d < D; ++d) {
            double acc = 0;
            for (int64_t f = 0; f < F; ++f) acc += w2[e][d * F + f] * mid[f];
            ref[d] += wt[j] * acc;
          }
        }
        for (int64_t d = 0; d < D; ++d) REQUIRE(out[t * D + d] == Approx(ref[d]).epsilon(1e-4).margin(1e-4));
      }
      if (nbit == 4 && sigmoid) {
        auto call = [&](int64_t k_act, int64_t gsz, int64_t nb, std::string_view fn, int64_t dim) {
          return quantized_moe_ffn_out<float_types>(ctx, mk(x, {T, D}), mk(gate, {E, D}), tb, mk(p13, {E, n13}),
                                                    mk(p2, {E, n2}), k_act, E, F, dim, gsz, nb, fn, 2.5, to);
        };
        require_error(call(0, gs, 4, "sigmoid", D), "num_activated_experts 0");
        require_error(call(K, 12, 4, "sigmoid", D), "group_size 12");
        require_error(call(K, 64, 4, "sigmoid", D), "group_size 64");
        require_error(call(K, gs, 3, "sigmoid", D), "weight_nbit must be 4 or 8");
        require_error(call(K, gs, 8, "sigmoid", D), "bytes per expert, too few");
        require_error(call(K, gs, 4, "softmax", D), "expert_bias is only supported");
        require_error(call(K, gs, 4, "relu", D), "score_func");
        require_error(call(K, gs, 4, "sigmoid", 16), "dim = 16");
        // An absurd hidden_dim must not overflow the size check into reading past the blobs, nor overflow forming
        // its 2 * hidden_dim rows (2^62: a fuzz finding, signed overflow under UBSan).
        for (int64_t huge : {int64_t{1} << 60, int64_t{1} << 62})
          require_error(quantized_moe_ffn_out<float_types>(ctx, mk(x, {T, D}), mk(gate, {E, D}), tb,
                                                           mk(p13, {E, n13}), mk(p2, {E, n2}), K, E, huge, D, gs, 4,
                                                           "sigmoid", 2.5, to),
                        "cannot fit packed_w13");
        std::vector<uint8_t> bad = p13;
        bad[0] = 0;
        require_error(quantized_moe_ffn_out<float_types>(ctx, mk(x, {T, D}), mk(gate, {E, D}), tb, mk(bad, {E, n13}),
                                                         mk(p2, {E, n2}), K, E, F, D, gs, 4, "sigmoid", 2.5, to),
                      "not a torchao universal");
      }
    }
}

TEST_CASE("llama operators are registered with their slot counts and written arguments", "[llama]") {
  auto entry = [](std::string_view name) -> const KernelEntry* {
    for (const auto& e : etrt::generated::portable_kernels())
      if (e.name == name) return &e;
    return nullptr;
  };
  struct Want { const char* name; int slots; uint64_t mutable_mask; };  // mask: argument slots the kernel writes
  const Want wants[] = {
      {"llama::update_cache.out", 5, 0b1010},
      {"llama::update_cache_with_indices.out", 6, 0b10010},
      {"llama::sdpa_with_kv_cache.out", 13, (1u << 3) | (1u << 4) | (1u << 11)},
      {"llama::custom_sdpa.out", 10, 1u << 8},
      {"llama::custom_quantized_sdpa.out", 17, 1u << 15},
      {"llama::fast_hadamard_transform.out", 3, 0b10},
      {"llama::fallback.out", 3, 0b10},
      {"llama::gated_delta_rule.out", 9, 0b11000000},
      {"llama::channelwise_gated_delta_rule.out", 9, 0b11000000},
      {"llama::quantized_moe_ffn.out", 15, 1u << 13},
  };
  for (const Want& w : wants) {
    CAPTURE(w.name);
    const KernelEntry* e = entry(w.name);
    REQUIRE(e);
    CHECK(e->num_slots == w.slots);
    CHECK(e->mutable_slots == w.mutable_mask);
  }
}
