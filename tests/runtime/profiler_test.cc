// The profiler (runtime/profiler.h): profiles record scopes only while on; nesting and thread
// numbers; the summary table's numbers against hand-computed synthetic events; the Chrome trace
// parsed with nlohmann::json (escaping, units, metadata); write_chrome_trace; and KILN_PROFILE
// end to end by running this binary again as a child process with the knob set.
#include "kiln/runtime/profiler.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kiln/ir/error.h"
#include "kiln/runtime/knobs.h"

namespace kiln::runtime {
namespace {

using nlohmann::json;

// Profiles are process-wide: these tests cannot run under KILN_PROFILE (they stop its profile).
class ProfilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (knobs::profile_path()) GTEST_SKIP() << "KILN_PROFILE is set";
    stop_profiling();
  }
  void TearDown() override {
    if (!knobs::profile_path()) stop_profiling();
  }
};

// A fresh temporary directory, removed afterwards.
class TempDir {
 public:
  TempDir() {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "kiln_profiler_test_XXXXXX").string();
    if (mkdtemp(tmpl.data()) != nullptr) dir_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  const std::string& path() const { return dir_; }

 private:
  std::string dir_;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> split_words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// The table row whose first word is `name` (its words), or empty.
std::vector<std::string> table_row(const std::string& table, const std::string& name) {
  std::istringstream in(table);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> words = split_words(line);
    if (!words.empty() && words[0] == name) return words;
  }
  return {};
}

ProfileEvent event(std::string name, std::string category, double start_ms, double duration_ms,
                   int thread = 0, double flops = 0, double bytes = 0) {
  return ProfileEvent{std::move(name),
                      std::move(category),
                      std::llround(start_ms * 1e6),
                      std::llround(duration_ms * 1e6),
                      thread,
                      flops,
                      bytes,
                      {}};
}

// ---------------------------------------------------------------- profiles and scopes

TEST_F(ProfilerTest, RecordsOnlyWhileEnabled) {
  EXPECT_FALSE(profiling_enabled());
  { ProfileScope off("before", "op"); }
  EXPECT_TRUE(profile_events().empty());

  start_profiling();
  EXPECT_TRUE(profiling_enabled());
  EXPECT_TRUE(profile_events().empty());  // the scope opened while off left nothing
  {
    std::string name = "fusion.3";
    ProfileScope scope(name, "kernel", 100, 200);
    name = "changed";  // the scope keeps its own copy
  }
  std::vector<ProfileEvent> snapshot = profile_events();
  ASSERT_EQ(snapshot.size(), 1u);
  EXPECT_EQ(snapshot[0].name, "fusion.3");
  EXPECT_EQ(snapshot[0].category, "kernel");
  EXPECT_EQ(snapshot[0].flops, 100);
  EXPECT_EQ(snapshot[0].bytes, 200);
  EXPECT_GE(snapshot[0].start_ns, 0);
  EXPECT_GE(snapshot[0].duration_ns, 0);

  start_profiling();  // already on: keeps the profile
  {
    ProfileScope scope("matmul.1", "contraction");
    scope.set_flops(7);
    scope.set_bytes(8);
  }
  std::vector<ProfileEvent> events = stop_profiling();
  EXPECT_FALSE(profiling_enabled());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].name, "matmul.1");
  EXPECT_EQ(events[1].flops, 7);
  EXPECT_EQ(events[1].bytes, 8);
  EXPECT_TRUE(profile_events().empty());
  EXPECT_TRUE(stop_profiling().empty());

  { ProfileScope after("after", "op"); }
  start_profiling();
  EXPECT_TRUE(profile_events().empty());
}

TEST_F(ProfilerTest, ScopeSpanningProfilesIsDropped) {
  start_profiling();
  {
    ProfileScope old_profile("old", "call");
    stop_profiling();
    start_profiling();
    { ProfileScope new_profile("new", "call"); }
  }
  std::vector<ProfileEvent> events = stop_profiling();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].name, "new");
}

