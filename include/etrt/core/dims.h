// Dims: up to kMaxDims sizes or strides held inline. The per-call paths (inputs read from Python, results handed
// back) copy shapes on every call; a vector there costs an allocation and a free per shape.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "etrt/core/tensor.h"

namespace etrt {

class Dims {
 public:
  Dims() = default;
  /// The caller checks the rank first (and reports a larger one): a rank over kMaxDims is a programming error, and
  /// only its first kMaxDims entries are kept.
  explicit Dims(std::span<const int64_t> v) { assign(v); }

  void assign(std::span<const int64_t> v) {
    n_ = static_cast<uint8_t>(std::min(v.size(), static_cast<size_t>(kMaxDims)));
    std::copy_n(v.begin(), n_, v_.begin());
  }
  /// `n` entries (at most kMaxDims); new ones are zero.
  void resize(size_t n) {
    const auto m = static_cast<uint8_t>(std::min(n, static_cast<size_t>(kMaxDims)));
    std::fill(v_.begin() + std::min(n_, m), v_.begin() + m, int64_t{0});
    n_ = m;
  }

  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  int64_t* data() { return v_.data(); }
  const int64_t* data() const { return v_.data(); }
  int64_t& operator[](size_t i) { return v_[i]; }
  int64_t operator[](size_t i) const { return v_[i]; }
  int64_t* begin() { return v_.data(); }
  int64_t* end() { return v_.data() + n_; }
  const int64_t* begin() const { return v_.data(); }
  const int64_t* end() const { return v_.data() + n_; }
  std::span<int64_t> span() { return {v_.data(), n_}; }
  std::span<const int64_t> span() const { return {v_.data(), n_}; }
  operator std::span<const int64_t>() const { return span(); }

  friend bool operator==(const Dims& a, const Dims& b) { return std::ranges::equal(a.span(), b.span()); }

 private:
  std::array<int64_t, kMaxDims> v_{};
  uint8_t n_ = 0;
};

}  // namespace etrt
