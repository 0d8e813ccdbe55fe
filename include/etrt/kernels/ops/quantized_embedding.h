// quantized_decomposed:: embedding_byte / embedding_4bit / embedding_2bit (.out and .dtype_out): rows of a quantized
// [num_embeddings, packed_dim] weight gathered by Long/Int indices and dequantized on the way out.
//
// Packing (the layout upstream's exporter writes, quant_fusion::_pack_embedding_weight): the weight is uint8 (int8
// or uint8 for the byte variant). A 4-bit row holds two values per byte, element 2k in the HIGH nibble and 2k+1 in
// the low nibble, each stored with +8 (value = nibble - 8, in [-8, 7]). A 2-bit row holds four values per byte,
// element 4k+s in bits [2s, 2s+1] (least significant first), each stored with +2 (value = field - 2, in [-2, 1]).
//
// Scales: weight_scales is [num_embeddings] (one per row) or [num_embeddings, groups] (group-wise: `groups` must
// divide the unpacked row length; group g covers elements [g * row / groups, (g + 1) * row / groups)).
// weight_zero_points is None or has the scales' shape. out[..., j] = (w[j] - zp[g]) * scale[g], computed in float
// as upstream does, then stored in the output dtype. quant_min / quant_max are metadata (only min <= max is checked).
//
// Checks beyond upstream's (which aborts or reads out of bounds instead): every index in range, and every scale of a
// row that is looked up positive and finite (a zero, negative or NaN scale only comes from a corrupt program).
#pragma once

#include <cmath>
#include <optional>
#include <vector>

#include "etrt/kernels/ops/quantized.h"

