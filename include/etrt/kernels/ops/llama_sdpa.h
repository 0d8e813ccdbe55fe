// llama::custom_sdpa.out, llama::sdpa_with_kv_cache.out and llama::custom_quantized_sdpa.out: attention of the
// new query rows over a KV cache read in place.
//
// Layouts: query [B, S, H, D], key / value caches [B, S_max, H_kv, D] (sequence at dim 1; with is_seq_at_dim_2
// every operand is [B, H, S, D] instead). H must be a multiple of H_kv (grouped-query attention: query head h reads
// cache head h / (H / H_kv)). start_pos is the absolute position of the first query row.
//
// Without attn_mask, query row i (position start_pos + i) attends to cache rows [0, start_pos + S); is_causal limits
// it to rows [0, start_pos + i]. With attn_mask (a float [S, S_max] additive mask; is_causal must then be false) it
// attends to every cache row: scores = q.k * scale + mask. scale defaults to 1 / sqrt(D); dropout is ignored (these
// are inference kernels). The softmax weights are applied to the values and the result divided by the row sum, as
// upstream's flash attention does; a row whose every score is -inf gives NaN, as torch's does.
//
// custom_quantized_sdpa takes int8 q / k / v with a float scale and an int8 zero point per (batch, position, head):
// x = (q - zero_point) * scale. The output is float32.
//
// sdpa_with_kv_cache first writes key / value [B, S, H_kv, D] into the caches at rows [start_pos, start_pos + S)
// (checked before anything is written), then attends like custom_sdpa.
//
// Work is split into (batch, kv head, block of query rows) tasks. Float operands are read where they are; Half,
// BFloat16 and int8 rows are widened to float per task. Blocks of several rows use the blocked GEMM; decode-size
// blocks (a few rows) take every query head of a KV group together, so each cache row is read once per step, with
// plain dot products (AVX2 + FMA when the CPU has them) that avoid packing the cache.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "etrt/kernels/ops/llama_common.h"
#include "etrt/kernels/ops/llama_kv_cache.h"
#include "etrt/kernels/util/fast_math.h"
#include "etrt/kernels/util/gemm.h"
#include "etrt/kernels/util/parallel.h"
#include "etrt/kernels/util/vec.h"

