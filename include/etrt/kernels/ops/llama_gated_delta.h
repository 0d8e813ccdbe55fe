// llama::gated_delta_rule.out and its deprecated alias llama::channelwise_gated_delta_rule.out: the gated delta rule
// recurrence of linear-attention layers (Gated DeltaNet), float32.
//
// Shapes: query [B, Hq, T, K], key [B, H, T, K], value [B, H, T, V], decay [B, H, T, K] (per key channel) or
// [B, H, T] (one gate per token), beta [B, H, T], initial_state [B, H, K, V]; Hq must be a multiple of H (query head
// h reads state head h / (Hq / H)). decay is already exponentiated. For every token t, per state head:
//   S = diag(decay_t) S;  delta = beta_t * (v_t - S^T k_t);  S = S + k_t delta^T;  out_t = S^T q_t
// out is [B, Hq, T, V] and final_state_out [B, H, K, V] the state after the last token; initial_state is only read
// and must not overlap final_state_out.
//
// This is the exact token-by-token recurrence. Upstream switches to a chunked (WY) form for prefill, which sums in
// another order, so prefill results agree with upstream's to rounding, not bit for bit.
#pragma once

#include <cstring>
#include <vector>

#include "etrt/kernels/ops/llama_common.h"
#include "etrt/kernels/util/parallel.h"

