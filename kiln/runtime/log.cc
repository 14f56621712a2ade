#include "kiln/runtime/log.h"

#include <atomic>
#include <cstdio>
#include <mutex>

#include "kiln/runtime/knobs.h"

namespace kiln {
namespace {

std::mutex g_mutex;
LogSink g_sink;

LogLevel level_from_env() {
  std::string s = runtime::knobs::log_level();
  if (s == "debug") return LogLevel::kDebug;
  if (s == "info") return LogLevel::kInfo;
  return LogLevel::kWarning;
}

// Read without the lock: callers on hot paths (each GEMM asks whether to log its plan) check
// the level before building a message.
std::atomic<LogLevel>& level_ref() {
  static std::atomic<LogLevel> level{level_from_env()};
  return level;
}

const char* level_name(LogLevel l) {
  switch (l) {
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kDebug:
      return "debug";
  }
  return "?";
}

}  // namespace

void log(LogLevel level, std::string_view message) {
  if (int(level) > int(level_ref().load(std::memory_order_relaxed))) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_sink) {
    g_sink(level, message);
    return;
  }
  std::fprintf(stderr, "kiln: %s: %.*s\n", level_name(level), int(message.size()), message.data());
}

void set_log_level(LogLevel level) { level_ref().store(level, std::memory_order_relaxed); }

LogLevel log_level() { return level_ref().load(std::memory_order_relaxed); }

LogSink set_log_sink(LogSink sink) {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::swap(g_sink, sink);
  return sink;
}

}  // namespace kiln
