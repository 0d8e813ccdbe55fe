// Runtime logging: one process-wide sink (stderr by default) and a minimum level.
//
// The Python bindings install a sink that writes to sys.stderr, so logs show in notebooks where fd 2 is not the
// console. Set ETRT_LOG_LEVEL=debug|info|error|off (default info) to choose what is emitted.
#pragma once

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace etrt {

enum class LogLevel : int { Debug = 0, Info = 1, Error = 2, Off = 3 };  // Off: only a threshold, never a message's level

using LogSink = void (*)(LogLevel, std::string_view message);

inline void stderr_sink(LogLevel, std::string_view message) {
  std::fwrite(message.data(), 1, message.size(), stderr);
  std::fputc('\n', stderr);
}

namespace detail {
inline std::atomic<LogSink>& log_sink_slot() {
  static std::atomic<LogSink> sink{&stderr_sink};
  return sink;
}
inline LogLevel level_from_env() {
  const char* v = std::getenv("ETRT_LOG_LEVEL");
  if (!v) return LogLevel::Info;
  if (std::strcmp(v, "debug") == 0) return LogLevel::Debug;
  if (std::strcmp(v, "error") == 0) return LogLevel::Error;
  if (std::strcmp(v, "off") == 0) return LogLevel::Off;
  return LogLevel::Info;
}
inline std::atomic<int>& log_level_slot() {
  static std::atomic<int> level{static_cast<int>(level_from_env())};
  return level;
}
}  // namespace detail

inline void set_log_sink(LogSink sink) { detail::log_sink_slot().store(sink ? sink : &stderr_sink); }
inline void set_log_level(LogLevel level) { detail::log_level_slot().store(static_cast<int>(level)); }
inline bool log_enabled(LogLevel level) { return static_cast<int>(level) >= detail::log_level_slot().load(); }

/// Emits "[etrt] <level>: <message>" through the current sink when `level` is enabled.
inline void log(LogLevel level, std::string_view message) {
  if (level == LogLevel::Off || !log_enabled(level)) return;
  constexpr std::string_view kNames[] = {"debug", "info", "error"};
  std::string line = "[etrt] ";
  line += kNames[static_cast<int>(level)];
  line += ": ";
  line += message;
  detail::log_sink_slot().load()(level, line);
}

}  // namespace etrt
