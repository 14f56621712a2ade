// kiln's logger: messages at a level, printed to stderr as "kiln: warning: ..." when the level
// is enabled (KILN_LOG=warning|info|debug, default warning; API: set_log_level). Tests and
// applications can route messages elsewhere with set_log_sink.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace kiln {

enum class LogLevel { kWarning = 0, kInfo = 1, kDebug = 2 };

void log(LogLevel level, std::string_view message);
inline void log_warning(std::string_view message) { log(LogLevel::kWarning, message); }
inline void log_info(std::string_view message) { log(LogLevel::kInfo, message); }

// Messages above this level are dropped (default: KILN_LOG, else warning).
void set_log_level(LogLevel level);
LogLevel log_level();

// Receives every enabled message instead of stderr; nullptr restores stderr. Returns the
// previous sink.
using LogSink = std::function<void(LogLevel, std::string_view)>;
LogSink set_log_sink(LogSink sink);

}  // namespace kiln
