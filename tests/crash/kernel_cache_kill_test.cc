// Crash safety of the kernel disk cache: a process compiling graphs (one kernel each) into a
// cache directory is SIGKILLed at random moments (half of the runs), or kills itself in the
// middle of a random one of its file-writing system calls (the other half: a random moment
// rarely falls into a store, compiling takes far longer). After each kill a fresh process compiles
// and runs the same graphs from that cache: every kernel the killed process finished must come from
// disk, every result must be right, and no cache file may be torn (writes are atomic; a torn or
// foreign file would be counted corrupt, removed and recompiled, never loaded).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "tests/crash/child_process.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using crash_test::ChildProcess;
using crash_test::ChildResult;
using std::chrono::microseconds;
using std::chrono::milliseconds;

struct GraphReport {
  long compiled = 0, disk = 0, corrupt = 0;
};

// The "graph i compiled=m disk=h corrupt=c ok" lines of the writer's output, by graph.
std::map<long, GraphReport> reports(const std::string& output) {
  static const std::regex line(R"(graph (\d+) compiled=(\d+) disk=(\d+) corrupt=(\d+) ok)");
  std::map<long, GraphReport> out;
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line);
       it != std::sregex_iterator(); ++it)
    out[std::stol((*it)[1])] = {std::stol((*it)[2]), std::stol((*it)[3]), std::stol((*it)[4])};
  return out;
}

TEST(CrashSafety, KilledCacheWriterLeavesLoadableOrNoEntries) {
  const fs::path dir =
      fs::temp_directory_path() / ("kiln_cache_kill_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  constexpr int kKills = 80, kGraphs = 3;  // graphs per killed process
  std::mt19937 rng(1124);
  long syscalls = 0;  // file-writing system calls of a full run

  // How long one process takes for kGraphs graphs, to spread the kills over it.
  auto t0 = std::chrono::steady_clock::now();
  {
    ChildProcess probe(
        {KILN_CRASH_WRITER, "cache", (dir / "probe").string(), "0", std::to_string(kGraphs)});
    ChildResult r = probe.finish(milliseconds(60000));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.output, m, std::regex(R"(file syscalls (\d+))"))) << r.output;
    syscalls = std::stol(m[1]);
    ASSERT_GE(syscalls, kGraphs) << "each graph stores its kernel: one write() at least";
  }
  const auto full_run =
      std::chrono::duration_cast<microseconds>(std::chrono::steady_clock::now() - t0);
  std::uniform_int_distribution<long> delay_us(0, full_run.count() * 3 / 4);  // after "ready"
  std::uniform_int_distribution<long> die_at(1, syscalls);

  int killed_at_random = 0, killed_in_syscall = 0, not_killed = 0;
  int finished_by_killed = 0, from_disk = 0, recompiled = 0, corrupt = 0, wrong = 0;
  std::string first_problem;
  auto start = std::chrono::steady_clock::now();
  for (int k = 0; k < kKills; ++k) {
    const std::string begin = std::to_string(k * kGraphs);
    const std::string end = std::to_string((k + 1) * kGraphs);
    const bool at_syscall = k % 2 == 1;
    std::vector<std::string> argv = {KILN_CRASH_WRITER, "cache", dir.string(), begin, end};
    if (at_syscall) argv.push_back(std::to_string(die_at(rng)));
    ChildProcess writer(argv);
    ASSERT_TRUE(writer.wait_ready(milliseconds(20000))) << "the writer did not start";
    ChildResult killed = at_syscall ? writer.finish(milliseconds(60000))
                                    : writer.kill_after(microseconds(delay_us(rng)));
    ASSERT_EQ(killed.error, "");
    ASSERT_TRUE(killed.killed || killed.exit_code == 0) << killed.output;
    (killed.killed ? (at_syscall ? killed_in_syscall : killed_at_random) : not_killed) += 1;
    std::map<long, GraphReport> done = reports(killed.output);
    finished_by_killed += int(done.size());

    ChildProcess checker({KILN_CRASH_WRITER, "cache", dir.string(), begin, end});
    ChildResult r = checker.finish(milliseconds(60000));
    std::map<long, GraphReport> checked = reports(r.output);
    if (r.exit_code != 0 || checked.size() != size_t(kGraphs)) {
      ++wrong;
      if (first_problem.empty())
        first_problem = "kill " + std::to_string(k) + ": the checker ended with " +
                        (r.killed ? "a signal" : "exit code " + std::to_string(r.exit_code)) +
                        ": " + r.output;
      continue;
    }
    for (const auto& [graph, report] : checked) {
      corrupt += int(report.corrupt);
      if (report.compiled == 0) ++from_disk;
      if (report.compiled > 0) ++recompiled;
      if (done.count(graph) && report.compiled != 0 && first_problem.empty())
        first_problem = "kill " + std::to_string(k) + ": graph " + std::to_string(graph) +
                        " was finished by the killed process but compiled again";
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "[ kill test ] kernel cache: " << kKills << " runs in " << seconds
            << " s (a full run of " << kGraphs << " graphs: " << full_run.count() / 1000 << " ms, "
            << syscalls << " file-writing syscalls): " << killed_at_random
            << " killed at a random moment, " << killed_in_syscall
            << " killed inside a file-writing syscall, " << not_killed
            << " ended first; killed processes finished " << finished_by_killed
            << " graphs; the next process found " << from_disk << " graphs' kernels on disk, "
            << "compiled " << recompiled << ", " << corrupt << " corrupt cache files, " << wrong
            << " wrong results or crashes\n";
  EXPECT_EQ(wrong, 0) << first_problem;
  EXPECT_EQ(corrupt, 0) << "torn cache files (detected and recompiled, but writes should be "
                           "atomic)";
  EXPECT_TRUE(first_problem.empty()) << first_problem;
  EXPECT_GT(finished_by_killed, 0);
  EXPECT_GT(recompiled, 0) << "some kills should land before a kernel was stored";
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace kiln