namespace etrt::kernels {

namespace llama::gdr {

inline bool overlaps(const Tensor& a, const Tensor& b) {
  if (a.nbytes() == 0 || b.nbytes() == 0) return false;
  const auto* a0 = static_cast<const char*>(a.data());
  const auto* b0 = static_cast<const char*>(b.data());
  return a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes();
}

inline Status gated_delta_rule(std::string_view op, KernelContext& ctx, const Tensor& query, const Tensor& key,
                               const Tensor& value, const Tensor& decay, const Tensor& beta,
                               const Tensor& initial_state, Tensor& out, Tensor& final_state_out) {
  ETRT_CHECK_OK(check_rank(op, query, 4, "query"));
  ETRT_CHECK_OK(check_rank(op, key, 4, "key"));
  ETRT_CHECK_OK(check_rank(op, value, 4, "value"));
  if (decay.dim() != 3 && decay.dim() != 4)
    return fail(Error::InvalidArgument, op, ": decay must be 4-D (per channel) or 3-D (per token), got ",
                decay.describe());
  ETRT_CHECK_OK(check_rank(op, beta, 3, "beta"));
  ETRT_CHECK_OK(check_rank(op, initial_state, 4, "initial_state"));
  const std::pair<const Tensor*, std::string_view> named[] = {{&query, "query"}, {&key, "key"},
                                                              {&value, "value"}, {&decay, "decay"},
                                                              {&beta, "beta"},   {&initial_state, "initial_state"},
                                                              {&out, "out"},     {&final_state_out, "final_state_out"}};
  for (const auto& [t, what] : named) ETRT_CHECK_OK(check_dtype(op, *t, ScalarType::Float, what));
  const int64_t B = key.size(0), H = key.size(1), T = key.size(2), K = key.size(3), V = value.size(3);
  const int64_t Hq = query.size(1);
  if (query.size(0) != B || query.size(2) != T || query.size(3) != K)
    return fail(Error::InvalidArgument, op, ": query ", query.describe(), " must match key ", key.describe(),
                " in batch, sequence and key dims");
  if (H <= 0 || Hq % H != 0)
    return fail(Error::InvalidArgument, op, ": the query head count ", Hq, " must be a multiple of the key head count ",
                H);
  if (value.size(0) != B || value.size(1) != H || value.size(2) != T)
    return fail(Error::InvalidArgument, op, ": value ", value.describe(), " must match key ", key.describe(),
                " in batch, head and sequence dims");
  const bool per_channel = decay.dim() == 4;
  if (decay.size(0) != B || decay.size(1) != H || decay.size(2) != T || (per_channel && decay.size(3) != K))
    return fail(Error::InvalidArgument, op, ": decay ", decay.describe(), " must be [", B, ", ", H, ", ", T,
                per_channel ? cat(", ", K) : std::string(), "]");
  if (beta.size(0) != B || beta.size(1) != H || beta.size(2) != T)
    return fail(Error::InvalidArgument, op, ": beta ", beta.describe(), " must be [", B, ", ", H, ", ", T, "]");
  if (initial_state.size(0) != B || initial_state.size(1) != H || initial_state.size(2) != K ||
      initial_state.size(3) != V)
    return fail(Error::InvalidArgument, op, ": initial_state ", initial_state.describe(), " must be [", B, ", ", H,
                ", ", K, ", ", V, "]");
  for (const auto& [t, what] : named)
    if (t != &out && t != &final_state_out) ETRT_CHECK_OK(check_contiguous(op, *t, what));
  const int64_t out_sizes[4] = {B, Hq, T, V};
  ETRT_CHECK_OK(ctx.resize(op, out, out_sizes));
  ETRT_CHECK_OK(ctx.resize(op, final_state_out, initial_state.sizes()));
  ETRT_CHECK_OK(check_contiguous(op, out, "out"));
  ETRT_CHECK_OK(check_contiguous(op, final_state_out, "final_state_out"));
  if (overlaps(initial_state, final_state_out))
    return fail(Error::InvalidArgument, op, ": final_state_out must not overlap initial_state");
  if (initial_state.numel() == 0 && out.numel() == 0) return {};

  const float* q = query.data_as<const float>();
  const float* k = key.data_as<const float>();
  const float* v = value.data_as<const float>();
  const float* g = decay.data_as<const float>();
  const float* bt = beta.data_as<const float>();
  const float* s0 = initial_state.data_as<const float>();
  float* o = out.data_as<float>();
  float* st = final_state_out.data_as<float>();
  const int64_t rep = Hq / H;
  auto work = [&](int64_t i0, int64_t i1) {
    std::vector<float> delta(static_cast<size_t>(V));
    for (int64_t i = i0; i < i1; ++i) {  // one (batch, state head)
      const int64_t b = i / H, h = i % H;
      float* S = st + i * K * V;
      if (K * V > 0) std::memcpy(S, s0 + i * K * V, sizeof(float) * static_cast<size_t>(K * V));
      for (int64_t t = 0; t < T; ++t) {
        const int64_t row = (i * T + t);  // (b, h, t) in key / value / decay / beta
        const float* kt = k + row * K;
        const float* vt = v + row * V;
        const float bet = bt[row];
        // Decay, then the prediction of v_t from the decayed state.
        std::fill(delta.begin(), delta.end(), 0.0f);
        for (int64_t kk = 0; kk < K; ++kk) {
          const float d = per_channel ? g[row * K + kk] : g[row];
          float* Sr = S + kk * V;
          const float kv = kt[kk];
          for (int64_t j = 0; j < V; ++j) {
            Sr[j] *= d;
            delta[static_cast<size_t>(j)] += Sr[j] * kv;
          }
        }
        for (int64_t j = 0; j < V; ++j) delta[static_cast<size_t>(j)] = (vt[j] - delta[static_cast<size_t>(j)]) * bet;
        for (int64_t kk = 0; kk < K; ++kk) {
          float* Sr = S + kk * V;
          const float kv = kt[kk];
          for (int64_t j = 0; j < V; ++j) Sr[j] += kv * delta[static_cast<size_t>(j)];
        }
        for (int64_t r = 0; r < rep; ++r) {
          const int64_t hq = h * rep + r;
          const float* qt = q + ((b * Hq + hq) * T + t) * K;
          float* ot = o + ((b * Hq + hq) * T + t) * V;
          std::fill(ot, ot + V, 0.0f);
          for (int64_t kk = 0; kk < K; ++kk) {
            const float* Sr = S + kk * V;
            const float qv = qt[kk];
            for (int64_t j = 0; j < V; ++j) ot[j] += Sr[j] * qv;
          }
        }
      }
    }
  };
  const int64_t macs = B * H * T * K * V * (3 + rep);
  if (macs < (int64_t{1} << 21)) work(0, B * H);
  else parallel_for(B * H, 1, work);
  return {};
}

}  // namespace llama::gdr

template <class Dtypes>
Status gated_delta_rule_out(KernelContext& ctx, const Tensor& query, const Tensor& key, const Tensor& value,
                            const Tensor& decay, const Tensor& beta, const Tensor& initial_state, Tensor& out,
                            Tensor& final_state_out) {
  return llama::gdr::gated_delta_rule("llama::gated_delta_rule.out", ctx, query, key, value, decay, beta,
                                      initial_state, out, final_state_out);
}

template <class Dtypes>
Status channelwise_gated_delta_rule_out(KernelContext& ctx, const Tensor& query, const Tensor& key,
                                        const Tensor& value, const Tensor& decay, const Tensor& beta,
                                        const Tensor& initial_state, Tensor& out, Tensor& final_state_out) {
  return llama::gdr::gated_delta_rule("llama::channelwise_gated_delta_rule.out", ctx, query, key, value, decay, beta,
                                      initial_state, out, final_state_out);
}

}  // namespace etrt::kernels
