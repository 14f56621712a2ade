// The profiler: per-step timings of compiled functions (and any code that opens a ProfileScope),
// summarized as a table like torch.profiler's key_averages().table() and exported as a Chrome
// trace event JSON file that opens in Perfetto (ui.perfetto.dev) or chrome://tracing.
//
// Contract:
//  - One process-wide profiler. start_profiling() begins a profile; stop_profiling() ends it and
//    returns its events (and forgets them). Every function here is thread-safe.
//  - A ProfileScope records one event (name, category, start, duration, thread, flops, bytes)
//    when it closes, if it opened while profiling was on and the same profile is still running.
//    When profiling is off, opening a scope is one relaxed atomic load: no clock read, no
//    allocation, no lock.
//  - Times are steady-clock nanoseconds; an event's start is relative to its profile's start.
//    Threads are numbered 0, 1, 2, ... in the order they first record an event (for the
//    process's life); nested scopes on one thread nest in time.
//  - At most kMaxProfileEvents events are kept per profile; later ones are counted and dropped
//    (stop_profiling logs a warning with the count).
//  - KILN_PROFILE=trace.json (runtime/knobs.h): a profile starts when the program starts (static
//    initialization of kiln's runtime) and, at normal exit (return from main or std::exit), its
//    events are written to that path as a Chrome trace and the table is printed to stderr.
//    A failure to write is a warning on stderr, never a crash. Abnormal exits write nothing.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::runtime {

struct ProfileEvent {
  std::string name;      // kernel group / op name (as in the IR dump), or a function name
  std::string category;  // "kernel", "contraction", "op", "assign", "control", "call", ...
  int64_t start_ns = 0;  // since the profile started
  int64_t duration_ns = 0;
  int thread = 0;      // small per-thread number (0, 1, 2, ... in order of first use)
  double flops = 0;    // floating-point operations done, 0 when unknown
  double bytes = 0;    // bytes read + written, 0 when unknown
  std::string detail;  // how it ran, e.g. a GEMM's plan (args.detail in the trace); may be ""
};

inline constexpr size_t kMaxProfileEvents = size_t(1) << 22;

namespace detail {
// The running profile's id, 0 when profiling is off. Read it through profiling_enabled().
extern std::atomic<uint64_t> g_profile_id;
}  // namespace detail

inline bool profiling_enabled() {
  return detail::g_profile_id.load(std::memory_order_relaxed) != 0;
}

// Starts a profile (clock origin: now) unless one is running, in which case it does nothing
// (the running profile and its events go on).
void start_profiling();
// Ends the running profile and returns its events, ordered by start time; empty when none ran.
std::vector<ProfileEvent> stop_profiling();
// The running profile's events so far (a copy, ordered by start time); empty when off.
std::vector<ProfileEvent> profile_events();

// Records [construction, destruction) as one event when profiling is on. `category` must
// outlive the scope (pass a string literal); `name` is copied (only when profiling is on).
// flops/bytes may also be set later, before the scope closes.
class ProfileScope {
 public:
  ProfileScope(std::string_view name, const char* category, double flops = 0, double bytes = 0) {
    uint64_t profile = detail::g_profile_id.load(std::memory_order_relaxed);
    if (profile != 0) begin(profile, name, category, flops, bytes);
  }
  ~ProfileScope() {
    if (profile_ != 0) end();
  }
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

  void set_flops(double flops) { flops_ = flops; }
  void set_bytes(double bytes) { bytes_ = bytes; }
  // Whether this scope records an event (profiling was on when it opened): set_detail is then
  // worth building a string for.
  bool recording() const { return profile_ != 0; }
  void set_detail(std::string detail) { detail_ = std::move(detail); }

 private:
  void begin(uint64_t profile, std::string_view name, const char* category, double flops,
             double bytes);
  void end();

  uint64_t profile_ = 0;
  int64_t start_ns_ = 0;
  const char* category_ = nullptr;
  double flops_ = 0, bytes_ = 0;
  std::string name_;
  std::string detail_;
};

// One row of the summary: the events of one (name, category).
struct ProfileRow {
  std::string name, category;
  int64_t calls = 0;
  int64_t total_ns = 0;  // sum of durations
  int64_t self_ns = 0;   // total minus the time of events nested inside them on their thread
  double flops = 0, bytes = 0;
  int64_t flops_ns = 0;  // total time of the events whose flops are known
  int64_t bytes_ns = 0;  // total time of the events whose bytes are known

  double average_us() const { return calls ? double(total_ns) / double(calls) / 1e3 : 0; }
  // 0 when unknown (no flops / bytes, or no time)
  double gflops_per_second() const { return flops_ns > 0 ? flops / double(flops_ns) : 0; }
  double gigabytes_per_second() const { return bytes_ns > 0 ? bytes / double(bytes_ns) : 0; }
};

// Rows sorted by total time (descending), then name and category.
std::vector<ProfileRow> profile_summary(const std::vector<ProfileEvent>& events);

// The summary as an aligned text table:
//   Name  Category  Calls  Total ms  Avg us  Total %  Self ms  Self %  GFLOP/s  GB/s
// Percentages are of the profiled time: the sum of every event's self time (time inside nested
// events counted once; threads add up). GFLOP/s and GB/s are flops (bytes) over the time of
// the events that report them; "-" when unknown. The last row, "total", has all calls, the
// profiled time, and the throughput of all reported flops (bytes) over the profiled time.
std::string profile_table(const std::vector<ProfileEvent>& events);

// Chrome trace event format ("X" complete events with ts/dur in microseconds, args flops,
// bytes and detail when known; "M" process_name / thread_name metadata), pid = this process's id.
std::string chrome_trace_json(const std::vector<ProfileEvent>& events);

// chrome_trace_json written with write_file_atomically; kiln::Error naming the path on failure.
void write_chrome_trace(const std::string& path, const std::vector<ProfileEvent>& events);

}  // namespace kiln::runtime

// The user-facing names, as kiln::start_profiling() etc. (kiln/kiln.h includes this header).
namespace kiln {
using runtime::chrome_trace_json;
using runtime::profile_events;
using runtime::profile_table;
using runtime::ProfileEvent;
using runtime::ProfileScope;
using runtime::profiling_enabled;
using runtime::start_profiling;
using runtime::stop_profiling;
using runtime::write_chrome_trace;
}  // namespace kiln
