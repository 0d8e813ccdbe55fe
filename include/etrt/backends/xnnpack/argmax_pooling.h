// XNNArgMaxPooling2d on float values (XNNPACK's definition): NHWC input, the stride equals the pooling size, implicit
// padding (top, right, bottom, left). Each output holds its window's maximum and the maximum's position in the
// window. As XNNPACK's indirection buffer does, a padded position reads the nearest input element (coordinates are
// clamped), positions are numbered column by column (x * pooling_height + y), and the first of equal maxima wins.
// Indices are written as floats (exact: a window has at most 2^24 positions, checks::argmax_pooling) for the int32
// staging.
#pragma once

#include <algorithm>
#include <cstdint>

#include "etrt/backends/xnnpack/shape_inference.h"

namespace etrt::xnnpack {

inline Status argmax_pooling_2d(const Node& n, const float* x, const ValueShape& xs, float* values, float* index,
                                const ValueShape& os) {
  const int64_t top = n.conv[0], right = n.conv[1], bottom = n.conv[2], left = n.conv[3];
  const int64_t ph = n.conv[4], pw = n.conv[5];
  const int64_t N = xs.d[0], H = xs.d[1], W = xs.d[2], C = xs.d[3];
  const int64_t OH = (H + top + bottom) / ph, OW = (W + left + right) / pw;
  if (H < 1 || W < 1 || os.d[0] != N || os.d[1] != OH || os.d[2] != OW || os.d[3] != C)
    return fail(Error::InvalidArgument, n.where(), ": input ", shape_str(xs.sizes()), " pooled ", ph, "x", pw,
                " gives [", N, ", ", OH, ", ", OW, ", ", C, "], the output is ", shape_str(os.sizes()));
  for (int64_t b = 0; b < N; ++b)
    for (int64_t oy = 0; oy < OH; ++oy)
      for (int64_t ox = 0; ox < OW; ++ox) {
        float* vo = values + ((b * OH + oy) * OW + ox) * C;
        float* io = index + ((b * OH + oy) * OW + ox) * C;
        for (int64_t px = 0; px < pw; ++px)
          for (int64_t py = 0; py < ph; ++py) {
            const int64_t iy = std::clamp<int64_t>(oy * ph + py - top, 0, H - 1);
            const int64_t ix = std::clamp<int64_t>(ox * pw + px - left, 0, W - 1);
            const float* xi = x + ((b * H + iy) * W + ix) * C;
            const int64_t k = px * ph + py;
            for (int64_t c = 0; c < C; ++c)
              if (k == 0 || xi[c] > vo[c]) vo[c] = xi[c], io[c] = static_cast<float>(k);
          }
      }
  return {};
}

}  // namespace etrt::xnnpack