namespace etrt::kernels {

namespace llama::sdpa {

/// Element strides of one operand (head_dim is contiguous) plus, for int8, its per-row quantization parameters.
struct Operand {
  const void* data = nullptr;
  ScalarType dtype = ScalarType::Float;
  int64_t sb = 0, ss = 0, sh = 0;
  const float* scale = nullptr;
  const int8_t* zp = nullptr;
  int64_t psb = 0, pss = 0, psh = 0;  // scale strides
  int64_t zsb = 0, zss = 0, zsh = 0;  // zero point strides
};

inline Operand operand(const Tensor& t, bool seq_at_2) {
  Operand o;
  o.data = t.data();
  o.dtype = t.dtype();
  o.sb = t.stride(0);
  o.ss = t.stride(seq_at_2 ? 2 : 1);
  o.sh = t.stride(seq_at_2 ? 1 : 2);
  return o;
}

struct Problem {
  int64_t B = 0, H = 0, Hkv = 0, D = 0, S = 0, n_kv = 0, start_pos = 0;
  bool causal = false;
  float scale = 1.0f;
  const float* mask = nullptr;
  int64_t mask_rs = 0;
  Operand q, k, v;
  void* out = nullptr;
  ScalarType out_dtype = ScalarType::Float;
  int64_t osb = 0, oss = 0, osh = 0;
};

/// Rows [s0, s0 + n) of head h of batch line b as float: in place for float operands (row stride `rs`), otherwise
/// widened (or dequantized) into `scratch` (row stride D).
inline const float* rows_f32(const Operand& o, int64_t b, int64_t h, int64_t s0, int64_t n, int64_t D,
                             std::vector<float>& scratch, int64_t& rs) {
  const int64_t base = b * o.sb + h * o.sh + s0 * o.ss;
  if (o.dtype == ScalarType::Float) {
    rs = o.ss;
    return static_cast<const float*>(o.data) + base;
  }
  rs = D;
  if (scratch.size() < static_cast<size_t>(n * D)) scratch.resize(static_cast<size_t>(n * D));
  float* dst = scratch.data();
  for (int64_t r = 0; r < n; ++r) {
    const int64_t off = base + r * o.ss;
    float* d = dst + r * D;
    switch (o.dtype) {
      case ScalarType::Half: {
        const Half* src = static_cast<const Half*>(o.data) + off;
        for (int64_t i = 0; i < D; ++i) d[i] = static_cast<float>(src[i]);
        break;
      }
      case ScalarType::BFloat16: {
        const BFloat16* src = static_cast<const BFloat16*>(o.data) + off;
        for (int64_t i = 0; i < D; ++i) d[i] = static_cast<float>(src[i]);
        break;
      }
      default: {  // Char: dequantize with this row's parameters
        const int8_t* src = static_cast<const int8_t*>(o.data) + off;
        const int64_t s = s0 + r;
        const float sc = o.scale[b * o.psb + s * o.pss + h * o.psh];
        const int32_t z = o.zp[b * o.zsb + s * o.zss + h * o.zsh];
        for (int64_t i = 0; i < D; ++i) d[i] = static_cast<float>(static_cast<int32_t>(src[i]) - z) * sc;
        break;
      }
    }
  }
  return dst;
}

// Decode-size blocks: the few query rows of every head of a KV group (R rows in all) against the keys read in place.
// Scores take four keys per pass, each a register of partial sums reduced once; values keep NR registers of the
// output row and run along the keys once, each value row's registers loaded together. Both prefetch the cache rows a
// few keys ahead (prefetch_row). A key whose weight is 0 (causally masked, or its exponential underflowed) is
// skipped, as the scalar form did: a NaN in an unused cache row never reaches the output. Compiled for AVX2 + FMA
// too and picked at run time, like the GEMM micro-kernels.
template <int Lanes>
[[gnu::always_inline]] inline float lanes_sum(const vec::Vec<Lanes>& v) {
  float s[Lanes];
  std::memcpy(s, &v, sizeof s);
  for (int w = Lanes / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) s[l] += s[l + w];
  return s[0];
}
/// Hints the cache rows `n` floats long from `row` (a key or value row a few keys ahead: the cache rows of one head
/// are a whole row of every head apart, a stride the hardware prefetchers follow poorly, and after the weights of a
/// decode step have streamed through the caches they come from memory).
[[gnu::always_inline]] inline void prefetch_row(const float* row, int64_t n) {
  for (int64_t t = 0; t < n; t += 16) __builtin_prefetch(row + t);
}
template <int Lanes>
[[gnu::always_inline]] inline void group_scores_body(const float* Q, int64_t R, int64_t D, const float* K, int64_t krs,
                                                     int64_t nk, float* s) {
  using V = vec::Vec<Lanes>;
  const int64_t dv = D / Lanes * Lanes;
  for (int64_t r = 0; r < R; ++r) {
    const float* q = Q + r * D;
    int64_t j = 0;
    for (; j + 4 <= nk; j += 4) {
      for (int64_t ahead = j + 8; ahead < std::min(j + 12, nk); ++ahead) prefetch_row(K + ahead * krs, D);
      const float* k0 = K + j * krs;
      const float* k1 = k0 + krs;
      const float* k2 = k1 + krs;
      const float* k3 = k2 + krs;
      V a0{}, a1{}, a2{}, a3{}, qv, kv;
      for (int64_t t = 0; t < dv; t += Lanes) {
        vec::load(qv, q + t);
        vec::load(kv, k0 + t);
        a0 += qv * kv;
        vec::load(kv, k1 + t);
        a1 += qv * kv;
        vec::load(kv, k2 + t);
        a2 += qv * kv;
        vec::load(kv, k3 + t);
        a3 += qv * kv;
      }
      float d0 = lanes_sum<Lanes>(a0), d1 = lanes_sum<Lanes>(a1), d2 = lanes_sum<Lanes>(a2),
            d3 = lanes_sum<Lanes>(a3);
      for (int64_t t = dv; t < D; ++t) {
        d0 += q[t] * k0[t];
        d1 += q[t] * k1[t];
        d2 += q[t] * k2[t];
        d3 += q[t] * k3[t];
      }
      float* out = s + r * nk + j;
      out[0] = d0;
      out[1] = d1;
      out[2] = d2;
      out[3] = d3;
    }
    for (; j < nk; ++j) s[r * nk + j] = dot_lanes(q, K + j * krs, D);
  }
}
/// acc (NR registers wide) = sum over keys of p[j] x V[j], the keys in one pass, each row's NR registers loaded together.
template <int Lanes, int NR>
[[gnu::always_inline]] inline void values_block(const float* p, int64_t nk, const float* V, int64_t vrs, float* a) {
  using Vv = vec::Vec<Lanes>;
  constexpr int64_t kAhead = 4;
  Vv s[NR] = {};
  for (int64_t j = 0; j < nk; ++j) {
    if (j + kAhead < nk) prefetch_row(V + (j + kAhead) * vrs, NR * Lanes);
    const float w = p[j];
    if (w == 0.0f) continue;
    const float* row = V + j * vrs;
    for (int i = 0; i < NR; ++i) {
      Vv x;
      vec::load(x, row + i * Lanes);
      s[i] += w * x;
    }
  }
  for (int i = 0; i < NR; ++i) vec::store(a + i * Lanes, s[i]);
}
template <int Lanes>
[[gnu::always_inline]] inline void group_values_body(const float* P, int64_t R, int64_t nk, const float* V, int64_t vrs,
                                                     int64_t D, float* acc) {
  constexpr int64_t kRegs = 8;  // registers of output columns per pass over the keys
  const int64_t dv = D / Lanes * Lanes;
  for (int64_t r = 0; r < R; ++r) {
    const float* p = P + r * nk;
    float* a = acc + r * D;
    for (int64_t t = 0; t < dv; t += kRegs * Lanes) {
      switch (std::min<int64_t>(kRegs, (dv - t) / Lanes)) {
        case 8: values_block<Lanes, 8>(p, nk, V + t, vrs, a + t); break;
        case 7: values_block<Lanes, 7>(p, nk, V + t, vrs, a + t); break;
        case 6: values_block<Lanes, 6>(p, nk, V + t, vrs, a + t); break;
        case 5: values_block<Lanes, 5>(p, nk, V + t, vrs, a + t); break;
        case 4: values_block<Lanes, 4>(p, nk, V + t, vrs, a + t); break;
        case 3: values_block<Lanes, 3>(p, nk, V + t, vrs, a + t); break;
        case 2: values_block<Lanes, 2>(p, nk, V + t, vrs, a + t); break;
        default: values_block<Lanes, 1>(p, nk, V + t, vrs, a + t); break;
      }
    }
    for (int64_t t = dv; t < D; ++t) {
      float sum = 0.0f;
      for (int64_t j = 0; j < nk; ++j)
        if (p[j] != 0.0f) sum += p[j] * V[j * vrs + t];
      a[t] = sum;
    }
  }
}
#ifdef ETRT_ISA_X86
[[ETRT_TARGET_AVX2]] inline void group_scores_avx2(const float* Q, int64_t R, int64_t D, const float* K,
                                                          int64_t krs, int64_t nk, float* s) {
  group_scores_body<8>(Q, R, D, K, krs, nk, s);
}
[[ETRT_TARGET_AVX2]] inline void group_values_avx2(const float* P, int64_t R, int64_t nk, const float* V,
                                                          int64_t vrs, int64_t D, float* acc) {
  group_values_body<8>(P, R, nk, V, vrs, D, acc);
}
#endif
inline void group_scores(const float* Q, int64_t R, int64_t D, const float* K, int64_t krs, int64_t nk, float* s) {
#ifdef ETRT_ISA_X86
  if (isa::level() >= isa::kAvx2) return group_scores_avx2(Q, R, D, K, krs, nk, s);
#endif
  group_scores_body<4>(Q, R, D, K, krs, nk, s);
}
inline void group_values(const float* P, int64_t R, int64_t nk, const float* V, int64_t vrs, int64_t D, float* acc) {
#ifdef ETRT_ISA_X86
  if (isa::level() >= isa::kAvx2) return group_values_avx2(P, R, nk, V, vrs, D, acc);
#endif
  group_values_body<4>(P, R, nk, V, vrs, D, acc);
}

/// C (m x n, row stride ldc) = A (m x k) * B^T where B is n x k; row strides lda / ldb, unit column stride.
inline void matmul_abt(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                       float* c, int64_t ldc) {
  if (m < 4 || m * n * k <= 4096) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = dot_lanes(a + i * lda, b + j * ldb, k);
    return;
  }
  gemm::detail::scale_c<float>(m, n, 0.0f, c, ldc, 1);
  gemm::detail::blocked<float>(m, n, k, 1.0f, gemm::MatRef<float>{a, lda, 1}, gemm::MatRef<float>{b, 1, ldb}, c, ldc,
                               1);
}

/// C (m x n) = P (m x k) * V (k x n); P row stride ldp, V row stride ldv.
inline void matmul_pv(int64_t m, int64_t n, int64_t k, const float* p, int64_t ldp, const float* v, int64_t ldv,
                      float* c, int64_t ldc) {
  gemm::detail::scale_c<float>(m, n, 0.0f, c, ldc, 1);
  if (m < 4 || m * n * k <= 4096) {
    for (int64_t i = 0; i < m; ++i) {
      float* ci = c + i * ldc;
      for (int64_t j = 0; j < k; ++j) {
        const float w = p[i * ldp + j];
        if (w == 0.0f) continue;  // causally masked keys (exactly zero weight)
        const float* vj = v + j * ldv;
        for (int64_t t = 0; t < n; ++t) ci[t] += w * vj[t];
      }
    }
    return;
  }
  gemm::detail::blocked<float>(m, n, k, 1.0f, gemm::MatRef<float>{p, ldp, 1}, gemm::MatRef<float>{v, ldv, 1}, c, ldc,
                               1);
}

inline void store_row(ScalarType dt, void* out, int64_t off, const float* src, int64_t n, float mul) {
  switch (dt) {
    case ScalarType::Half: {
      Half* d = static_cast<Half*>(out) + off;
      for (int64_t i = 0; i < n; ++i) d[i] = Half(src[i] * mul);
      break;
    }
    case ScalarType::BFloat16: {
      BFloat16* d = static_cast<BFloat16*>(out) + off;
      for (int64_t i = 0; i < n; ++i) d[i] = BFloat16(src[i] * mul);
      break;
    }
    default: {
      float* d = static_cast<float*>(out) + off;
      for (int64_t i = 0; i < n; ++i) d[i] = src[i] * mul;
      break;
    }
  }
}

inline constexpr int64_t kQueryBlock = 32;
inline constexpr int64_t kGroupRows = 16;  // at most this many rows per KV group take the decode path

/// scores <- softmax over the first `lim` entries of one row of scaled (and masked) scores; entries [lim, nk) <- 0.
/// Returns 1 / (sum of the exponentials): the weights are left unnormalized, as upstream applies the sum last.
inline float softmax_row(float* s, int64_t lim, int64_t nk, float scale, const float* mask_row) {
  if (mask_row) {
    for (int64_t j = 0; j < lim; ++j) s[j] = s[j] * scale + mask_row[j];
  } else {
    for (int64_t j = 0; j < lim; ++j) s[j] *= scale;
  }
  const float mx = lim > 0 ? max_lanes(s, lim) : -std::numeric_limits<float>::infinity();
  const float sum = exp_shift_sum(s, s, lim, mx);
  for (int64_t j = lim; j < nk; ++j) s[j] = 0.0f;
  return 1.0f / sum;
}

/// The per-thread buffers of run(): kept between calls (they only grow), so a decode step allocates nothing.
struct Buffers {
  std::vector<float> kbuf, vbuf, qbuf, qgroup, scores, acc, inv_sum;
};
inline Buffers& thread_buffers() {
  thread_local Buffers b;
  return b;
}

/// Runs the attention of `p` (arguments already validated).
inline void run(const Problem& p) {
  const int64_t rep = p.H / p.Hkv, blocks = (p.S + kQueryBlock - 1) / kQueryBlock;
  const int64_t tasks = p.B * p.Hkv * blocks;
  if (tasks == 0 || p.D == 0) return;
  auto work = [&](int64_t t0, int64_t t1) {
    auto& [kbuf, vbuf, qbuf, qgroup, scores, acc, inv_sum] = thread_buffers();
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t blk = t % blocks, g = (t / blocks) % p.Hkv, b = t / (blocks * p.Hkv);
      const int64_t m0 = blk * kQueryBlock, rows = std::min(kQueryBlock, p.S - m0);
      // Keys this block can see: causal rows stop at their own position.
      const int64_t nk = p.causal ? std::min(p.start_pos + m0 + rows, p.n_kv) : p.n_kv;
      int64_t krs = 0, vrs = 0, qrs = 0;
      const float* K = rows_f32(p.k, b, g, 0, nk, p.D, kbuf, krs);
      const float* V = rows_f32(p.v, b, g, 0, nk, p.D, vbuf, vrs);
      // Row r of a head's block is query position m0 + r; a causal row sees keys [0, start_pos + m0 + r].
      auto limit = [&](int64_t r) { return p.causal ? std::min(p.start_pos + m0 + r + 1, nk) : nk; };
      auto mask_row = [&](int64_t r) { return p.mask ? p.mask + (m0 + r) * p.mask_rs : nullptr; };
      const bool grouped = rows < 4 && rep * rows <= kGroupRows;
      const int64_t R = grouped ? rep * rows : rows;  // rows handled together
      scores.resize(static_cast<size_t>(R * std::max<int64_t>(nk, 1)));
      acc.resize(static_cast<size_t>(R * p.D));
      inv_sum.resize(static_cast<size_t>(R));
      if (grouped) {  // decode: every head of the group at once, each cache row read once
        qgroup.resize(static_cast<size_t>(R * p.D));
        for (int64_t hl = 0; hl < rep; ++hl) {
          const float* Q = rows_f32(p.q, b, g * rep + hl, m0, rows, p.D, qbuf, qrs);
          for (int64_t r = 0; r < rows; ++r)
            std::copy(Q + r * qrs, Q + r * qrs + p.D, qgroup.begin() + (hl * rows + r) * p.D);
        }
        group_scores(qgroup.data(), R, p.D, K, krs, nk, scores.data());
        for (int64_t i = 0; i < R; ++i)
          inv_sum[static_cast<size_t>(i)] =
              softmax_row(scores.data() + i * nk, limit(i % rows), nk, p.scale, mask_row(i % rows));
        group_values(scores.data(), R, nk, V, vrs, p.D, acc.data());
        for (int64_t i = 0; i < R; ++i)
          store_row(p.out_dtype, p.out, b * p.osb + (g * rep + i / rows) * p.osh + (m0 + i % rows) * p.oss,
                    acc.data() + i * p.D, p.D, inv_sum[static_cast<size_t>(i)]);
        continue;
      }
      for (int64_t hl = 0; hl < rep; ++hl) {  // prefill: one head at a time through the blocked GEMM
        const int64_t h = g * rep + hl;
        const float* Q = rows_f32(p.q, b, h, m0, rows, p.D, qbuf, qrs);
        if (nk > 0) matmul_abt(rows, nk, p.D, Q, qrs, K, krs, scores.data(), nk);
        for (int64_t r = 0; r < rows; ++r)
          inv_sum[static_cast<size_t>(r)] = softmax_row(scores.data() + r * nk, limit(r), nk, p.scale, mask_row(r));
        matmul_pv(rows, p.D, nk, scores.data(), nk, V, vrs, acc.data(), p.D);
        for (int64_t r = 0; r < rows; ++r)
          store_row(p.out_dtype, p.out, b * p.osb + h * p.osh + (m0 + r) * p.oss, acc.data() + r * p.D, p.D,
                    inv_sum[static_cast<size_t>(r)]);
      }
    }
  };
  // Threads only pay off for prefill-size work (a decode step over a short cache takes microseconds).
  const int64_t macs = p.B * p.H * p.S * std::max<int64_t>(p.n_kv, 1) * p.D * 2;
  if (macs < (int64_t{1} << 21)) work(0, tasks);
  else parallel_for(tasks, 1, work);
}

