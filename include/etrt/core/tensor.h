// Tensor: a non-owning view with inline metadata (sizes, strides in elements, dim_order, device).
//
// The storage is owned elsewhere (a planned arena, the program's constants, or a caller's buffer); the owner must
// outlive every Tensor that points into it. Metadata lives inline (fixed capacity) so no pointer ever refers into a
// growing container.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>

#include "etrt/core/result.h"
#include "etrt/core/scalar_type.h"

namespace etrt {

inline constexpr int kMaxDims = 16;

enum class DeviceType : int8_t { CPU = 0, CUDA = 1 };

struct Device {
  DeviceType type = DeviceType::CPU;
  int8_t index = 0;
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool operator==(const Device&) const = default;
  /// "cpu" or "cuda:N", as torch spells devices.
  std::string str() const { return is_cpu() ? std::string("cpu") : cat("cuda:", static_cast<int>(index)); }
};

enum class ShapeDynamism : int8_t { Static = 0, DynamicBound = 1, DynamicUnbound = 2 };

/// Formats a shape as "[2, 3]".
inline std::string shape_str(std::span<const int64_t> sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(sizes[i]);
  }
  return s + "]";
}

/// Number of elements; rank 0 => 1. Returns -1 on overflow or a negative size.
inline int64_t checked_numel(std::span<const int64_t> sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) {
    if (s < 0) return -1;
    if (s != 0 && n > INT64_MAX / s) return -1;
    n *= s;
  }
  return n;
}

/// Strides (elements) implied by a dim order, outermost first: the last dim in dim_order has stride 1.
inline void strides_from_dim_order(std::span<const int64_t> sizes, std::span<const uint8_t> dim_order,
                                   std::span<int64_t> strides_elems) {
  int64_t stride = 1;
  for (size_t k = dim_order.size(); k-- > 0;) {
    const uint8_t d = dim_order[k];
    strides_elems[d] = stride;
    stride *= std::max<int64_t>(sizes[d], 1);
  }
}

/// True when `dim_order` is a permutation of 0..rank-1.
inline bool is_valid_dim_order(std::span<const uint8_t> dim_order) {
  std::array<bool, kMaxDims> seen{};
  for (uint8_t d : dim_order) {
    if (d >= dim_order.size() || seen[d]) return false;
    seen[d] = true;
  }
  return true;
}

class Tensor {
 public:
  Tensor() : sizes_{}, max_sizes_{}, strides_{}, dim_order_{} {}
  // A Tensor is made and copied for each kernel call, and its arrays hold kMaxDims dimensions of which `rank_` are
  // used: copies move only those (about 40 bytes for a 2-D tensor instead of 420). Entries past rank_ are never read.
  Tensor(const Tensor& o) noexcept { copy_from(o); }
  Tensor& operator=(const Tensor& o) noexcept {
    if (this != &o) copy_from(o);
    return *this;
  }

  /// A tensor of `sizes` laid out by `dim_order` (identity when empty), over `data` (may be null until bound).
  static Result<Tensor> make(ScalarType dtype, std::span<const int64_t> sizes, std::span<const uint8_t> dim_order,
                             void* data, ShapeDynamism dynamism = ShapeDynamism::Static, Device device = {}) {
    if (sizes.size() > static_cast<size_t>(kMaxDims))
      return fail(Error::NotSupported, "tensor rank ", sizes.size(), " exceeds the supported maximum ", kMaxDims);
    if (!is_valid(dtype)) return fail(Error::InvalidProgram, "invalid scalar type ", static_cast<int>(dtype));
    if (!dim_order.empty() && dim_order.size() != sizes.size())
      return fail(Error::InvalidProgram, "dim_order length ", dim_order.size(), " != rank ", sizes.size());
    if (!dim_order.empty() && !is_valid_dim_order(dim_order))
      return fail(Error::InvalidProgram, "dim_order is not a permutation of the dimensions");
    if (checked_numel(sizes) < 0) return fail(Error::InvalidProgram, "tensor sizes ", shape_str(sizes), " are invalid");
    if (!span_fits(dtype, sizes)) return fail(Error::InvalidProgram, "tensor sizes ", shape_str(sizes), " overflow");
    Tensor t(Uninitialized{});
    t.dtype_ = dtype;
    t.rank_ = static_cast<int>(sizes.size());
    std::copy(sizes.begin(), sizes.end(), t.sizes_.begin());
    std::copy(sizes.begin(), sizes.end(), t.max_sizes_.begin());
    if (dim_order.empty()) {
      std::iota(t.dim_order_.begin(), t.dim_order_.begin() + t.rank_, uint8_t{0});
    } else {
      std::copy(dim_order.begin(), dim_order.end(), t.dim_order_.begin());
    }
    t.data_ = data;
    t.dynamism_ = dynamism;
    t.device_ = device;
    t.update_strides();
    return t;
  }

