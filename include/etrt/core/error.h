// Error codes and the failure value that carries its message.
//
// The numbers are upstream ExecuTorch's (runtime/core/error.h) so that users who search for "0x12" find the same
// meaning. Unlike upstream, a Failure carries the full message built where the failure happened: what failed,
// where (input, index, instruction) and expected vs got.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace etrt {

enum class [[nodiscard]] Error : uint32_t {
  Ok = 0x00,
  Internal = 0x01,
  InvalidState = 0x02,
  EndOfMethod = 0x03,
  AlreadyLoaded = 0x04,
  NotSupported = 0x10,
  NotImplemented = 0x11,
  InvalidArgument = 0x12,
  InvalidType = 0x13,
  OperatorMissing = 0x14,
  RegistrationExceedingMaxKernels = 0x15,
  RegistrationAlreadyRegistered = 0x16,
  NotFound = 0x20,
  MemoryAllocationFailed = 0x21,
  AccessFailed = 0x22,
  InvalidProgram = 0x23,
  InvalidExternalData = 0x24,
  OutOfResources = 0x25,
  DelegateInvalidCompatibility = 0x30,
  DelegateMemoryAllocationFailed = 0x31,
  DelegateInvalidHandle = 0x32,
};

constexpr std::string_view to_string(Error e) {
  switch (e) {
    case Error::Ok: return "Ok";
    case Error::Internal: return "Internal";
    case Error::InvalidState: return "InvalidState";
    case Error::EndOfMethod: return "EndOfMethod";
    case Error::AlreadyLoaded: return "AlreadyLoaded";
    case Error::NotSupported: return "NotSupported";
    case Error::NotImplemented: return "NotImplemented";
    case Error::InvalidArgument: return "InvalidArgument";
    case Error::InvalidType: return "InvalidType";
    case Error::OperatorMissing: return "OperatorMissing";
    case Error::RegistrationExceedingMaxKernels: return "RegistrationExceedingMaxKernels";
    case Error::RegistrationAlreadyRegistered: return "RegistrationAlreadyRegistered";
    case Error::NotFound: return "NotFound";
    case Error::MemoryAllocationFailed: return "MemoryAllocationFailed";
    case Error::AccessFailed: return "AccessFailed";
    case Error::InvalidProgram: return "InvalidProgram";
    case Error::InvalidExternalData: return "InvalidExternalData";
    case Error::OutOfResources: return "OutOfResources";
    case Error::DelegateInvalidCompatibility: return "DelegateInvalidCompatibility";
    case Error::DelegateMemoryAllocationFailed: return "DelegateMemoryAllocationFailed";
    case Error::DelegateInvalidHandle: return "DelegateInvalidHandle";
  }
  return "Unknown";
}

/// A failed operation: a stable code plus a human-readable message naming the cause.
struct Failure {
  Error code = Error::Internal;
  std::string what;

  /// "what (Error::InvalidArgument 0x12)": the form the Python boundary shows.
  std::string describe() const {
    static constexpr char kHex[] = "0123456789abcdef";
    const auto v = static_cast<uint32_t>(code);
    std::string s = what;
    s += " (Error::";
    s += to_string(code);
    s += " 0x";
    s += kHex[(v >> 4) & 0xf];
    s += kHex[v & 0xf];
    s += ')';
    return s;
  }
};

namespace detail {
/// One piece of a message as text. Strings are viewed; numbers are formatted (as std::to_string would) into the
/// piece's own buffer by out-of-line functions, so each combination of piece types that `cat` and `fail` are
/// called with compiles to a few calls instead of its own copy of the formatting code.
class MessagePiece {
 public:
  MessagePiece(std::string_view v) : view_(v) {}      // NOLINT: implicit by design
  MessagePiece(const char* v) : view_(v) {}           // NOLINT
  MessagePiece(const std::string& v) : view_(v) {}    // NOLINT
  MessagePiece(char v) : buf_{v}, view_(buf_, 1) {}   // NOLINT
  MessagePiece(bool v) : view_(v ? "true" : "false") {}  // NOLINT
  template <class T>
    requires std::is_integral_v<T> && std::is_signed_v<T>
  MessagePiece(T v) : view_(format_signed(static_cast<long long>(v))) {}  // NOLINT
  template <class T>
    requires std::is_integral_v<T> && std::is_unsigned_v<T>
  MessagePiece(T v) : view_(format_unsigned(static_cast<unsigned long long>(v))) {}  // NOLINT
  template <class T>
    requires std::is_floating_point_v<T>
  MessagePiece(T v) : view_(format_double(static_cast<double>(v))) {}  // NOLINT
  MessagePiece(const MessagePiece&) = delete;  // view_ may point into buf_
  MessagePiece& operator=(const MessagePiece&) = delete;

  std::string_view view() const { return view_; }

 private:
  [[gnu::noinline]] std::string_view format_signed(long long v) {
    const auto r = std::to_chars(buf_, buf_ + sizeof buf_, v);
    return {buf_, static_cast<size_t>(r.ptr - buf_)};
  }
  [[gnu::noinline]] std::string_view format_unsigned(unsigned long long v) {
    const auto r = std::to_chars(buf_, buf_ + sizeof buf_, v);
    return {buf_, static_cast<size_t>(r.ptr - buf_)};
  }
  [[gnu::noinline]] std::string_view format_double(double v) {
    const int n = std::snprintf(buf_, sizeof buf_, "%f", v);  // std::to_string's format
    return {buf_, n < 0 ? 0 : std::min(static_cast<size_t>(n), sizeof buf_ - 1)};
  }

  char buf_[64] = {};
  std::string_view view_;
};

[[gnu::noinline]] inline std::string join_pieces(std::initializer_list<std::string_view> pieces) {
  size_t n = 0;
  for (std::string_view p : pieces) n += p.size();
  std::string s;
  s.reserve(n);
  for (std::string_view p : pieces) s += p;
  return s;
}
}  // namespace detail

/// Concatenates the pieces into one message (GCC 12 has no <format>).
template <class... Ts>
inline std::string cat(const Ts&... pieces) {
  return detail::join_pieces({detail::MessagePiece(pieces).view()...});
}

/// Builds a Failure out of line so that checks in templates stay small.
template <class... Ts>
[[gnu::cold, gnu::noinline]] inline Failure fail(Error code, const Ts&... pieces) {
  return Failure{code, cat(pieces...)};
}

}  // namespace etrt