TEST_F(ProfilerTest, NestedScopesNestInTime) {
  start_profiling();
  {
    ProfileScope outer("step", "call");
    { ProfileScope a("fusion.0", "kernel"); }
    { ProfileScope b("fusion.1", "kernel"); }
  }
  std::vector<ProfileEvent> events = stop_profiling();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].name, "step");  // ordered by start: the parent first
  EXPECT_EQ(events[1].name, "fusion.0");
  EXPECT_EQ(events[2].name, "fusion.1");
  const ProfileEvent& outer = events[0];
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_EQ(events[i].thread, outer.thread);
    EXPECT_GE(events[i].start_ns, outer.start_ns);
    EXPECT_LE(events[i].start_ns + events[i].duration_ns, outer.start_ns + outer.duration_ns);
  }
  EXPECT_LE(events[1].start_ns + events[1].duration_ns, events[2].start_ns);
}

TEST_F(ProfilerTest, ThreadsGetTheirOwnNumbers) {
  start_profiling();
  { ProfileScope main_scope("main", "call"); }
  auto work = [](const char* name) {
    for (int i = 0; i < 3; ++i) ProfileScope scope(name, "op");
  };
  std::thread t1(work, "t1"), t2(work, "t2");
  t1.join();
  t2.join();
  std::vector<ProfileEvent> events = stop_profiling();
  ASSERT_EQ(events.size(), 7u);
  std::map<std::string, std::set<int>> threads;
  for (const ProfileEvent& e : events) threads[e.name].insert(e.thread);
  ASSERT_EQ(threads["t1"].size(), 1u);
  ASSERT_EQ(threads["t2"].size(), 1u);
  int main_tid = *threads["main"].begin(), tid1 = *threads["t1"].begin(),
      tid2 = *threads["t2"].begin();
  EXPECT_NE(tid1, tid2);
  EXPECT_NE(tid1, main_tid);
  EXPECT_NE(tid2, main_tid);
  for (int t : {main_tid, tid1, tid2}) {
    EXPECT_GE(t, 0);
    EXPECT_LT(t, 1000);  // small numbers, not OS thread ids
  }
}

// Each thread records into its own buffer: events of threads that exited before the profile
// stopped are kept (their buffers go to later threads, events and all), every event of threads
// recording at the same time arrives once, and a new profile starts empty.
TEST_F(ProfilerTest, EventsOfEveryThreadArriveOnce) {
  start_profiling();
  for (int round = 0; round < 3; ++round) {  // threads that exit one after another
    std::thread t([round] { ProfileScope scope("round " + std::to_string(round), "op"); });
    t.join();
  }
  constexpr int kThreads = 4, kEach = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([t] {
      for (int i = 0; i < kEach; ++i) ProfileScope scope("t" + std::to_string(t), "op", double(i));
    });
  for (std::thread& t : threads) t.join();
  std::vector<ProfileEvent> events = stop_profiling();
  std::map<std::string, std::vector<double>> seen;
  for (const ProfileEvent& e : events) seen[e.name].push_back(e.flops);
  ASSERT_EQ(events.size(), size_t(3 + kThreads * kEach));
  for (int round = 0; round < 3; ++round)
    EXPECT_EQ(seen["round " + std::to_string(round)].size(), 1u) << round;
  for (int t = 0; t < kThreads; ++t) {
    std::vector<double> flops = seen["t" + std::to_string(t)];
    std::sort(flops.begin(), flops.end());
    ASSERT_EQ(flops.size(), size_t(kEach)) << t;
    for (int i = 0; i < kEach; ++i) EXPECT_EQ(flops[size_t(i)], double(i)) << t;
  }
  start_profiling();
  { ProfileScope scope("fresh", "op"); }
  std::thread([] { ProfileScope scope("fresh thread", "op"); }).join();
  events = stop_profiling();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].name, "fresh");
  EXPECT_EQ(events[1].name, "fresh thread");
}

