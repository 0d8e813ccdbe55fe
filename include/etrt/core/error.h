// Error codes and the failure value that carries its message.
//
// The numbers are upstream ExecuTorch's (runtime/core/error.h) so that users who search for "0x12" find the same
// meaning. Unlike upstream, a Failure carries the full message built where the failure happened: what failed,
// where (input, index, instruction) and expected vs got.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
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
inline void append_piece(std::string& s, std::string_view v) { s += v; }
inline void append_piece(std::string& s, const char* v) { s += v; }
inline void append_piece(std::string& s, const std::string& v) { s += v; }
inline void append_piece(std::string& s, char v) { s += v; }
inline void append_piece(std::string& s, bool v) { s += v ? "true" : "false"; }
template <class T>
  requires std::is_arithmetic_v<T>
inline void append_piece(std::string& s, T v) {
  s += std::to_string(v);
}
}  // namespace detail

/// Concatenates the pieces into one message (GCC 12 has no <format>).
template <class... Ts>
inline std::string cat(const Ts&... pieces) {
  std::string s;
  (detail::append_piece(s, pieces), ...);
  return s;
}

/// Builds a Failure out of line so that checks in templates stay small.
template <class... Ts>
[[gnu::cold, gnu::noinline]] inline Failure fail(Error code, const Ts&... pieces) {
  return Failure{code, cat(pieces...)};
}

}  // namespace etrt
