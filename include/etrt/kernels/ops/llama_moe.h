// llama::quantized_moe_ffn.out: a mixture-of-experts SwiGLU feed-forward with group-quantized expert weights.
//
// x [T, D] float32; gate_weight [E, D] float32 (the router); expert_bias [E] or empty; packed_w13 [E, bytes] and
// packed_w2 [E, bytes] uint8, one blob per expert. Per token:
//   scores = x gate_weight^T
//   sigmoid: p = sigmoid(scores); the top num_activated_experts of p + expert_bias are picked (ties: lower expert
//            first) and weighted by p / max(sum of the picked p, FLT_MIN) * route_scale
//   softmax: the top experts of the raw scores, weighted by the softmax of their scores (expert_bias not allowed)
//   out = sum over picked experts e (in expert order) of weight_e * W2_e (silu(h1) * h3), [h1; h3] = W13_e x
// W13_e is [2F, D] (w1 rows then w3 rows), W2_e is [D, F] (F = hidden_dim), both symmetric group-quantized along their
// input dim (group_size values share a float scale; no zero points): w = q * scale.
//
// Blob layout (torchao's "universal" packing for linear_8bit_act_xbit_weight, nr = 8, kr = 16, sr = 2): a 64-byte
// header of int32s (magic 6712, format 1, then format parameters), then for every block of 8 output rows (the last
// padded with zero rows) and every group along the input dim: group_size / 16 chunks of 8 x 16 values, each stored
// as the first 8 values of each of the 8 rows followed by the last 8 of each row (128 values), then the group's 8
// float scales and 8 int32 row sums of the quantized values. 8-bit values are stored as int8; 4-bit values are
// stored with +8 added, as nibbles: in every 32 values, byte i (i < 16) holds value i in its low nibble and value
// i + 16 in its high nibble.
//
// The products are computed like upstream's portable (non-Arm) path: weights dequantized to float, float dot
// products. Blocks of 8 rows are unpacked one at a time, so no expert's weights are ever fully expanded.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "etrt/kernels/ops/llama_common.h"
#include "etrt/kernels/util/fast_math.h"  // dot_lanes