/// Checks int8 operand `t` and its [.., 1]-shaped scale / zero point, and records them in `o`.
inline Status set_qparams(std::string_view op, Operand& o, const Tensor& t, const Tensor* zp, const Tensor* sc,
                          bool seq_at_2, std::string_view what) {
  if (!zp || !sc)
    return fail(Error::InvalidArgument, op, ": int8 ", what, " needs its scales and zero points (got None)");
  ETRT_CHECK_OK(check_dtype(op, *sc, ScalarType::Float, cat(what, " scales")));
  ETRT_CHECK_OK(check_dtype(op, *zp, ScalarType::Char, cat(what, " zero points")));
  for (const Tensor* p : {sc, zp}) {
    if (p->dim() != 4)
      return fail(Error::InvalidArgument, op, ": ", what, " quantization parameters must be 4-D, got ", p->describe());
    for (int d = 0; d < 3; ++d)
      if (p->size(d) != t.size(d))
        return fail(Error::InvalidArgument, op, ": ", what, " quantization parameters ", p->describe(),
                    " must match ", what, " ", t.describe(), " in every dim but the last");
    if (p->size(3) < 1)
      return fail(Error::InvalidArgument, op, ": ", what, " quantization parameters ", p->describe(),
                  " hold no value per row");
  }
  const int sd = seq_at_2 ? 2 : 1, hd = seq_at_2 ? 1 : 2;
  o.scale = sc->data_as<const float>();
  o.zp = zp->data_as<const int8_t>();
  o.psb = sc->stride(0), o.pss = sc->stride(sd), o.psh = sc->stride(hd);
  o.zsb = zp->stride(0), o.zss = zp->stride(sd), o.zsh = zp->stride(hd);
  return {};
}