  ScalarType dtype() const { return dtype_; }
  int dim() const { return rank_; }
  std::span<const int64_t> sizes() const { return {sizes_.data(), static_cast<size_t>(rank_)}; }
  std::span<const int64_t> strides() const { return {strides_.data(), static_cast<size_t>(rank_)}; }
  std::span<const uint8_t> dim_order() const { return {dim_order_.data(), static_cast<size_t>(rank_)}; }
  /// Upper-bound sizes (the serialized sizes); equal to sizes() for static tensors.
  std::span<const int64_t> max_sizes() const { return {max_sizes_.data(), static_cast<size_t>(rank_)}; }
  int64_t size(int d) const { return sizes_[d]; }
  int64_t stride(int d) const { return strides_[d]; }
  int64_t numel() const { return checked_numel(sizes()); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(dtype_); }
  /// Bytes of the upper-bound shape: what planned storage holds.
  size_t capacity_nbytes() const { return static_cast<size_t>(checked_numel(max_sizes())) * element_size(dtype_); }
  ShapeDynamism dynamism() const { return dynamism_; }
  Device device() const { return device_; }
  void* data() const { return data_; }
  template <class T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }
  void set_data(void* p) { data_ = p; }
  void set_device(Device d) { device_ = d; }

  bool is_contiguous_order() const {
    for (int i = 0; i < rank_; ++i)
      if (dim_order_[i] != i) return false;
    return true;
  }

  /// Changes the shape within what the tensor allows: equal sizes for a static tensor, each size at most the
  /// serialized bound for a bounded-dynamic one. The rank never changes.
  Status resize(std::span<const int64_t> new_sizes) {
    if (new_sizes.size() != static_cast<size_t>(rank_))
      return fail(Error::NotSupported, "cannot change rank from ", rank_, " to ", new_sizes.size(), " (shape ",
                  shape_str(sizes()), " -> ", shape_str(new_sizes), ")");
    if (std::equal(new_sizes.begin(), new_sizes.end(), sizes_.begin())) return {};
    if (dynamism_ == ShapeDynamism::Static)
      return fail(Error::NotSupported, "shape ", shape_str(new_sizes), " does not match the static shape ",
                  shape_str(sizes()));
    for (int i = 0; i < rank_; ++i) {
      if (new_sizes[i] < 0) return fail(Error::InvalidArgument, "negative size in ", shape_str(new_sizes));
      if (dynamism_ == ShapeDynamism::DynamicBound && new_sizes[i] > max_sizes_[i])
        return fail(Error::NotSupported, "shape ", shape_str(new_sizes), " exceeds the upper bound ",
                    shape_str(max_sizes()), " in dimension ", i);
    }
    if (!span_fits(dtype_, new_sizes))
      return fail(Error::InvalidArgument, "shape ", shape_str(new_sizes), " overflows the strides of a ",
                  numpy_name(dtype_), " tensor");
    if (dynamism_ == ShapeDynamism::DynamicUnbound) {
      const int64_t n = checked_numel(new_sizes);
      if (n < 0 || n > checked_numel(max_sizes()))
        return fail(Error::NotSupported, "shape ", shape_str(new_sizes), " needs more storage than the ",
                    shape_str(max_sizes()), " allocated");
    }
    std::copy(new_sizes.begin(), new_sizes.end(), sizes_.begin());
    update_strides();
    return {};
  }

  /// The description used in messages: "float32[2, 3]".
  std::string describe() const { return cat(numpy_name(dtype_), shape_str(sizes())); }

 private:
  struct Uninitialized {};
  explicit Tensor(Uninitialized) {}  // the arrays are filled up to rank_ by the caller

  void copy_from(const Tensor& o) {
    data_ = o.data_;
    dtype_ = o.dtype_;
    rank_ = o.rank_;
    dynamism_ = o.dynamism_;
    device_ = o.device_;
    const auto r = static_cast<size_t>(rank_);
    std::copy_n(o.sizes_.begin(), r, sizes_.begin());
    std::copy_n(o.max_sizes_.begin(), r, max_sizes_.begin());
    std::copy_n(o.strides_.begin(), r, strides_.begin());
    std::copy_n(o.dim_order_.begin(), r, dim_order_.begin());
  }

  /// Whether the byte strides of `sizes` fit in int64. Strides multiply every size but a zero one, so [0, 2^40,
  /// 2^40] has no elements and still overflows them; kernels compute byte offsets from strides even for an empty
  /// tensor (a slice of it), so no tensor may have such sizes, whether it is made or resized.
  static bool span_fits(ScalarType dtype, std::span<const int64_t> sizes) {
    int64_t span = static_cast<int64_t>(element_size(dtype));
    for (int64_t s : sizes) {
      const int64_t f = std::max<int64_t>(s, 1);
      if (span > INT64_MAX / f) return false;
      span *= f;
    }
    return true;
  }

  void update_strides() {
    strides_from_dim_order(sizes(), dim_order(), std::span<int64_t>(strides_.data(), static_cast<size_t>(rank_)));
  }

  void* data_ = nullptr;
  ScalarType dtype_ = ScalarType::Float;
  int rank_ = 0;
  ShapeDynamism dynamism_ = ShapeDynamism::Static;
  Device device_{};
  std::array<int64_t, kMaxDims> sizes_;
  std::array<int64_t, kMaxDims> max_sizes_;
  std::array<int64_t, kMaxDims> strides_;
  std::array<uint8_t, kMaxDims> dim_order_;
};

}  // namespace etrt