namespace etrt::kernels {

namespace llama::moe {

inline constexpr int kNr = 8, kKr = 16, kSr = 2;
inline constexpr int64_t kHeaderBytes = 64;
inline constexpr int32_t kMagic = 6712, kUniversalFormat = 1;

/// Bytes of one packed row (values, plus the scale and row sum of each group) of a [n, k] matrix.
inline int64_t packed_row_bytes(int64_t k, int64_t group_size, int nbit) {
  return k / 8 * nbit + (k / group_size) * (4 + 4);
}

inline Status check_blob(std::string_view op, const uint8_t* blob, int64_t have, int64_t n, int64_t k,
                         int64_t group_size, int nbit, std::string_view what, int64_t expert) {
  // Rows are padded to a multiple of 8. n and k are bounded by `have` before any product is formed.
  const int64_t rows = n <= have ? (n + kNr - 1) / kNr * kNr : 0;
  const int64_t per_row = k <= 2 * have ? packed_row_bytes(k, group_size, nbit) : 0;
  if (have < kHeaderBytes || rows == 0 || per_row <= 0 || rows > (have - kHeaderBytes) / per_row)
    return fail(Error::InvalidArgument, op, ": ", what, " holds ", have, " bytes per expert, too few for an [", n,
                ", ", k, "] matrix of ", nbit, "-bit weights in groups of ", group_size, " (a ", kHeaderBytes,
                "-byte header, then ", per_row > 0 ? cat(per_row, " bytes per row") : std::string("its rows"),
                " for ", n, " rows padded to a multiple of 8)");
  int32_t magic, format;
  std::memcpy(&magic, blob, 4);
  std::memcpy(&format, blob + 4, 4);
  if (magic != kMagic || format != kUniversalFormat)
    return fail(Error::InvalidArgument, op, ": ", what, " of expert ", expert,
                " is not a torchao universal packed-weights blob (header ", magic, "/", format, ")");
  return {};
}

/// Dequantizes rows [n0, n0 + 8) of the packed [n, k] matrix (rows past n come out as zeros) into w [8, k].
inline void unpack_block(const uint8_t* data, int64_t n0, int64_t k, int64_t group_size, int nbit, float* w) {
  const int64_t groups = k / group_size;
  const uint8_t* p = data + n0 / kNr * kNr * packed_row_bytes(k, group_size, nbit);
  int8_t vals[kNr * kKr];
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t chunks = group_size / kKr;
    const uint8_t* scales_at = p + chunks * (kNr * kKr * nbit / 8);
    float sc[kNr];
    std::memcpy(sc, scales_at, sizeof(sc));
    for (int64_t c = 0; c < chunks; ++c) {
      if (nbit == 8) {
        std::memcpy(vals, p, sizeof(vals));
        p += kNr * kKr;
      } else {
        for (int q = 0; q < kNr * kKr; q += 32) {
          for (int i = 0; i < 16; ++i) {
            vals[q + i] = static_cast<int8_t>((p[i] & 0x0F) - 8);
            vals[q + i + 16] = static_cast<int8_t>((p[i] >> 4) - 8);
          }
          p += 16;
        }
      }
      // vals holds the sr halves one after the other: half s of row r is vals[(s * 8 + r) * 8, + 8).
      const int64_t k0 = g * group_size + c * kKr;
      for (int s = 0; s < kSr; ++s)
        for (int r = 0; r < kNr; ++r)
          for (int i = 0; i < kKr / kSr; ++i)
            w[r * k + k0 + s * (kKr / kSr) + i] =
                static_cast<float>(vals[(s * kNr + r) * (kKr / kSr) + i]) * sc[r];
    }
    p += kNr * 4 * 2;  // the group's scales and row sums
  }
}

/// y [m, n] = x [m, k] W^T for the packed W [n, k].
inline void packed_linear(const uint8_t* blob, int64_t n, int64_t k, int64_t group_size, int nbit, const float* x,
                          int64_t m, float* y, std::vector<float>& wbuf) {
  wbuf.resize(static_cast<size_t>(kNr * k));
  const uint8_t* data = blob + kHeaderBytes;
  for (int64_t n0 = 0; n0 < n; n0 += kNr) {
    unpack_block(data, n0, k, group_size, nbit, wbuf.data());
    const int64_t rows = std::min<int64_t>(kNr, n - n0);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t r = 0; r < rows; ++r) y[i * n + n0 + r] = dot_lanes(x + i * k, wbuf.data() + r * k, k);
  }
}

inline float sigmoid(float v) {
  if (v >= 0.0f) return 1.0f / (1.0f + std::exp(-v));
  const float e = std::exp(v);
  return e / (1.0f + e);
}

}  // namespace llama::moe

