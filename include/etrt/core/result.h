// Result<T>: a value or a Failure. Errors are values in the core; exceptions exist only at the Python boundary.
//
// Method names follow std::expected (has_value, value, error, operator*) so the type can be swapped later.
#pragma once

#include <exception>
#include <new>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include "etrt/core/error.h"

namespace etrt {

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(Failure f) : v_(std::in_place_index<1>, std::move(f)) {      // NOLINT
    // A Result built from Ok would claim failure without a cause: make it an Internal error instead.
    if (std::get<1>(v_).code == Error::Ok) std::get<1>(v_).code = Error::Internal;
  }
  Result(Result&&) noexcept = default;
  Result& operator=(Result&&) noexcept = default;
  Result(const Result&) = delete;
  Result& operator=(const Result&) = delete;

  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }
  T& value() & { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const T& value() const& { return std::get<0>(v_); }
  T& operator*() & { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Failure& error() const& { return std::get<1>(v_); }
  Failure&& error() && { return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, Failure> v_;
};

/// Result<void>: success or a Failure.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Failure f) : failed_(true), f_(std::move(f)) {  // NOLINT: implicit by design
    if (f_.code == Error::Ok) f_.code = Error::Internal;
  }
  static Status ok() { return Status(); }
  bool has_value() const { return !failed_; }
  explicit operator bool() const { return !failed_; }
  const Failure& error() const& { return f_; }
  Failure&& error() && { return std::move(f_); }

 private:
  bool failed_ = false;
  Failure f_{Error::Ok, {}};
};

/// Runs `f` (returning Status or a Result) and turns an exception escaping it into a failure: std::bad_alloc into
/// MemoryAllocationFailed, anything else into Internal. The core's entry points (Program::load, Method::load,
/// Method::execute) run their bodies through it, so an allocation a file provokes, or a standard-library check
/// (vector::at, length_error), never escapes the core as an exception.
template <class F>
inline auto errors_as_values(std::string_view where, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return fail(Error::MemoryAllocationFailed, where, ": out of memory");
  } catch (const std::exception& e) {
    return fail(Error::Internal, where, ": ", e.what());
  } catch (...) {
    return fail(Error::Internal, where, ": an unknown exception");
  }
}

}  // namespace etrt

// Statement-form propagation macros (no GNU statement expressions).
#define ETRT_CONCAT_INNER(a, b) a##b
#define ETRT_CONCAT(a, b) ETRT_CONCAT_INNER(a, b)

/// Evaluates a Status expression and returns its Failure from the enclosing function if it failed.
#define ETRT_CHECK_OK(expr)                                   \
  do {                                                        \
    auto etrt_status_ = (expr);                               \
    if (!etrt_status_) return std::move(etrt_status_).error(); \
  } while (0)

/// `ETRT_TRY(auto x, expr);` binds the value of a Result expression or returns its Failure.
#define ETRT_TRY(decl, expr)                                                    \
  auto ETRT_CONCAT(etrt_result_, __LINE__) = (expr);                           \
  if (!ETRT_CONCAT(etrt_result_, __LINE__))                                     \
    return std::move(ETRT_CONCAT(etrt_result_, __LINE__)).error();              \
  decl = std::move(*ETRT_CONCAT(etrt_result_, __LINE__))
