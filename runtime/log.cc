#include "kiln/runtime/log.h"

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

LogLevel& level_ref() {
  static LogLevel level = level_from_env();
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
  std::lock_guard<std::mutex> lock(g_mutex);
  if (int(level) > int(level_ref())) return;
  if (g_sink) {
    g_sink(level, message);
    return;
  }
  std::fprintf(stderr, "kiln: %s: %.*s\n", level_name(level), int(message.size()), message.data());
}

void set_log_level(LogLevel level) {
  std::lock_guard<std::mutex> lock(g_mutex);
  level_ref() = level;
}

LogLevel log_level() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return level_ref();
}

LogSink set_log_sink(LogSink sink) {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::swap(g_sink, sink);
  return sink;
}

}  // namespace kiln
