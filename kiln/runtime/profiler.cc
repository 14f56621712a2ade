#include "kiln/runtime/profiler.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "kiln/runtime/file_io.h"
#include "kiln/runtime/knobs.h"
#include "kiln/runtime/log.h"

namespace kiln::runtime {

namespace detail {
constinit std::atomic<uint64_t> g_profile_id{0};
}  // namespace detail

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// One thread's events of the running profile. Its owner appends under `mutex`, which nobody
// else holds but while collecting the profile, so recording threads never wait for each other
// (one process-wide lock had made fine-grained events, such as an attention kernel's thousands
// of small products, several times slower under the profiler than without it).
struct ThreadEvents {
  std::mutex mutex;
  std::vector<ProfileEvent> events;
};

// The running profile's state. `mutex` guards next_profile and the list of buffers; the buffers
// are never freed (a thread that exits hands its buffer, events and all, to the next thread
// that records). Allocated once and never freed, so scopes closing during static destruction
// (other libraries' destructors, TBB workers) still find it.
struct ProfilerState {
  std::mutex mutex;
  uint64_t next_profile = 1;
  std::atomic<int64_t> origin_ns{0};  // steady clock at the profile's start
  std::vector<std::unique_ptr<ThreadEvents>> buffers;
  std::vector<ThreadEvents*> free_buffers;  // of threads that have exited
  std::atomic<int64_t> recorded{0}, dropped{0};
};

ProfilerState& state() {
  static ProfilerState* s = new ProfilerState;
  return *s;
}

// This thread's buffer, taken on its first event and given back when the thread exits.
struct ThreadBuffer {
  ThreadEvents* events = nullptr;
  ~ThreadBuffer() {
    if (events == nullptr) return;
    ProfilerState& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    s.free_buffers.push_back(std::exchange(events, nullptr));
  }
};
thread_local ThreadBuffer t_buffer;

ThreadEvents& this_thread_events() {
  if (t_buffer.events != nullptr) return *t_buffer.events;
  ProfilerState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.free_buffers.empty()) {
    t_buffer.events = s.free_buffers.back();
    s.free_buffers.pop_back();
  } else {
    s.buffers.push_back(std::make_unique<ThreadEvents>());
    t_buffer.events = s.buffers.back().get();
  }
  return *t_buffer.events;
}

std::atomic<int> g_next_thread{0};

int this_thread_number() {
  thread_local int number = -1;
  if (number < 0) number = g_next_thread.fetch_add(1, std::memory_order_relaxed);
  return number;
}

void sort_events(std::vector<ProfileEvent>& events) {
  // Parents before the events nested in them (same start: longer first); the names break the
  // remaining ties, so the order does not depend on which thread recorded first.
  std::sort(events.begin(), events.end(), [](const ProfileEvent& a, const ProfileEvent& b) {
    return std::tie(a.start_ns, b.duration_ns, a.thread, a.name, a.category, a.detail) <
           std::tie(b.start_ns, a.duration_ns, b.thread, b.name, b.category, b.detail);
  });
}

// Ends the running profile: its events (sorted) and how many were dropped. Profiling is off
// before any buffer is drained: a thread appends only while holding its buffer's lock and
// seeing its profile still running, so an event is either drained here or dropped.
std::pair<std::vector<ProfileEvent>, int64_t> end_profile() {
  ProfilerState& s = state();
  std::vector<ProfileEvent> events;
  int64_t dropped = 0;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    detail::g_profile_id.store(0, std::memory_order_relaxed);
    for (const std::unique_ptr<ThreadEvents>& b : s.buffers) {
      std::lock_guard<std::mutex> buffer_lock(b->mutex);
      std::move(b->events.begin(), b->events.end(), std::back_inserter(events));
      b->events.clear();
    }
    dropped = s.dropped.exchange(0);
    s.recorded = 0;
  }
  sort_events(events);
  return {std::move(events), dropped};
}

std::string dropped_message(int64_t dropped) {
  return fmt::format(
      "profiler: {} events were dropped after the first {} of the profile; profile fewer steps",
      dropped, kMaxProfileEvents);
}

// ---------------------------------------------------------------- JSON

