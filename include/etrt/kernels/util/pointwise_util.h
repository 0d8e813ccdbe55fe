// Helpers shared by the unary/compare/select/reduce/softmax/norm/fill kernel families: dim wrapping, mixed-dtype
// elementwise maps, logical-index copies with dtype conversion, and typed views of an input in a chosen dtype.
#pragma once

#include <cstring>
#include <memory>
#include <tuple>
#include <vector>

#include "etrt/kernels/kernel.h"
#include "etrt/kernels/util/broadcast.h"
#include "etrt/kernels/util/dtype_util.h"
#include "etrt/kernels/util/elementwise.h"

namespace etrt::kernels {

/// Wraps a possibly negative dim into [0, rank) (a rank-0 tensor accepts 0 and -1, as torch does).
inline Result<int> wrap_dim(std::string_view op, int64_t dim, int64_t rank) {
  const int64_t r = rank == 0 ? 1 : rank;
  if (dim < -r || dim >= r)
    return fail(Error::InvalidArgument, op, ": dim ", dim, " out of range, expected [", -r, ", ", r - 1, "] for rank ",
                rank);
  return static_cast<int>(dim < 0 ? dim + r : dim);
}

/// The optional `dtype` argument of sum, mean, cumsum and softmax: it may only restate out's dtype.
inline Status check_dtype_arg(std::string_view op, std::optional<ScalarType> dtype, const Tensor& out) {
  if (dtype && *dtype != out.dtype())
    return fail(Error::InvalidArgument, op, ": dtype argument ", name(*dtype), " does not match output dtype ",
                name(out.dtype()));
  return {};
}

/// Strides of `t` as a fixed array.
inline std::array<int64_t, kMaxDims> strides_array(const Tensor& t) {
  std::array<int64_t, kMaxDims> s{};
  std::copy(t.strides().begin(), t.strides().end(), s.begin());
  return s;
}

/// Reads elements of one operand as C: directly when the stored dtype is C, else through a converting loader.
template <class C>
struct Reader {
  const void* base = nullptr;
  LoadFn<C> fn = nullptr;
  bool direct = false;
  static Reader make(const Tensor& t) {
    Reader r;
    r.base = t.data();
    r.direct = t.dtype() == dtype_of<C>;
    r.fn = loader_for<C>(t.dtype());
    return r;
  }
  bool ok() const { return direct || fn != nullptr; }
  C operator()(int64_t i) const {
    if constexpr (std::is_same_v<C, bool>)
      if (direct) return load_bool(base, i);  // never a bool load of an arbitrary byte (load_bool)
    return direct ? static_cast<const C*>(base)[i] : fn(base, i);
  }
};

/// Copies `src` into `out` (same sizes) element by logical index, converting to out's dtype. `Dtypes` lists the
/// output dtypes allowed.
template <class Dtypes>
inline Status copy_convert(std::string_view op, const Tensor& src, Tensor& out) {
  if (!std::ranges::equal(src.sizes(), out.sizes()))
    return fail(Error::InvalidArgument, op, ": source shape ", shape_str(src.sizes()), " does not match output shape ",
                shape_str(out.sizes()));
  const int64_t n = out.numel();
  if (n == 0) return visit(out.dtype(), Dtypes{}, op, []<class T>() -> Status { return {}; });
  if (src.dtype() == out.dtype() && same_dense_layout(src, out) && contains(Dtypes{}, out.dtype())) {
    if (src.data() != out.data()) std::memmove(out.data(), src.data(), out.nbytes());
    return {};
  }
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    T* o = out.data_as<T>();
    if (same_dense_layout(src, out)) {
      bool done = false;
      [&]<class... Ss>(types<Ss...>) {
        (void)((src.dtype() == dtype_of<Ss> ? (done = true, [&] {
           const Ss* s = src.data_as<Ss>();
           for (int64_t i = 0; i < n; ++i) o[i] = convert<T>(s[i]);
         }(), true) : false) || ...);
      }(real_bool_types{});
      if (done) return {};
    }
    const Reader<T> rd = Reader<T>::make(src);
    if (!rd.ok()) return fail(Error::InvalidArgument, op, ": unsupported source dtype ", name(src.dtype()));
    const Shape shape = shape_of(out.sizes());
    const std::array<std::array<int64_t, kMaxDims>, 2> strides{strides_array(out), strides_array(src)};
    for_each_offset<2>(shape, strides, [&](const std::array<int64_t, 2>& off) { o[off[0]] = rd(off[1]); });
    return {};
  });
}

/// A typed read-only view of a tensor as element type T: the tensor's own storage when it already holds T (and,
/// if asked, is laid out contiguously), else a converted contiguous copy.
template <class T>
struct InputAs {
  const T* data = nullptr;
  std::array<int64_t, kMaxDims> strides{};
  std::unique_ptr<T[]> buffer;  // not std::vector: T may be bool

  static Result<InputAs> make(std::string_view op, const Tensor& t, bool force_contiguous = false) {
    InputAs v;
    if (t.dtype() == dtype_of<T> && (!force_contiguous || t.is_contiguous_order())) {
      v.data = t.data_as<const T>();
      v.strides = strides_array(t);
      return v;
    }
    const int64_t n = t.numel();
    v.buffer = std::make_unique<T[]>(static_cast<size_t>(n));
    std::array<uint8_t, kMaxDims> order{};
    for (int i = 0; i < t.dim(); ++i) order[i] = static_cast<uint8_t>(i);
    ETRT_TRY(Tensor dst, Tensor::make(dtype_of<T>, t.sizes(), std::span<const uint8_t>(order.data(), t.dim()),
                                      v.buffer.get()));
    ETRT_CHECK_OK(copy_convert<types<T>>(op, t, dst));
    v.data = v.buffer.get();
    v.strides = strides_array(dst);
    return v;
  }
};

/// Calls body(t) with `t` a rank-0 tensor of dtype `dtype` holding the Scalar `s` (so Scalar overloads reuse the
/// tensor paths; torch's wrapped-number rule keeps the tensor operand's dtype).
template <class Dtypes, class F>
inline Status with_scalar_as(std::string_view op, const Scalar& s, ScalarType dtype, F&& body) {
  return visit(dtype, Dtypes{}, op, [&]<class T>() -> Status {
    T value = convert<T>(scalar_as<compute_t<T>>(s));
    ETRT_TRY(Tensor t, Tensor::make(dtype_of<T>, {}, {}, &value));
    return body(t);
  });
}

using int_bool_types = types<uint8_t, int8_t, int16_t, int32_t, int64_t, bool>;

}  // namespace etrt::kernels
