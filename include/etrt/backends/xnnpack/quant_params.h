// Datatypes and quantization parameters of XNNPACK values (XNNQuantizedTensorValue in the payload's schema).
//
// What the exporter writes (executorch 1.5.1, backends/xnnpack/operators): static activations are qint8/quint8
// with one scale and zero point (PerTensorQuant); weights are qcint8 or qcint4 with one scale per output channel
// (PerChannelQuant, zero point 0) or qbint4 with one scale per (output channel, block of `group_size` inputs)
// (PerChannelGroupQuant, scales stored as bfloat16); biases are qcint32/qint32 with scale = input scale x weight
// scale; dynamically quantized activations are qdint8 with PerTokenDynamicQuant (parameters computed per row at
// run time). Per-channel scales live in a constant_data entry (scale_buffer_idx, num_scales) or, in older payloads,
// inline. 4-bit weights hold two values per byte along the last dim (low nibble first), each stored as value + 8.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "etrt/core/half.h"
#include "etrt/core/result.h"
#include "etrt/core/tensor.h"  // shape_str
#include "etrt/format/flatbuffer.h"

namespace etrt::xnnpack {

// XNNDatatype codes.
enum class Datatype : int16_t {
  Fp32 = 1, Fp16 = 2, QInt8 = 3, QUInt8 = 4, QInt32 = 5, QCInt8 = 6, QCInt32 = 7, QCInt4 = 8, QDInt8 = 9,
  QBInt4 = 10, QPInt8 = 11, Int32 = 12, PFp32 = 13, BF16 = 14,
};

inline std::string_view datatype_name(int16_t d) {
  static constexpr std::string_view names[] = {"invalid", "fp32", "fp16", "qint8", "quint8", "qint32", "qcint8",
                                               "qcint32", "qcint4", "qdint8", "qbint4", "qpint8", "int32", "pfp32",
                                               "bf16"};
  return d >= 0 && d <= 14 ? names[d] : std::string_view("unknown");
}

enum class QuantKind : uint8_t { None, PerTensor, PerChannel, PerChannelGroup, DynamicPerToken };

struct Quant {
  QuantKind kind = QuantKind::None;
  float scale = 1.f;             // per tensor
  int32_t zero_point = 0;        // per tensor
  std::vector<float> scales;     // per channel: dims[channel_dim]; per group: dims[0] x (dims[1] / group_size)
  uint32_t channel_dim = 0;
  uint32_t group_size = 0;
  int32_t num_nonbatch_dims = 1;  // dynamic: the trailing dims that share one set of parameters
};

/// The integer range a quantized datatype stores.
struct QRange {
  int64_t lo, hi;
};
inline QRange qrange(Datatype d) {
  switch (d) {
    case Datatype::QUInt8: return {0, 255};
    case Datatype::QCInt4: case Datatype::QBInt4: return {-8, 7};
    case Datatype::QInt32: case Datatype::QCInt32: return {INT32_MIN, INT32_MAX};
    default: return {-128, 127};
  }
}

/// A per-tensor quantization grid: scale, zero point and the stored integer range.
struct Grid {
  float scale = 1.f;
  int32_t zero_point = 0;
  QRange range{};
};

/// Bytes a constant of this datatype and these dims occupies (4-bit: two per byte along the last dim, rows padded).
inline uint64_t constant_bytes(Datatype d, std::span<const int64_t> dims, int64_t numel) {
  switch (d) {
    case Datatype::QInt8: case Datatype::QUInt8: case Datatype::QCInt8: return static_cast<uint64_t>(numel);
    case Datatype::QCInt4: case Datatype::QBInt4: {
      if (dims.empty()) return static_cast<uint64_t>((numel + 1) / 2);
      const int64_t cols = dims.back(), rows = cols ? numel / cols : 0;
      return static_cast<uint64_t>(rows) * static_cast<uint64_t>((cols + 1) / 2);
    }
    default: return static_cast<uint64_t>(numel) * 4;
  }
}

namespace detail {

namespace qslot {
inline constexpr int kQtvTensor = 0, kQtvParamsType = 1, kQtvParams = 2;
inline constexpr int kPcScale = 0, kPcChannelDim = 1, kPcScaleBuffer = 2, kPcNumScales = 3;
inline constexpr int kPtScale = 0, kPtZeroPoint = 1;
inline constexpr int kPgScale = 0, kPgChannelDim = 1, kPgGroupSize = 2, kPgScaleBuffer = 4, kPgNumScales = 5;
// XNNQuantParams union codes.
inline constexpr uint8_t kPerChannel = 1, kPerTensor = 2, kPerTokenDynamic = 3, kPerChannelGroup = 4;
}  // namespace qslot

inline Status check_scale(uint32_t index, float s) {
  if (!(s > 0.f) || !std::isfinite(s))
    return fail(Error::InvalidProgram, "XNNPACK value ", index, ": quantization scale ", s,
                " is not a positive finite number");
  return {};
}

/// Reads `count` scales: inline (`inline_scales`) or from constant_data[buffer] as float32 or bfloat16.
inline Result<std::vector<float>> read_scales(uint32_t index, const fb::Vector<float>& inline_scales, uint32_t buffer,
                                              uint32_t count, bool bf16,
                                              const std::vector<std::span<const uint8_t>>& constants) {
  std::vector<float> s;
  if (buffer == 0 && !inline_scales.empty()) {
    if (count != 0 && count != inline_scales.size())
      return fail(Error::InvalidProgram, "XNNPACK value ", index, ": num_scales ", count, " but ",
                  inline_scales.size(), " inline scales");
    for (uint32_t i = 0; i < inline_scales.size(); ++i) s.push_back(inline_scales[i]);
  } else {
    if (buffer == 0 || buffer >= constants.size())
      return fail(Error::InvalidProgram, "XNNPACK value ", index, ": scale_buffer_idx ", buffer, " names no constant (",
                  constants.size(), " entries)");
    const size_t width = bf16 ? 2 : 4;
    if (constants[buffer].size() < static_cast<uint64_t>(count) * width)
      return fail(Error::InvalidProgram, "XNNPACK value ", index, ": ", count, " scales need ", uint64_t{count} * width,
                  " bytes, constant ", buffer, " holds ", constants[buffer].size());
    s.resize(count);
    const uint8_t* p = constants[buffer].data();
    for (uint32_t i = 0; i < count; ++i) {
      if (bf16) {
        BFloat16 b;
        b.bits = fb::load_le<uint16_t>(p + 2 * size_t{i});
        s[i] = static_cast<float>(b);
      } else {
        s[i] = fb::load_le<float>(p + 4 * size_t{i});
      }
    }
  }
  for (float x : s) ETRT_CHECK_OK(check_scale(index, x));
  return s;
}

/// Parses the quantization parameters of value `index` (datatype `dt`, dims known) and checks them against the dims.
inline Result<Quant> parse_quant(const fb::Reader& r, const fb::Table& qtv, uint32_t index, Datatype dt,
                                 std::span<const int64_t> dims,
                                 const std::vector<std::span<const uint8_t>>& constants) {
  const uint8_t type = qtv.scalar<uint8_t>(qslot::kQtvParamsType, 0, "XNNQuantizedTensorValue.quant_params_type");
  const fb::Table q = qtv.table(qslot::kQtvParams, "XNNQuantizedTensorValue.quant_params");
  if (!r.ok()) return r.take_failure();
  if (!q.present()) return fail(Error::InvalidProgram, "XNNPACK value ", index, " has no quantization parameters");
  Quant out;
  const auto want = [&](uint8_t k, std::string_view what) -> Status {
    if (type != k)
      return fail(Error::InvalidProgram, "XNNPACK value ", index, ": datatype ", datatype_name(static_cast<int16_t>(dt)),
                  " needs ", what, " quantization parameters (union type ", int(k), "), got type ", int(type));
    return {};
  };
  switch (dt) {
    case Datatype::QInt8: case Datatype::QUInt8: case Datatype::QInt32: {
      ETRT_CHECK_OK(want(qslot::kPerTensor, "per-tensor"));
      out.kind = QuantKind::PerTensor;
      out.scale = q.scalar<float>(qslot::kPtScale, 0.f, "PerTensorQuant.scale");
      out.zero_point = q.scalar<int32_t>(qslot::kPtZeroPoint, 0, "PerTensorQuant.zero_point");
      if (!r.ok()) return r.take_failure();
      ETRT_CHECK_OK(check_scale(index, out.scale));
      const QRange range = qrange(dt);
      if (out.zero_point < range.lo || out.zero_point > range.hi)
        return fail(Error::InvalidProgram, "XNNPACK value ", index, ": zero point ", out.zero_point,
                    " is outside the range of ", datatype_name(static_cast<int16_t>(dt)));
      return out;
    }
    case Datatype::QCInt8: case Datatype::QCInt32: case Datatype::QCInt4: {
      ETRT_CHECK_OK(want(qslot::kPerChannel, "per-channel"));
      out.kind = QuantKind::PerChannel;
      out.channel_dim = q.scalar<uint32_t>(qslot::kPcChannelDim, 0, "PerChannelQuant.channel_dim");
      const auto inline_scales = q.vector<float>(qslot::kPcScale, "PerChannelQuant.scale");
      const uint32_t buffer = q.scalar<uint32_t>(qslot::kPcScaleBuffer, 0, "PerChannelQuant.scale_buffer_idx");
      const uint32_t count = q.scalar<uint32_t>(qslot::kPcNumScales, 0, "PerChannelQuant.num_scales");
      if (!r.ok()) return r.take_failure();
      if (dt == Datatype::QCInt4 && dims.size() != 2)
        return fail(Error::NotSupported, "XNNPACK value ", index, ": 4-bit weights must be 2-D, got dims ",
                    shape_str(dims));
      if (out.channel_dim >= dims.size())
        return fail(Error::InvalidProgram, "XNNPACK value ", index, ": channel_dim ", out.channel_dim,
                    " is outside its dims ", shape_str(dims));
      ETRT_TRY(out.scales, read_scales(index, inline_scales, buffer, count, false, constants));
      if (static_cast<int64_t>(out.scales.size()) != dims[out.channel_dim])
        return fail(Error::InvalidProgram, "XNNPACK value ", index, ": ", out.scales.size(), " scales for ",
                    dims[out.channel_dim], " channels (dims ", shape_str(dims), ", channel_dim ", out.channel_dim, ")");
      return out;
    }
    case Datatype::QBInt4: {
      ETRT_CHECK_OK(want(qslot::kPerChannelGroup, "per-channel-group"));
      out.kind = QuantKind::PerChannelGroup;
      out.channel_dim = q.scalar<uint32_t>(qslot::kPgChannelDim, 0, "PerChannelGroupQuant.channel_dim");
      const int32_t group = q.scalar<int32_t>(qslot::kPgGroupSize, 0, "PerChannelGroupQuant.group_size");
      const auto inline_scales = q.vector<float>(qslot::kPgScale, "PerChannelGroupQuant.scale");
      const uint32_t buffer = q.scalar<uint32_t>(qslot::kPgScaleBuffer, 0, "PerChannelGroupQuant.scale_buffer_idx");
      const uint32_t count = q.scalar<uint32_t>(qslot::kPgNumScales, 0, "PerChannelGroupQuant.num_scales");
      if (!r.ok()) return r.take_failure();
      if (dims.size() != 2 || out.channel_dim != 0)
        return fail(Error::InvalidProgram, "XNNPACK value ", index, ": blockwise weights must be 2-D [out, in] with "
                    "channel_dim 0, got dims ", shape_str(dims), " and channel_dim ", out.channel_dim);
      if (group <= 0 || dims[1] % group != 0)
        return fail(Error::InvalidProgram, "XNNPACK value ", index, ": group size ", group,
                    " does not divide the ", dims[1], " input channels");
      out.group_size = static_cast<uint32_t>(group);
      ETRT_TRY(out.scales, read_scales(index, inline_scales, buffer, count, true, constants));
      const int64_t want_count = dims[0] * (dims[1] / group);
      if (static_cast<int64_t>(out.scales.size()) != want_count)
        return fail(Error::InvalidProgram, "XNNPACK value ", index, ": ", out.scales.size(), " block scales, dims ",
                    shape_str(dims), " with group size ", group, " need ", want_count);
      return out;
    }
    case Datatype::QDInt8: {
      ETRT_CHECK_OK(want(qslot::kPerTokenDynamic, "per-token dynamic"));
      out.kind = QuantKind::DynamicPerToken;
      out.num_nonbatch_dims = q.scalar<int32_t>(0, 0, "PerTokenDynamicQuant.num_nonbatch_dims");
      if (!r.ok()) return r.take_failure();
      if (out.num_nonbatch_dims < 1 || out.num_nonbatch_dims > static_cast<int32_t>(dims.size()))
        return fail(Error::InvalidProgram, "XNNPACK value ", index, ": num_nonbatch_dims ", out.num_nonbatch_dims,
                    " for dims ", shape_str(dims));
      return out;
    }
    default:
      return fail(Error::NotSupported, "XNNPACK value ", index, " has quantized datatype ",
                  datatype_name(static_cast<int16_t>(dt)), ", which this runtime does not run");
  }
}

}  // namespace detail

}  // namespace etrt::xnnpack
