// Complex-number kernels: _conj_physical (conjugate into new storage) and view_as_real_copy (a complex tensor as
// its real and imaginary parts along a new last dim of size 2).
#pragma once

#include <complex>

#include "etrt/kernels/util/movement_util.h"
#include "etrt/kernels/util/pointwise_util.h"

namespace etrt::kernels {

/// _conj_physical.out: negates the imaginary part of complex elements; any other dtype is copied unchanged, as
/// conjugation is the identity on reals. The output dtype must equal the input's (torch refuses a cast here).
template <class Dtypes>
Status conj_physical_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  constexpr std::string_view op = "_conj_physical.out";
  ETRT_CHECK_OK(mv::check_dtype<Dtypes>(op, self, out));
  ETRT_CHECK_OK(ctx.resize(op, out, self.sizes()));
  if (out.numel() == 0) return {};
  return visit(out.dtype(), Dtypes{}, op, [&]<class T>() -> Status {
    if constexpr (std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>) {
      return map_elementwise<T, T>(op, out, [](T z) { return std::conj(z); }, self);
    } else {
      mv::copy_views(sizeof(T), mv::view_of(out), mv::view_of(self));
      return {};
    }
  });
}

/// view_as_real_copy.out: complex64 [...] -> float32 [..., 2], complex128 [...] -> float64 [..., 2].
template <class Dtypes>
Status view_as_real_copy_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  constexpr std::string_view op = "view_as_real_copy.out";
  if (!is_complex(self.dtype()))
    return fail(Error::InvalidArgument, op, ": view_as_real is only supported for complex tensors, got ",
                name(self.dtype()));
  if (!contains(Dtypes{}, self.dtype()))
    return fail(Error::InvalidArgument, op, ": unsupported dtype ", name(self.dtype()));
  const ScalarType part = self.dtype() == ScalarType::ComplexDouble ? ScalarType::Double : ScalarType::Float;
  if (out.dtype() != part)
    return fail(Error::InvalidArgument, op, ": output dtype must be ", name(part), " for a ", name(self.dtype()),
                " input, got ", name(out.dtype()));
  if (self.dim() + 1 > kMaxDims) return fail(Error::NotSupported, op, ": output rank exceeds ", kMaxDims);
  Shape os = shape_of(self.sizes());
  os.sizes[os.rank++] = 2;
  ETRT_CHECK_OK(ctx.resize(op, out, os.span()));
  if (out.numel() == 0) return {};
  // The input as a view of its parts: complex strides doubled, then the (real, imag) pair with stride 1.
  mv::View src;
  src.data = static_cast<char*>(self.data());
  for (int d = 0; d < self.dim(); ++d) src.push(self.size(d), self.stride(d) * 2);
  src.push(2, 1);
  mv::copy_views(element_size(part), mv::view_of(out), src);
  return {};
}

}  // namespace etrt::kernels