namespace etrt::kernels {

namespace qemb {

/// Element j of a packed row (bits = 2 or 4), already shifted back to its signed value.
inline int32_t packed_value(const uint8_t* row, int64_t stride, int64_t j, int bits) {
  if (bits == 4) {
    const uint8_t b = row[(j >> 1) * stride];
    return static_cast<int32_t>((j & 1) ? (b & 0x0F) : (b >> 4)) - 8;
  }
  const uint8_t b = row[(j >> 2) * stride];
  return static_cast<int32_t>((b >> (2 * (j & 3))) & 0x03) - 2;
}

/// The shared kernel; `bits` is 8 (embedding_byte), 4 or 2.
template <class Dtypes>
Status embedding(std::string_view op, int bits, KernelContext& ctx, const Tensor& weight, const Tensor& scales,
                 const Tensor* zero_points, int64_t quant_min, int64_t quant_max, const Tensor& indices,
                 std::optional<ScalarType> dtype, Tensor& out) {
  if (weight.dim() != 2) return fail(Error::InvalidArgument, op, ": weight must be 2-D, got ", weight.describe());
  if (bits == 8 ? (weight.dtype() != ScalarType::Byte && weight.dtype() != ScalarType::Char)
                : weight.dtype() != ScalarType::Byte)
    return fail(Error::InvalidArgument, op, ": weight must be ", bits == 8 ? "uint8 or int8" : "uint8 (packed)",
                ", got ", weight.describe());
  if (quant_min > quant_max)
    return fail(Error::InvalidArgument, op, ": weight_quant_min ", quant_min, " > weight_quant_max ", quant_max);
  if (!is_floating(scales.dtype()))
    return fail(Error::InvalidArgument, op, ": weight_scales must be floating, got ", scales.describe());
  if (scales.dim() != 1 && scales.dim() != 2)
    return fail(Error::InvalidArgument, op, ": weight_scales must be 1-D or 2-D, got ", scales.describe());
  const int64_t rows = weight.size(0);
  if (scales.size(0) != rows)
    return fail(Error::InvalidArgument, op, ": weight_scales ", scales.describe(), " needs ", rows,
                " rows, one per embedding of weight ", weight.describe());
  const int64_t per_byte = 8 / bits;
  // An empty weight's row length is not bounded by its storage: refuse one whose unpacked length overflows.
  if (weight.size(1) > INT64_MAX / per_byte)
    return fail(Error::InvalidArgument, op, ": weight ", weight.describe(), " has rows too long to unpack");
  const int64_t dim = weight.size(1) * per_byte;  // the unpacked row length
  const int64_t groups = scales.dim() == 2 ? scales.size(1) : 1;
  if (groups < 1 || dim % groups != 0)
    return fail(Error::InvalidArgument, op, ": ", groups, " scale group(s) per row do not divide the row length ", dim,
                " (weight ", weight.describe(), " holds ", per_byte, " value(s) per byte)");
  const int64_t group_size = dim / groups;
  if (zero_points) {
    if (!is_floating(zero_points->dtype()) && !is_integral(zero_points->dtype(), false))
      return fail(Error::InvalidArgument, op, ": weight_zero_points has unsupported dtype ",
                  name(zero_points->dtype()));
    if (!std::equal(zero_points->sizes().begin(), zero_points->sizes().end(), scales.sizes().begin(),
                    scales.sizes().end()))
      return fail(Error::InvalidArgument, op, ": weight_zero_points ", zero_points->describe(),
                  " must have the shape of weight_scales ", scales.describe());
  }
  ETRT_CHECK_OK(mv::check_index_dtype(op, indices, "indices"));
  if (!is_floating(out.dtype()) || !contains(Dtypes{}, out.dtype()))
    return fail(Error::InvalidArgument, op, ": unsupported output dtype ", name(out.dtype()));
  if (dtype && *dtype != out.dtype())
    return fail(Error::InvalidArgument, op, ": out dtype ", name(out.dtype()), " != requested dtype ", name(*dtype));
  if (indices.dim() + 1 > kMaxDims) return fail(Error::InvalidArgument, op, ": indices rank too large");
  Shape os = shape_of(indices.sizes());
  os.sizes[os.rank++] = dim;
  ETRT_CHECK_OK(ctx.resize(op, out, os.span()));
  if (indices.numel() == 0 || dim == 0) return {};

  // The looked-up rows, in index order, validated (index and scales) before anything is written.
  const LoadFn<float> load_scale = loader_for<float>(scales.dtype());
  const LoadFn<float> load_zp = zero_points ? loader_for<float>(zero_points->dtype()) : nullptr;
  const int64_t ss0 = scales.stride(0), ss1 = scales.dim() == 2 ? scales.stride(1) : 0;
  std::vector<int64_t> rows_used;
  rows_used.reserve(static_cast<size_t>(indices.numel()));
  Status err;
  mv::for_each_view_offset(mv::view_of(indices), [&](int64_t off) {
    if (!err) return;
    const int64_t i = mv::read_index(indices, off);
    if (i < 0 || i >= rows) {
      err = fail(Error::InvalidArgument, op, ": index ", i, " is out of range for ", rows, " embeddings");
      return;
    }
    for (int64_t g = 0; g < groups; ++g) {
      const float s = load_scale(scales.data(), i * ss0 + g * ss1);
      if (!(s > 0.f) || !std::isfinite(s)) {
        err = fail(Error::InvalidArgument, op, ": weight_scales[", i, "][", g, "] = ", quant_detail::real_str(s),
                   " is not a positive finite scale");
        return;
      }
    }
    rows_used.push_back(i);
  });
  if (!err) return err;

  // Output rows in logical order (out may carry any dim order).
  mv::View ov = mv::view_of(out);
  ov.rank -= 1;
  std::vector<int64_t> out_rows;
  out_rows.reserve(rows_used.size());
  mv::for_each_view_offset(ov, [&](int64_t off) { out_rows.push_back(off); });
  const int64_t ods = out.stride(out.dim() - 1);
  const int64_t ws0 = weight.stride(0), ws1 = weight.stride(1);
  const int64_t zs0 = zero_points ? zero_points->stride(0) : 0;
  const int64_t zs1 = zero_points && zero_points->dim() == 2 ? zero_points->stride(1) : 0;
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    T* o = out.data_as<T>();
    for (size_t r = 0; r < rows_used.size(); ++r) {
      const int64_t i = rows_used[r];
      T* orow = o + out_rows[r];
      const uint8_t* wrow = static_cast<const uint8_t*>(weight.data()) + i * ws0;
      const int8_t* wrow_s = static_cast<const int8_t*>(weight.data()) + i * ws0;
      for (int64_t g = 0; g < groups; ++g) {
        const float s = load_scale(scales.data(), i * ss0 + g * ss1);
        const float z = load_zp ? load_zp(zero_points->data(), i * zs0 + g * zs1) : 0.f;
        const int64_t j0 = g * group_size, j1 = j0 + group_size;
        for (int64_t j = j0; j < j1; ++j) {
          float w;
          if (bits == 8)
            w = weight.dtype() == ScalarType::Char ? static_cast<float>(wrow_s[j * ws1])
                                                   : static_cast<float>(wrow[j * ws1]);
          else
            w = static_cast<float>(packed_value(wrow, ws1, j, bits));
          orow[j * ods] = convert<T>((w - z) * s);
        }
      }
    }
    return Status{};
  });
}

}  // namespace qemb