// Appends s as a JSON string literal: quotes, backslashes and control characters escaped,
// bytes that are not valid UTF-8 replaced by U+FFFD.
void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
      ++i;
    } else if (c < 0x20) {
      switch (c) {
        case '\n':
          out += "\\n";
          break;
        case '\t':
          out += "\\t";
          break;
        case '\r':
          out += "\\r";
          break;
        default:
          out += fmt::format("\\u{:04x}", unsigned(c));
      }
      ++i;
    } else if (c < 0x80) {
      out += char(c);
      ++i;
    } else {
      // A UTF-8 sequence: lead byte, then 1-3 continuation bytes (no overlongs, surrogates or
      // code points past U+10FFFF).
      size_t len = c >= 0xC2 && c <= 0xDF   ? 2
                   : c >= 0xE0 && c <= 0xEF ? 3
                   : c >= 0xF0 && c <= 0xF4 ? 4
                                            : 0;
      bool ok = len != 0 && i + len <= s.size();
      for (size_t k = 1; ok && k < len; ++k)
        ok = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
      if (ok && len >= 3) {
        unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
        if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 >= 0xA0) || (c == 0xF0 && c1 < 0x90) ||
            (c == 0xF4 && c1 >= 0x90))
          ok = false;
      }
      if (ok) {
        out.append(s.substr(i, len));
        i += len;
      } else {
        out += "\\ufffd";
        ++i;
      }
    }
  }
  out += '"';
}

// Nanoseconds as microseconds with three decimals, exactly (no floating-point rounding, so
// nested events stay nested in the trace).
std::string microseconds(int64_t ns) {
  const char* sign = ns < 0 ? "-" : "";
  uint64_t a = ns < 0 ? uint64_t(0) - uint64_t(ns) : uint64_t(ns);
  return fmt::format("{}{}.{:03}", sign, a / 1000, a % 1000);
}

std::string json_number(double v) { return std::isfinite(v) ? fmt::format("{}", v) : "0"; }

// ---------------------------------------------------------------- table

std::string truncate_name(const std::string& name, size_t width) {
  if (name.size() <= width) return name;
  return name.substr(0, width - 3) + "...";
}

std::string percent(double part, double whole) {
  return whole > 0 ? fmt::format("{:.1f}%", 100.0 * part / whole) : "-";
}

std::string rate(double amount, int64_t ns) {
  return amount > 0 && ns > 0 ? fmt::format("{:.2f}", amount / double(ns)) : "-";
}

// ---------------------------------------------------------------- KILN_PROFILE

// Starts a profile at program start when KILN_PROFILE is set; at exit writes the trace there and
// prints the table to stderr. Written straight to stderr (not through kiln::log) because other
// translation units' statics may already be destroyed when this destructor runs.
class EnvironmentProfile {
 public:
  EnvironmentProfile() {
    path_ = knobs::profile_path();
    if (path_) start_profiling();
  }
  ~EnvironmentProfile() {
    if (!path_) return;
    try {
      auto [events, dropped] = end_profile();
      if (dropped > 0)
        std::fprintf(stderr, "kiln: warning: %s\n", dropped_message(dropped).c_str());
      std::string table = profile_table(events);
      std::fprintf(stderr, "kiln: profile (KILN_PROFILE=%s):\n%s", path_->c_str(), table.c_str());
      write_chrome_trace(*path_, events);
      std::fprintf(stderr, "kiln: wrote %zu profile events to %s (open it at ui.perfetto.dev)\n",
                   events.size(), path_->c_str());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "kiln: warning: KILN_PROFILE: %s\n", e.what());
    } catch (...) {
      std::fprintf(stderr, "kiln: warning: KILN_PROFILE: writing the profile failed\n");
    }
  }

 private:
  std::optional<std::string> path_;
};

EnvironmentProfile g_environment_profile;

}  // namespace

// ---------------------------------------------------------------- profiles and scopes

void start_profiling() {
  ProfilerState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (detail::g_profile_id.load(std::memory_order_relaxed) != 0) return;
  for (const std::unique_ptr<ThreadEvents>& b : s.buffers) {
    std::lock_guard<std::mutex> buffer_lock(b->mutex);
    b->events.clear();
  }
  s.recorded = 0;
  s.dropped = 0;
  s.origin_ns = now_ns();
  // (release: a scope that sees the new id when it closes also sees the new origin)
  detail::g_profile_id.store(s.next_profile++, std::memory_order_release);
}

std::vector<ProfileEvent> stop_profiling() {
  auto [events, dropped] = end_profile();
  if (dropped > 0) log_warning(dropped_message(dropped));
  return std::move(events);
}

