// Helpers the generated kernel wrappers use to read optional and list arguments from EValues.
#pragma once

#include <optional>

#include "etrt/core/evalue.h"

namespace etrt::args {

template <class T>
using Opt = Result<std::optional<T>>;

inline Opt<int64_t> opt_int(const EValue& v, std::string_view n) {
  return v.optional<int64_t>(n, [&] { return v.to_int(n); });
}
inline Opt<double> opt_double(const EValue& v, std::string_view n) {
  return v.optional<double>(n, [&] { return v.to_double(n); });
}
inline Opt<bool> opt_bool(const EValue& v, std::string_view n) {
  return v.optional<bool>(n, [&] { return v.to_bool(n); });
}
inline Opt<Scalar> opt_scalar(const EValue& v, std::string_view n) {
  return v.optional<Scalar>(n, [&] { return v.to_scalar(n); });
}
inline Opt<std::string_view> opt_string(const EValue& v, std::string_view n) {
  return v.optional<std::string_view>(n, [&] { return v.to_string(n); });
}
inline Opt<std::span<const int64_t>> opt_int_list(const EValue& v, std::string_view n) {
  return v.optional<std::span<const int64_t>>(n, [&] { return v.to_int_list(n); });
}
inline Opt<std::span<const double>> opt_double_list(const EValue& v, std::string_view n) {
  return v.optional<std::span<const double>>(n, [&] { return v.to_double_list(n); });
}
inline Result<ScalarType> scalar_type(const EValue& v, std::string_view n) {
  auto i = v.to_int(n);
  if (!i) return std::move(i).error();
  if (*i < 0 || *i >= kNumScalarTypes) return fail(Error::InvalidArgument, "argument '", n, "': invalid dtype ", *i);
  return static_cast<ScalarType>(*i);
}
inline Opt<ScalarType> opt_scalar_type(const EValue& v, std::string_view n) {
  return v.optional<ScalarType>(n, [&] { return scalar_type(v, n); });
}

}  // namespace etrt::args