template <class Dtypes>
Status embedding_byte_out(KernelContext& ctx, const Tensor& weight, const Tensor& weight_scales,
                          const Tensor* weight_zero_points, int64_t weight_quant_min, int64_t weight_quant_max,
                          const Tensor& indices, Tensor& out) {
  return qemb::embedding<Dtypes>("quantized_decomposed::embedding_byte.out", 8, ctx, weight, weight_scales,
                                 weight_zero_points, weight_quant_min, weight_quant_max, indices, std::nullopt, out);
}

template <class Dtypes>
Status embedding_byte_dtype_out(KernelContext& ctx, const Tensor& weight, const Tensor& weight_scales,
                                const Tensor* weight_zero_points, int64_t weight_quant_min, int64_t weight_quant_max,
                                const Tensor& indices, std::optional<ScalarType> dtype, Tensor& out) {
  return qemb::embedding<Dtypes>("quantized_decomposed::embedding_byte.dtype_out", 8, ctx, weight, weight_scales,
                                 weight_zero_points, weight_quant_min, weight_quant_max, indices, dtype, out);
}

template <class Dtypes>
Status embedding_4bit_out(KernelContext& ctx, const Tensor& weight, const Tensor& weight_scales,
                          const Tensor* weight_zero_points, int64_t weight_quant_min, int64_t weight_quant_max,
                          const Tensor& indices, Tensor& out) {
  return qemb::embedding<Dtypes>("quantized_decomposed::embedding_4bit.out", 4, ctx, weight, weight_scales,
                                 weight_zero_points, weight_quant_min, weight_quant_max, indices, std::nullopt, out);
}

template <class Dtypes>
Status embedding_4bit_dtype_out(KernelContext& ctx, const Tensor& weight, const Tensor& weight_scales,
                                const Tensor* weight_zero_points, int64_t weight_quant_min, int64_t weight_quant_max,
                                const Tensor& indices, std::optional<ScalarType> dtype, Tensor& out) {
  return qemb::embedding<Dtypes>("quantized_decomposed::embedding_4bit.dtype_out", 4, ctx, weight, weight_scales,
                                 weight_zero_points, weight_quant_min, weight_quant_max, indices, dtype, out);
}

template <class Dtypes>
Status embedding_2bit_out(KernelContext& ctx, const Tensor& weight, const Tensor& weight_scales,
                          const Tensor* weight_zero_points, int64_t weight_quant_min, int64_t weight_quant_max,
                          const Tensor& indices, Tensor& out) {
  return qemb::embedding<Dtypes>("quantized_decomposed::embedding_2bit.out", 2, ctx, weight, weight_scales,
                                 weight_zero_points, weight_quant_min, weight_quant_max, indices, std::nullopt, out);
}

template <class Dtypes>
Status embedding_2bit_dtype_out(KernelContext& ctx, const Tensor& weight, const Tensor& weight_scales,
                                const Tensor* weight_zero_points, int64_t weight_quant_min, int64_t weight_quant_max,
                                const Tensor& indices, std::optional<ScalarType> dtype, Tensor& out) {
  return qemb::embedding<Dtypes>("quantized_decomposed::embedding_2bit.dtype_out", 2, ctx, weight, weight_scales,
                                 weight_zero_points, weight_quant_min, weight_quant_max, indices, dtype, out);
}

}  // namespace etrt::kernels