struct QParams {
  const Tensor *q_zp = nullptr, *q_sc = nullptr, *k_zp = nullptr, *k_sc = nullptr, *v_zp = nullptr, *v_sc = nullptr;
};

/// Validates the attention arguments and fills `p`, resizing `out` to q's shape. Nothing is computed or written.
inline Status prepare(std::string_view op, KernelContext& ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                      int64_t start_pos, const Tensor* attn_mask, bool is_causal, std::optional<double> scale,
                      Tensor& out, bool seq_at_2, const QParams* qp, Problem& p) {
  if (attn_mask && is_causal)
    return fail(Error::InvalidArgument, op, ": attn_mask and is_causal cannot both be set");
  ETRT_CHECK_OK(check_rank(op, q, 4, "query"));
  ETRT_CHECK_OK(check_rank(op, k, 4, "key"));
  ETRT_CHECK_OK(check_rank(op, v, 4, "value"));
  ETRT_CHECK_OK(check_contiguous(op, q, "query"));
  ETRT_CHECK_OK(check_contiguous(op, k, "key"));
  ETRT_CHECK_OK(check_contiguous(op, v, "value"));
  const ScalarType qt = q.dtype();
  const bool quant = qt == ScalarType::Char;
  if (quant && !qp)
    return fail(Error::InvalidArgument, op, ": query is int8; quantized attention is llama::custom_quantized_sdpa");
  if (qt != ScalarType::Float && qt != ScalarType::Half && qt != ScalarType::BFloat16 && !quant)
    return fail(Error::InvalidArgument, op, ": query must be float32, float16 or bfloat16", qp ? " (or int8)" : "",
                ", got ", name(qt));
  ETRT_CHECK_OK(check_same_dtype(op, k, q, "key", "query"));
  ETRT_CHECK_OK(check_same_dtype(op, v, q, "value", "query"));
  const int sd = seq_at_2 ? 2 : 1, hd = seq_at_2 ? 1 : 2;
  p.B = q.size(0), p.H = q.size(hd), p.S = q.size(sd), p.D = q.size(3);
  p.Hkv = k.size(hd);
  const int64_t cache_len = k.size(sd);
  if (k.size(0) != p.B || v.size(0) != p.B)
    return fail(Error::InvalidArgument, op, ": query ", q.describe(), ", key ", k.describe(), " and value ",
                v.describe(), " must have the same batch size");
  if (k.size(3) != p.D || v.size(3) != p.D)
    return fail(Error::InvalidArgument, op, ": query, key and value must have the same head dim, got ", q.describe(),
                ", ", k.describe(), ", ", v.describe());
  if (v.size(hd) != p.Hkv || v.size(sd) != cache_len)
    return fail(Error::InvalidArgument, op, ": key ", k.describe(), " and value ", v.describe(),
                " must have the same shape");
  if (p.Hkv <= 0 || p.H % p.Hkv != 0)
    return fail(Error::InvalidArgument, op, ": the query head count ", p.H, " must be a multiple of the key/value head count ",
                p.Hkv);
  if (attn_mask) {
    const Tensor& m = *attn_mask;
    ETRT_CHECK_OK(check_rank(op, m, 2, "attn_mask"));
    ETRT_CHECK_OK(check_dtype(op, m, ScalarType::Float, "attn_mask"));
    if (m.size(0) != p.S || m.size(1) != cache_len)
      return fail(Error::InvalidArgument, op, ": attn_mask ", m.describe(), " must be [seq_len, cache length] = [", p.S,
                  ", ", cache_len, "]");
    if (m.numel() > 0 && m.stride(1) != 1)
      return fail(Error::InvalidArgument, op, ": attn_mask ", m.describe(), " must be in contiguous dim order");
    p.mask = m.data_as<const float>();
    p.mask_rs = m.stride(0);
    p.n_kv = cache_len;  // a mask covers the whole cache
    if (m.numel() == 0) p.mask = nullptr;
  } else {
    ETRT_CHECK_OK(check_window(op, start_pos, p.S, cache_len, "key/value cache"));
    p.n_kv = start_pos + p.S;
  }
  p.start_pos = start_pos;
  p.causal = is_causal;
  p.scale = static_cast<float>(scale ? *scale : 1.0 / std::sqrt(static_cast<double>(p.D)));
  p.q = operand(q, seq_at_2), p.k = operand(k, seq_at_2), p.v = operand(v, seq_at_2);
  if (quant) {
    ETRT_CHECK_OK(set_qparams(op, p.q, q, qp->q_zp, qp->q_sc, seq_at_2, "query"));
    ETRT_CHECK_OK(set_qparams(op, p.k, k, qp->k_zp, qp->k_sc, seq_at_2, "key"));
    ETRT_CHECK_OK(set_qparams(op, p.v, v, qp->v_zp, qp->v_sc, seq_at_2, "value"));
  }
  const ScalarType want_out = quant ? ScalarType::Float : qt;
  if (out.dtype() != want_out)
    return fail(Error::InvalidArgument, op, ": out must be ", name(want_out), ", got ", name(out.dtype()));
  ETRT_CHECK_OK(ctx.resize(op, out, q.sizes()));
  ETRT_CHECK_OK(check_contiguous(op, out, "out"));
  p.out = out.data();
  p.out_dtype = out.dtype();
  p.osb = out.stride(0), p.oss = out.stride(sd), p.osh = out.stride(hd);
  return {};
}

}  // namespace llama::sdpa