std::vector<ProfileEvent> profile_events() {
  ProfilerState& s = state();
  std::vector<ProfileEvent> events;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (detail::g_profile_id.load(std::memory_order_relaxed) == 0) return events;
    for (const std::unique_ptr<ThreadEvents>& b : s.buffers) {
      std::lock_guard<std::mutex> buffer_lock(b->mutex);
      events.insert(events.end(), b->events.begin(), b->events.end());
    }
  }
  sort_events(events);
  return events;
}

void ProfileScope::begin(uint64_t profile, std::string_view name, const char* category,
                         double flops, double bytes) {
  profile_ = profile;
  category_ = category;
  flops_ = flops;
  bytes_ = bytes;
  name_.assign(name);
  start_ns_ = now_ns();
}

void ProfileScope::end() {
  const int64_t end_ns = now_ns();
  const int thread = this_thread_number();
  ProfilerState& s = state();
  ThreadEvents& mine = this_thread_events();
  std::lock_guard<std::mutex> lock(mine.mutex);
  if (detail::g_profile_id.load(std::memory_order_acquire) != profile_) return;
  if (s.recorded.fetch_add(1, std::memory_order_relaxed) >= int64_t(kMaxProfileEvents)) {
    s.dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  mine.events.push_back(ProfileEvent{std::move(name_), category_ ? category_ : "",
                                     start_ns_ - s.origin_ns.load(std::memory_order_relaxed),
                                     end_ns - start_ns_, thread, flops_, bytes_,
                                     std::move(detail_)});
}

// ---------------------------------------------------------------- summary and table

std::vector<ProfileRow> profile_summary(const std::vector<ProfileEvent>& events) {
  // Self time: each event minus the events directly nested in it on its thread.
  std::vector<size_t> order(events.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const ProfileEvent &x = events[a], &y = events[b];
    return std::tuple(x.thread, x.start_ns, -x.duration_ns, a) <
           std::tuple(y.thread, y.start_ns, -y.duration_ns, b);
  });
  std::vector<int64_t> self(events.size());
  std::vector<size_t> open;  // enclosing events on the current thread, innermost last
  for (size_t k = 0; k < order.size(); ++k) {
    size_t i = order[k];
    const ProfileEvent& e = events[i];
    self[i] = e.duration_ns;
    if (k > 0 && events[order[k - 1]].thread != e.thread) open.clear();
    while (!open.empty() &&
           events[open.back()].start_ns + events[open.back()].duration_ns <= e.start_ns)
      open.pop_back();
    if (!open.empty()) {
      const ProfileEvent& parent = events[open.back()];
      if (e.start_ns + e.duration_ns <= parent.start_ns + parent.duration_ns)
        self[open.back()] -= e.duration_ns;
    }
    open.push_back(i);
  }

  std::map<std::pair<std::string, std::string>, ProfileRow> rows;
  for (size_t i = 0; i < events.size(); ++i) {
    const ProfileEvent& e = events[i];
    ProfileRow& r = rows[{e.name, e.category}];
    r.calls += 1;
    r.total_ns += e.duration_ns;
    r.self_ns += std::max<int64_t>(self[i], 0);
    if (e.flops > 0) {
      r.flops += e.flops;
      r.flops_ns += e.duration_ns;
    }
    if (e.bytes > 0) {
      r.bytes += e.bytes;
      r.bytes_ns += e.duration_ns;
    }
  }
  std::vector<ProfileRow> result;
  result.reserve(rows.size());
  for (auto& [key, row] : rows) {
    row.name = key.first;
    row.category = key.second;
    result.push_back(std::move(row));
  }
  // Longest first; rows of equal time by name and category (each pair is one row).
  std::sort(result.begin(), result.end(), [](const ProfileRow& a, const ProfileRow& b) {
    return std::tie(b.total_ns, a.name, a.category) < std::tie(a.total_ns, b.name, b.category);
  });
  return result;
}

