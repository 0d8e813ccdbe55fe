// XNNScaledDotProductAttention on float values (XNNPACK's definition):
//   query [*, H, T, C]; key [*, H, U, C] or, multi-query, [*, U, C]; value [*, H, U, D] or [*, U, D];
//   scale [C] multiplies the query channel by channel; mask [T, U] is added to the logits;
//   output [*, H, T, D] = softmax_U(sum_C q * scale * k + mask) @ v.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "etrt/backends/xnnpack/shape_inference.h"

namespace etrt::xnnpack {

struct SdpaOperands {
  const float *q, *k, *v, *scale, *mask;
  float* out;
  ValueShape qs, ks, vs, ss, ms, os;
};

/// Checks the call's shapes against one another, then computes. `logits` holds at least U floats.
inline Status scaled_dot_product_attention(const Node& n, const SdpaOperands& a, float* logits) {
  const uint32_t r = a.qs.rank;
  const bool multi_query = a.ks.rank == r - 1;
  const int64_t H = a.qs.d[r - 3], T = a.qs.d[r - 2], C = a.qs.d[r - 1];
  const int64_t U = a.ks.d[a.ks.rank - 2], D = a.vs.d[a.vs.rank - 1];
  bool ok = a.ks.d[a.ks.rank - 1] == C && a.vs.d[a.vs.rank - 2] == U && a.ss.d[0] == C && a.ms.d[0] == T &&
            a.ms.d[1] == U && a.os.rank == r && a.os.d[r - 3] == H && a.os.d[r - 2] == T && a.os.d[r - 1] == D;
  const uint32_t batch_dims = r - 3;
  int64_t batch = 1;
  for (uint32_t i = 0; i < batch_dims && ok; ++i) {
    ok = a.ks.d[i] == a.qs.d[i] && a.vs.d[i] == a.qs.d[i] && a.os.d[i] == a.qs.d[i];
    batch *= a.qs.d[i];
  }
  if (ok && !multi_query) ok = a.ks.d[r - 3] == H && a.vs.d[r - 3] == H;
  if (!ok)
    return fail(Error::InvalidArgument, n.where(), ": query ", shape_str(a.qs.sizes()), ", key ",
                shape_str(a.ks.sizes()), ", value ", shape_str(a.vs.sizes()), ", scale ", shape_str(a.ss.sizes()),
                ", mask ", shape_str(a.ms.sizes()), " and output ", shape_str(a.os.sizes()),
                " do not fit [*, H, T, C], [*, (H,) U, C], [*, (H,) U, D], [C], [T, U], [*, H, T, D]");
  const int64_t kv_heads = multi_query ? 1 : H;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kvh = b * kv_heads + (multi_query ? 0 : h);
      const float* kb = a.k + kvh * U * C;
      const float* vb = a.v + kvh * U * D;
      for (int64_t t = 0; t < T; ++t) {
        const float* qr = a.q + ((b * H + h) * T + t) * C;
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t u = 0; u < U; ++u) {
          float dot = 0.f;
          for (int64_t c = 0; c < C; ++c) dot += qr[c] * a.scale[c] * kb[u * C + c];
          logits[u] = dot + a.mask[t * U + u];
          mx = std::max(mx, logits[u]);
        }
        float sum = 0.f;
        for (int64_t u = 0; u < U; ++u) sum += (logits[u] = std::exp(logits[u] - mx));
        const float inv = 1.f / sum;
        float* o = a.out + ((b * H + h) * T + t) * D;
        std::fill(o, o + D, 0.f);
        for (int64_t u = 0; u < U; ++u) {
          const float p = logits[u] * inv;
          for (int64_t d = 0; d < D; ++d) o[d] += p * vb[u * D + d];
        }
      }
    }
  return {};
}

}  // namespace etrt::xnnpack