template <class Dtypes>
Status custom_sdpa_out(KernelContext& ctx, const Tensor& query, const Tensor& key, const Tensor& value,
                       int64_t start_pos, const Tensor* attn_mask, double drpout_p, bool is_causal,
                       std::optional<double> scale, Tensor& out) {
  (void)drpout_p;
  llama::sdpa::Problem p;
  ETRT_CHECK_OK(llama::sdpa::prepare("llama::custom_sdpa.out", ctx, query, key, value, start_pos, attn_mask,
                                     is_causal, scale, out, false, nullptr, p));
  llama::sdpa::run(p);
  return {};
}

template <class Dtypes>
Status custom_quantized_sdpa_out(KernelContext& ctx, const Tensor& query, const Tensor& key, const Tensor& value,
                                 int64_t start_pos, const Tensor* attn_mask, double drpout_p, bool is_causal,
                                 std::optional<double> scale, const Tensor* q_zero_points, const Tensor* q_scales,
                                 const Tensor* k_zero_points, const Tensor* k_scales, const Tensor* v_zero_points,
                                 const Tensor* v_scales, bool is_seq_at_dim_2, Tensor& out) {
  (void)drpout_p;
  const llama::sdpa::QParams qp{q_zero_points, q_scales, k_zero_points, k_scales, v_zero_points, v_scales};
  llama::sdpa::Problem p;
  ETRT_CHECK_OK(llama::sdpa::prepare("llama::custom_quantized_sdpa.out", ctx, query, key, value, start_pos, attn_mask,
                                     is_causal, scale, out, is_seq_at_dim_2, &qp, p));
  llama::sdpa::run(p);
  return {};
}