template <class Dtypes>
Status quantized_moe_ffn_out(KernelContext& ctx, const Tensor& x, const Tensor& gate_weight, const Tensor& expert_bias,
                             const Tensor& packed_w13, const Tensor& packed_w2, int64_t num_activated_experts,
                             int64_t num_experts, int64_t hidden_dim, int64_t dim, int64_t group_size,
                             int64_t weight_nbit, std::string_view score_func, double route_scale, Tensor& out) {
  constexpr std::string_view op = "llama::quantized_moe_ffn.out";
  using namespace llama;
  ETRT_CHECK_OK(check_rank(op, x, 2, "x"));
  ETRT_CHECK_OK(check_dtype(op, x, ScalarType::Float, "x"));
  if (dim <= 0 || hidden_dim <= 0 || num_experts <= 0)
    return fail(Error::InvalidArgument, op, ": dim (", dim, "), hidden_dim (", hidden_dim, ") and num_experts (",
                num_experts, ") must be positive");
  if (x.size(1) != dim) return fail(Error::InvalidArgument, op, ": x ", x.describe(), " must be [T, dim = ", dim, "]");
  ETRT_CHECK_OK(check_dtype(op, gate_weight, ScalarType::Float, "gate_weight"));
  if (gate_weight.dim() != 2 || gate_weight.size(0) != num_experts || gate_weight.size(1) != dim)
    return fail(Error::InvalidArgument, op, ": gate_weight ", gate_weight.describe(), " must be [", num_experts, ", ",
                dim, "]");
  const bool use_bias = expert_bias.numel() > 0;
  if (use_bias) {
    ETRT_CHECK_OK(check_dtype(op, expert_bias, ScalarType::Float, "expert_bias"));
    if (expert_bias.dim() != 1 || expert_bias.size(0) != num_experts)
      return fail(Error::InvalidArgument, op, ": expert_bias ", expert_bias.describe(), " must be [", num_experts,
                  "] or empty");
  }
  for (const auto& [t, what] : {std::pair<const Tensor*, std::string_view>{&packed_w13, "packed_w13"},
                                {&packed_w2, "packed_w2"}}) {
    ETRT_CHECK_OK(check_dtype(op, *t, ScalarType::Byte, what));
    if (t->dim() != 2 || t->size(0) != num_experts)
      return fail(Error::InvalidArgument, op, ": ", what, " ", t->describe(), " must be [", num_experts,
                  ", packed bytes]");
  }
  for (const auto& [t, what] : {std::pair<const Tensor*, std::string_view>{&x, "x"}, {&gate_weight, "gate_weight"},
                                {&packed_w13, "packed_w13"}, {&packed_w2, "packed_w2"}})
    ETRT_CHECK_OK(check_contiguous(op, *t, what));
  if (num_activated_experts <= 0 || num_activated_experts > num_experts)
    return fail(Error::InvalidArgument, op, ": num_activated_experts ", num_activated_experts,
                " must be in [1, num_experts = ", num_experts, "]");
  const bool is_sigmoid = score_func == "sigmoid";
  if (!is_sigmoid && score_func != "softmax")
    return fail(Error::InvalidArgument, op, ": score_func must be \"sigmoid\" or \"softmax\", got \"", score_func,
                "\"");
  if (use_bias && !is_sigmoid)
    return fail(Error::InvalidArgument, op, ": expert_bias is only supported with score_func \"sigmoid\"");
  if (weight_nbit != 4 && weight_nbit != 8)
    return fail(Error::InvalidArgument, op, ": weight_nbit must be 4 or 8, got ", weight_nbit);
  if (group_size <= 0 || group_size % moe::kKr != 0 || dim % group_size != 0 || hidden_dim % group_size != 0)
    return fail(Error::InvalidArgument, op, ": group_size ", group_size,
                " must be a positive multiple of 16 dividing dim (", dim, ") and hidden_dim (", hidden_dim, ")");
  const int nbit = static_cast<int>(weight_nbit);
  const int64_t T = x.size(0), D = dim, F = hidden_dim, E = num_experts, K = num_activated_experts;
  const int64_t b13 = packed_w13.size(1), b2 = packed_w2.size(1);
  // hidden_dim is a scalar argument, not a tensor's size: packed_w13 holds its 2 * hidden_dim rows in at least one
  // byte each, so it bounds hidden_dim before any product is formed from it.
  if (F > b13)
    return fail(Error::InvalidArgument, op, ": hidden_dim ", F, " cannot fit packed_w13's ", b13,
                " bytes per expert (it holds 2 * hidden_dim packed rows)");
  for (int64_t e = 0; e < E; ++e) {
    ETRT_CHECK_OK(moe::check_blob(op, packed_w13.data_as<const uint8_t>() + e * b13, b13, 2 * F, D, group_size, nbit,
                                  "packed_w13", e));
    ETRT_CHECK_OK(moe::check_blob(op, packed_w2.data_as<const uint8_t>() + e * b2, b2, D, F, group_size, nbit,
                                  "packed_w2", e));
  }
  ETRT_CHECK_OK(check_dtype(op, out, ScalarType::Float, "out"));
  const int64_t out_sizes[2] = {T, D};
  ETRT_CHECK_OK(ctx.resize(op, out, out_sizes));
  ETRT_CHECK_OK(check_contiguous(op, out, "out"));
  float* y = out.data_as<float>();
  if (T == 0) return {};
  std::fill(y, y + T * D, 0.0f);
  const float* xd = x.data_as<const float>();
  const float* gw = gate_weight.data_as<const float>();
  const float* bias = use_bias ? expert_bias.data_as<const float>() : nullptr;

  // Routing: per token, the picked experts and their weights.
  std::vector<float> scores(static_cast<size_t>(E)), ranked(static_cast<size_t>(E));
  std::vector<int64_t> pick(static_cast<size_t>(T * K));
  std::vector<float> weight(static_cast<size_t>(T * K));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t e = 0; e < E; ++e) {
      const float s = dot_lanes(xd + t * D, gw + e * D, D);
      scores[static_cast<size_t>(e)] = is_sigmoid ? moe::sigmoid(s) : s;
      ranked[static_cast<size_t>(e)] = scores[static_cast<size_t>(e)] + (bias ? bias[e] : 0.0f);
    }
    int64_t* idx = pick.data() + t * K;
    float* w = weight.data() + t * K;
    for (int64_t j = 0; j < K; ++j) {  // selection by repeated maximum; NaN scores lose to everything
      int64_t best = -1;
      for (int64_t e = 0; e < E; ++e) {
        if (std::find(idx, idx + j, e) != idx + j) continue;
        if (best < 0 || ranked[static_cast<size_t>(e)] > ranked[static_cast<size_t>(best)] ||
            (std::isnan(ranked[static_cast<size_t>(best)]) && !std::isnan(ranked[static_cast<size_t>(e)])))
          best = e;
      }
      idx[j] = best;
      w[j] = scores[static_cast<size_t>(best)];
    }
    if (is_sigmoid) {
      float sum = 0.0f;
      for (int64_t j = 0; j < K; ++j) sum += w[j];
      const float denom = sum < std::numeric_limits<float>::min() ? std::numeric_limits<float>::min() : sum;
      const float s = static_cast<float>(route_scale) / denom;
      for (int64_t j = 0; j < K; ++j) w[j] *= s;
    } else {
      float mx = w[0];
      for (int64_t j = 1; j < K; ++j) mx = w[j] > mx ? w[j] : mx;
      float sum = 0.0f;
      for (int64_t j = 0; j < K; ++j) sum += (w[j] = std::exp(w[j] - mx));
      const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
      for (int64_t j = 0; j < K; ++j) w[j] *= inv;
    }
  }

  // Experts in order: gather their tokens, run the two projections, add the weighted rows to the output.
  std::vector<float> xe, h13, mid, ye, wbuf;
  std::vector<int64_t> toks;
  std::vector<float> gates;
  for (int64_t e = 0; e < E; ++e) {
    toks.clear();
    gates.clear();
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < K; ++j)
        if (pick[static_cast<size_t>(t * K + j)] == e) {
          toks.push_back(t);
          gates.push_back(weight[static_cast<size_t>(t * K + j)]);
        }
    const auto m = static_cast<int64_t>(toks.size());
    if (m == 0) continue;
    xe.resize(static_cast<size_t>(m * D));
    for (int64_t i = 0; i < m; ++i) std::memcpy(xe.data() + i * D, xd + toks[i] * D, sizeof(float) * D);
    h13.resize(static_cast<size_t>(m * 2 * F));
    moe::packed_linear(packed_w13.data_as<const uint8_t>() + e * b13, 2 * F, D, group_size, nbit, xe.data(), m,
                       h13.data(), wbuf);
    mid.resize(static_cast<size_t>(m * F));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < F; ++j) {
        const float a = h13[static_cast<size_t>(i * 2 * F + j)];
        mid[static_cast<size_t>(i * F + j)] = a * moe::sigmoid(a) * h13[static_cast<size_t>(i * 2 * F + F + j)];
      }
    ye.resize(static_cast<size_t>(m * D));
    moe::packed_linear(packed_w2.data_as<const uint8_t>() + e * b2, D, F, group_size, nbit, mid.data(), m, ye.data(),
                       wbuf);
    for (int64_t i = 0; i < m; ++i) {
      float* dst = y + toks[i] * D;
      const float gte = gates[static_cast<size_t>(i)];
      for (int64_t d = 0; d < D; ++d) dst[d] += gte * ye[static_cast<size_t>(i * D + d)];
    }
  }
  return {};
}

}  // namespace etrt::kernels