// ---------------------------------------------------------------- summary and table

// Thread 0: one call of "step" over [0, 10) ms with fusion.1 at [1, 2) and [3, 5) and
// matmul.0 at [5, 8) inside it; thread 1: fusion.1 at [0, 1). Self time of step: 10 - 6 = 4 ms;
// profiled time: 4 + (1 + 2 + 1) + 3 = 11 ms.
std::vector<ProfileEvent> synthetic_events() {
  return {event("step", "call", 0, 10), event("fusion.1", "kernel", 1, 1, 0, 0, 1e6),
          event("fusion.1", "kernel", 3, 2, 0, 0, 1e6),
          event("matmul.0", "contraction", 5, 3, 0, 6e6, 0),
          event("fusion.1", "kernel", 0, 1, 1, 0, 1e6)};
}

TEST_F(ProfilerTest, SummaryTotalsCallsAndSelfTimes) {
  std::vector<ProfileRow> rows = profile_summary(synthetic_events());
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].name, "step");
  EXPECT_EQ(rows[0].category, "call");
  EXPECT_EQ(rows[0].calls, 1);
  EXPECT_EQ(rows[0].total_ns, 10'000'000);
  EXPECT_EQ(rows[0].self_ns, 4'000'000);
  EXPECT_EQ(rows[0].gflops_per_second(), 0);
  EXPECT_EQ(rows[0].gigabytes_per_second(), 0);

  EXPECT_EQ(rows[1].name, "fusion.1");
  EXPECT_EQ(rows[1].calls, 3);
  EXPECT_EQ(rows[1].total_ns, 4'000'000);
  EXPECT_EQ(rows[1].self_ns, 4'000'000);
  EXPECT_DOUBLE_EQ(rows[1].average_us(), 4000.0 / 3);
  EXPECT_DOUBLE_EQ(rows[1].gigabytes_per_second(), 3e6 / 4e6);

  EXPECT_EQ(rows[2].name, "matmul.0");
  EXPECT_EQ(rows[2].calls, 1);
  EXPECT_EQ(rows[2].total_ns, 3'000'000);
  EXPECT_DOUBLE_EQ(rows[2].gflops_per_second(), 2.0);  // 6e6 flops in 3 ms
}

TEST_F(ProfilerTest, TableColumns) {
  std::string table = profile_table(synthetic_events());
  SCOPED_TRACE("\n" + table);
  std::vector<std::string> lines;
  {
    std::istringstream in(table);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
  }
  // dashes, header, dashes, 3 rows, dashes, total, dashes
  ASSERT_EQ(lines.size(), 9u);
  EXPECT_EQ(split_words(lines[1]),
            (std::vector<std::string>{"Name", "Category", "Calls", "Total", "ms", "Avg", "us",
                                      "Total", "%", "Self", "ms", "Self", "%", "GFLOP/s", "GB/s"}));
  for (const std::string& line : lines) EXPECT_EQ(line.size(), lines[0].size()) << line;

  using Words = std::vector<std::string>;
  EXPECT_EQ(table_row(table, "step"), (Words{"step", "call", "1", "10.000", "10000.000", "90.9%",
                                             "4.000", "36.4%", "-", "-"}));
  EXPECT_EQ(table_row(table, "fusion.1"), (Words{"fusion.1", "kernel", "3", "4.000", "1333.333",
                                                 "36.4%", "4.000", "36.4%", "-", "0.75"}));
  EXPECT_EQ(table_row(table, "matmul.0"),
            (Words{"matmul.0", "contraction", "1", "3.000", "3000.000", "27.3%", "3.000", "27.3%",
                   "2.00", "-"}));
  // total: 5 calls, 11 ms profiled; 6e6 flops and 3e6 bytes over 11 ms
  EXPECT_EQ(table_row(table, "total"),
            (Words{"total", "5", "11.000", "100.0%", "11.000", "100.0%", "0.55", "0.27"}));
  // rows by total time, descending
  EXPECT_LT(table.find("step"), table.find("fusion.1"));
  EXPECT_LT(table.find("fusion.1"), table.find("matmul.0"));
  // numbers are right-aligned: the Calls column ends where its header ends
  size_t calls_end = lines[1].find("Calls") + 5;
  for (size_t i = 3; i < 6; ++i) {
    EXPECT_NE(lines[i][calls_end - 1], ' ') << lines[i];
    EXPECT_EQ(lines[i][calls_end], ' ') << lines[i];
  }
}