template <class Dtypes>
Status sdpa_with_kv_cache_out(KernelContext& ctx, const Tensor& query, const Tensor& key, const Tensor& value,
                              Tensor& key_cache, Tensor& value_cache, int64_t start_pos, int64_t seq_len,
                              const Tensor* attn_mask, double drpout_p, bool is_causal, std::optional<double> scale,
                              Tensor& out) {
  (void)drpout_p;
  constexpr std::string_view op = "llama::sdpa_with_kv_cache.out";
  // Everything is checked before the caches are written.
  ETRT_CHECK_OK(llama::detail::check_cache_pair(op, key, key_cache));
  ETRT_CHECK_OK(llama::detail::check_cache_pair(op, value, value_cache));
  ETRT_CHECK_OK(llama::check_window(op, start_pos, seq_len, key_cache.size(1), "key cache"));
  ETRT_CHECK_OK(llama::check_window(op, start_pos, seq_len, value_cache.size(1), "value cache"));
  ETRT_CHECK_OK(llama::check_window(op, start_pos, key.size(1), key_cache.size(1), "key cache"));
  ETRT_CHECK_OK(llama::check_window(op, start_pos, value.size(1), value_cache.size(1), "value cache"));
  llama::sdpa::Problem p;
  ETRT_CHECK_OK(llama::sdpa::prepare(op, ctx, query, key_cache, value_cache, start_pos, attn_mask, is_causal, scale,
                                     out, false, nullptr, p));
  ETRT_CHECK_OK(update_cache_out<Dtypes>(ctx, key, key_cache, start_pos, out));
  ETRT_CHECK_OK(update_cache_out<Dtypes>(ctx, value, value_cache, start_pos, out));
  llama::sdpa::run(p);
  return {};
}

}  // namespace etrt::kernels