std::string profile_table(const std::vector<ProfileEvent>& events) {
  std::vector<ProfileRow> rows = profile_summary(events);
  int64_t profiled_ns = 0, calls = 0;
  double flops = 0, bytes = 0;
  for (const ProfileRow& r : rows) {
    profiled_ns += r.self_ns;
    calls += r.calls;
    flops += r.flops;
    bytes += r.bytes;
  }

  constexpr size_t kMaxNameWidth = 80;
  using Cells = std::vector<std::string>;
  const Cells header = {"Name",    "Category", "Calls",  "Total ms", "Avg us",
                        "Total %", "Self ms",  "Self %", "GFLOP/s",  "GB/s"};
  std::vector<Cells> body;
  for (const ProfileRow& r : rows) {
    body.push_back({truncate_name(r.name, kMaxNameWidth), r.category, fmt::format("{}", r.calls),
                    fmt::format("{:.3f}", double(r.total_ns) / 1e6),
                    fmt::format("{:.3f}", r.average_us()),
                    percent(double(r.total_ns), double(profiled_ns)),
                    fmt::format("{:.3f}", double(r.self_ns) / 1e6),
                    percent(double(r.self_ns), double(profiled_ns)), rate(r.flops, r.flops_ns),
                    rate(r.bytes, r.bytes_ns)});
  }
  const Cells total = {"total",
                       "",
                       fmt::format("{}", calls),
                       fmt::format("{:.3f}", double(profiled_ns) / 1e6),
                       "",
                       profiled_ns > 0 ? "100.0%" : "-",
                       fmt::format("{:.3f}", double(profiled_ns) / 1e6),
                       profiled_ns > 0 ? "100.0%" : "-",
                       rate(flops, profiled_ns),
                       rate(bytes, profiled_ns)};

  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) {
    width[c] = std::max(header[c].size(), total[c].size());
    for (const Cells& row : body) width[c] = std::max(width[c], row[c].size());
  }
  auto line = [&](const Cells& cells) {
    std::string out;
    for (size_t c = 0; c < cells.size(); ++c) {
      if (c > 0) out += "  ";
      // Name and category left-aligned, numbers right-aligned.
      out += c < 2 ? fmt::format("{:<{}}", cells[c], width[c])
                   : fmt::format("{:>{}}", cells[c], width[c]);
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  Cells dashes;
  for (size_t w : width) dashes.push_back(std::string(w, '-'));

  std::string out = line(dashes) + line(header) + line(dashes);
  for (const Cells& row : body) out += line(row);
  out += line(dashes) + line(total) + line(dashes);
  return out;
}

// ---------------------------------------------------------------- Chrome trace

std::string chrome_trace_json(const std::vector<ProfileEvent>& events) {
  const long pid = long(::getpid());
  std::string out = "{\"traceEvents\":[\n";
  bool first = true;
  auto separator = [&] {
    if (!first) out += ",\n";
    first = false;
  };
  separator();
  out += fmt::format(
      R"({{"name":"process_name","ph":"M","pid":{},"tid":0,"args":{{"name":"kiln"}}}})", pid);
  std::set<int> threads;
  for (const ProfileEvent& e : events) threads.insert(e.thread);
  for (int t : threads) {
    separator();
    out += fmt::format(
        R"({{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":"kiln thread {}"}}}})",
        pid, t, t);
    separator();
    out += fmt::format(
        R"({{"name":"thread_sort_index","ph":"M","pid":{},"tid":{},"args":{{"sort_index":{}}}}})",
        pid, t, t);
  }
  for (const ProfileEvent& e : events) {
    separator();
    out += "{\"name\":";
    append_json_string(out, e.name);
    out += ",\"cat\":";
    append_json_string(out, e.category);
    out += fmt::format(R"(,"ph":"X","ts":{},"dur":{},"pid":{},"tid":{},"args":{{)",
                       microseconds(e.start_ns), microseconds(e.duration_ns), pid, e.thread);
    bool first_arg = true;
    auto arg = [&](const char* key, double v) {
      if (!(v > 0)) return;
      out += fmt::format("{}\"{}\":{}", first_arg ? "" : ",", key, json_number(v));
      first_arg = false;
    };
    arg("flops", e.flops);
    arg("bytes", e.bytes);
    if (e.duration_ns > 0) {
      arg("GFLOP/s", e.flops / double(e.duration_ns));
      arg("GB/s", e.bytes / double(e.duration_ns));
    }
    if (!e.detail.empty()) {
      out += first_arg ? "\"detail\":" : ",\"detail\":";
      append_json_string(out, e.detail);
    }
    out += "}}";
  }
  out += "\n],\"displayTimeUnit\":\"ms\"}\n";
  return out;
}

void write_chrome_trace(const std::string& path, const std::vector<ProfileEvent>& events) {
  write_file_atomically(path, chrome_trace_json(events));
}

}  // namespace kiln::runtime
