// The order the VNNI fully-connected kernels (qd8_int4_vnni.h, qd8_int8_vnni.h) walk their tiles.
#pragma once

#include <cstdint>

namespace etrt::xnnpack::quant::detail {

/// Panels [p_begin, p_end) of 16 output rows against m activation rows, one tile.template operator()<MR, NP>(i0, p0)
/// per tile of MR rows from i0 by NP panels from p0: decode (one row) takes four panels per pass, so four
/// independent chains of dot products hide their latency; longer inputs take four rows per pass over one panel.
template <class Tile>
inline void walk_vnni_tiles(int64_t m, int64_t p_begin, int64_t p_end, const Tile& tile) {
  if (m == 1) {
    int64_t p = p_begin;
    for (; p + 4 <= p_end; p += 4) tile.template operator()<1, 4>(0, p);
    for (; p < p_end; ++p) tile.template operator()<1, 1>(0, p);
    return;
  }
  for (int64_t p = p_begin; p < p_end; ++p) {
    int64_t i = 0;
    for (; i + 4 <= m; i += 4) tile.template operator()<4, 1>(i, p);
    switch (m - i) {
      case 3: tile.template operator()<3, 1>(i, p); break;
      case 2: tile.template operator()<2, 1>(i, p); break;
      case 1: tile.template operator()<1, 1>(i, p); break;
      default: break;
    }
  }
}

}  // namespace etrt::xnnpack::quant::detail
