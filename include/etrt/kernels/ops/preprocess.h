// preprocess::tile_crop.out: the image preprocessing of multimodal LLMs. A [C, H, W] image whose H and W are
// multiples of tile_size is cut into (H / tile_size) * (W / tile_size) tiles, row-major over the tile grid, each
// [C, tile_size, tile_size]: out[ty * (W / t) + tx, c, h, w] = in[c, ty * t + h, tx * t + w]. Any dtype; pure data
// movement (a strided view copy, so any dim order works).
#pragma once

#include "etrt/kernels/util/movement_util.h"

namespace etrt::kernels {

template <class Dtypes>
Status tile_crop_out(KernelContext& ctx, const Tensor& input, int64_t tile_size, Tensor& out) {
  constexpr std::string_view op = "preprocess::tile_crop.out";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, input, out));
  if (input.dim() != 3) return fail(Error::InvalidArgument, op, ": input must be [C, H, W], got ", input.describe());
  if (out.dim() != 4) return fail(Error::InvalidArgument, op, ": out must be 4-D, got ", out.describe());
  if (tile_size <= 0) return fail(Error::InvalidArgument, op, ": tile_size ", tile_size, " must be positive");
  const int64_t c = input.size(0), h = input.size(1), w = input.size(2);
  if (h % tile_size != 0 || w % tile_size != 0)
    return fail(Error::InvalidArgument, op, ": the image ", input.describe(), " is not a whole number of ", tile_size,
                "x", tile_size, " tiles");
  const int64_t th = h / tile_size, tw = w / tile_size;
  const std::array<int64_t, 4> os{th * tw, c, tile_size, tile_size};
  ETRT_CHECK_OK(ctx.resize(op, out, os));
  if (out.numel() == 0) return {};
  // Both sides as [th, tw, C, t, t] views.
  mv::View src, dst;
  src.data = static_cast<char*>(input.data());
  src.push(th, tile_size * input.stride(1));
  src.push(tw, tile_size * input.stride(2));
  src.push(c, input.stride(0));
  src.push(tile_size, input.stride(1));
  src.push(tile_size, input.stride(2));
  dst.data = static_cast<char*>(out.data());
  dst.push(th, tw * out.stride(0));
  dst.push(tw, out.stride(0));
  for (int d = 1; d < 4; ++d) dst.push(out.size(d), out.stride(d));
  mv::copy_views(element_size(out.dtype()), dst, src);
  return {};
}

}  // namespace etrt::kernels