TEST_F(ProfilerTest, TableOfNothing) {
  std::string table = profile_table({});
  EXPECT_EQ(table_row(table, "total"),
            (std::vector<std::string>{"total", "0", "0.000", "-", "0.000", "-", "-", "-"}));
}

TEST_F(ProfilerTest, LongNamesAreTruncatedInTheTable) {
  std::string long_name(200, 'x');
  std::string table = profile_table({event(long_name, "kernel", 0, 1)});
  EXPECT_EQ(table.find(long_name), std::string::npos);
  EXPECT_NE(table.find(std::string(77, 'x') + "..."), std::string::npos);
}

// ---------------------------------------------------------------- Chrome trace

TEST_F(ProfilerTest, ChromeTraceParsesWithEscapedNames) {
  std::vector<ProfileEvent> events = {
      event("plain", "kernel", 0.001234, 0.5, 0, 1e6, 2e3),
      event("quote\"back\\slash", "op", 1, 0.25, 1),
      event("new\nline\ttab\x01", "call", 2, 0.000001, 2),
      event("caf\xc3\xa9 \xe2\x86\x92 ok", "control", 3, 1, 0),
      event("bad\xff byte", "assign", 4, 1, 0),
      event("", "", 5, 0, 0),
  };
  std::string text = chrome_trace_json(events);
  json trace;
  ASSERT_NO_THROW(trace = json::parse(text)) << text;
  EXPECT_EQ(trace["displayTimeUnit"], "ms");
  ASSERT_TRUE(trace["traceEvents"].is_array());

  std::vector<json> complete;
  std::map<int, std::string> thread_names;
  bool process_name = false;
  for (const json& e : trace["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("name") && e.contains("pid") && e.contains("tid"))
        << e.dump();
    EXPECT_EQ(e["pid"], int(::getpid()));
    if (e["ph"] == "X") complete.push_back(e);
    if (e["ph"] == "M" && e["name"] == "thread_name")
      thread_names[e["tid"].get<int>()] = e["args"]["name"].get<std::string>();
    if (e["ph"] == "M" && e["name"] == "process_name") process_name = true;
  }
  EXPECT_TRUE(process_name);
  EXPECT_EQ(thread_names.size(), 3u);
  for (int t : {0, 1, 2}) EXPECT_EQ(thread_names[t], "kiln thread " + std::to_string(t));

  ASSERT_EQ(complete.size(), events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    const json& e = complete[i];
    std::string want = i == 4 ? "bad\xef\xbf\xbd byte" : events[i].name;  // U+FFFD
    EXPECT_EQ(e["name"].get<std::string>(), want);
    EXPECT_EQ(e["cat"].get<std::string>(), events[i].category);
    EXPECT_DOUBLE_EQ(e["ts"].get<double>(), double(events[i].start_ns) / 1e3);
    EXPECT_DOUBLE_EQ(e["dur"].get<double>(), double(events[i].duration_ns) / 1e3);
    EXPECT_EQ(e["tid"], events[i].thread);
    ASSERT_TRUE(e["args"].is_object());
  }
  EXPECT_EQ(complete[0]["ts"].get<double>(), 1.234);
  EXPECT_EQ(complete[0]["dur"].get<double>(), 500.0);
  EXPECT_EQ(complete[0]["args"]["flops"].get<double>(), 1e6);
  EXPECT_EQ(complete[0]["args"]["bytes"].get<double>(), 2e3);
  EXPECT_DOUBLE_EQ(complete[0]["args"]["GFLOP/s"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(complete[0]["args"]["GB/s"].get<double>(), 0.004);
  EXPECT_TRUE(complete[1]["args"].empty());  // unknown flops and bytes are left out
  EXPECT_EQ(complete[2]["dur"].get<double>(), 0.001);
}

TEST_F(ProfilerTest, ChromeTraceOfRecordedScopes) {
  start_profiling();
  {
    ProfileScope outer("train_step", "call");
    ProfileScope inner("fusion.7", "kernel", 1000, 4000);
  }
  std::vector<ProfileEvent> events = stop_profiling();
  json trace = json::parse(chrome_trace_json(events));
  std::vector<std::string> names;
  for (const json& e : trace["traceEvents"])
    if (e["ph"] == "X") names.push_back(e["name"].get<std::string>());
  EXPECT_EQ(names, (std::vector<std::string>{"train_step", "fusion.7"}));
}

TEST_F(ProfilerTest, WriteChromeTrace) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  std::string path = dir.path() + "/trace.json";
  write_chrome_trace(path, synthetic_events());
  json trace = json::parse(read_text(path));
  int complete = 0;
  for (const json& e : trace["traceEvents"]) complete += e["ph"] == "X";
  EXPECT_EQ(complete, 5);

  EXPECT_THROW(write_chrome_trace(dir.path() + "/missing/trace.json", {}), Error);
}

// ---------------------------------------------------------------- KILN_PROFILE

std::string self_executable() {
  std::error_code ec;
  return std::filesystem::read_symlink("/proc/self/exe", ec).string();
}

// Runs only as the child of the tests below (KILN_PROFILER_TEST_CHILD=1, KILN_PROFILE set).
TEST(ProfilerEnvironment, Child) {
  if (!std::getenv("KILN_PROFILER_TEST_CHILD")) GTEST_SKIP() << "run by ProfilerEnvironment tests";
  EXPECT_TRUE(profiling_enabled());
  ProfileScope step("child \"step\"", "call");
  ProfileScope kernel("fusion.42", "kernel", 2e6, 0);
}

// Runs the child with KILN_PROFILE=trace; returns its exit status and stderr.
int run_child(const std::string& trace, const std::string& err_path, std::string& err) {
  std::string exe = self_executable();
  if (exe.empty()) return -1;
  std::string command = "KILN_PROFILER_TEST_CHILD=1 KILN_PROFILE='" + trace + "' '" + exe +
                        "' --gtest_filter=ProfilerEnvironment.Child >/dev/null 2>'" + err_path +
                        "'";
  int status = std::system(command.c_str());
  err = read_text(err_path);
  return status;
}

TEST(ProfilerEnvironment, KilnProfileWritesTraceAndTableAtExit) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  std::string trace_path = dir.path() + "/trace.json", err;
  ASSERT_EQ(run_child(trace_path, dir.path() + "/stderr.txt", err), 0) << err;
  json trace = json::parse(read_text(trace_path));
  std::set<std::string> names;
  for (const json& e : trace["traceEvents"])
    if (e["ph"] == "X") names.insert(e["name"].get<std::string>());
  EXPECT_EQ(names, (std::set<std::string>{"child \"step\"", "fusion.42"}));
  // the table on stderr
  EXPECT_NE(err.find("GFLOP/s"), std::string::npos) << err;
  EXPECT_FALSE(table_row(err, "fusion.42").empty()) << err;
  EXPECT_NE(err.find(trace_path), std::string::npos) << err;
}

TEST(ProfilerEnvironment, UnwritableKilnProfileOnlyWarns) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  std::string err;
  ASSERT_EQ(run_child(dir.path() + "/missing/trace.json", dir.path() + "/stderr.txt", err), 0)
      << err;
  EXPECT_NE(err.find("kiln: warning: KILN_PROFILE"), std::string::npos) << err;
}

}  // namespace
}  // namespace kiln::runtime
