// Crash safety of weight files: a process saving a model with ModelCheckpoint in a loop is
// SIGKILLed at random moments, hundreds of times. After each kill the file must load with
// kiln's reader and be one complete generation (every value equal to it): the last one the
// writer reported, or the next one (renamed into place, not yet reported); never torn, never
// missing once written. Temporaries left by killed writers must not accumulate.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <thread>

#include "kiln/keras/io/safetensors.h"
#include "tests/crash/child_process.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using crash_test::ChildProcess;
using crash_test::ChildResult;
using std::chrono::microseconds;
using std::chrono::milliseconds;

// The generation of the complete file at `path` (0 when there is none), or -1 and the problem.
double generation_of(const fs::path& path, std::string& error) {
  if (!fs::exists(path)) return 0;
  NamedTensors tensors;
  try {
    tensors = load_safetensors(path.string());
  } catch (const std::exception& e) {
    error = e.what();
    return -1;
  }
  if (tensors.empty()) {
    error = "no tensors";
    return -1;
  }
  const double g = tensors[0].second.data<float>()[0];
  for (const auto& [name, t] : tensors) {
    const float* p = t.data<float>();
    for (int64_t i = 0; i < t.size(); ++i)
      if (p[i] != float(g)) {
        error = "tensor " + name + " mixes generations " + std::to_string(g) + " and " +
                std::to_string(p[i]);
        return -1;
      }
  }
  return g;
}

// The last "saved g" line of the writer's output, or `otherwise`.
double last_saved(const std::string& output, double otherwise) {
  std::istringstream lines(output);
  std::string line;
  double last = otherwise;
  while (std::getline(lines, line))
    if (line.rfind("saved ", 0) == 0) last = std::stod(line.substr(6));
  return last;
}

int temporaries_in(const fs::path& dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) ++n;
  return n;
}

TEST(CrashSafety, KilledCheckpointWriterLeavesOldOrNewFile) {
  const fs::path dir =
      fs::temp_directory_path() / ("kiln_checkpoint_kill_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path path = dir / "ckpt.safetensors";
  constexpr int kKills = 300;
  std::mt19937 rng(20261124);

  // How long one save takes here (fsync: ~6 ms on a quiet ext4 disk), to spread the kills over
  // about three saves after the writer is ready.
  microseconds save_time;
  {
    const fs::path probe_path = dir / "probe.safetensors";
    ChildProcess probe({KILN_CRASH_WRITER, "checkpoint", probe_path.string(), "10"});
    ASSERT_TRUE(probe.wait_ready(milliseconds(20000))) << "the writer did not start";
    auto t0 = std::chrono::steady_clock::now();
    ChildResult r = probe.finish(milliseconds(60000));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    save_time =
        std::chrono::duration_cast<microseconds>(std::chrono::steady_clock::now() - t0) / 10;
    fs::remove(probe_path);
  }
  std::uniform_int_distribution<long> delay_us(0, 3 * save_time.count());

  double generation = 0;  // the complete version on disk before the next writer starts
  int kills = 0, old_seen = 0, new_seen = 0, torn = 0, max_temporaries = 0;
  long saves = 0;
  std::string first_problem;
  auto start = std::chrono::steady_clock::now();
  for (int k = 0; k < kKills; ++k) {
    ChildProcess writer({KILN_CRASH_WRITER, "checkpoint", path.string()});
    ASSERT_TRUE(writer.wait_ready(milliseconds(20000))) << "the writer did not start";
    // The random moment falls inside the saving loop: after the first save (the process's
    // first save also clears stale temporaries, and on a loaded machine it can take longer than
    // the whole random window).
    ASSERT_TRUE(writer.wait_for("saved ", milliseconds(20000))) << "the writer saved nothing";
    ChildResult r = writer.kill_after(microseconds(delay_us(rng)));
    ++kills;
    ASSERT_EQ(r.error, "");
    ASSERT_TRUE(r.killed) << "the writer ended by itself (exit code " << r.exit_code
                          << "): " << r.output;
    const double reported = last_saved(r.output, generation);
    saves += long(reported - generation);
    std::string problem;
    const double found = generation_of(path, problem);
    if (found == reported) {
      ++old_seen;
    } else if (found == reported + 1) {
      ++new_seen;
    } else {
      ++torn;
      if (first_problem.empty())
        first_problem = "kill " + std::to_string(k) + ": the writer reported generation " +
                        std::to_string(reported) + ", the file " +
                        (found == 0 ? std::string("is missing")
                                    : "is " + (problem.empty() ? std::to_string(found) : problem));
      if (found < 0) break;  // the next writer could not continue from it
    }
    generation = found;
    max_temporaries = std::max(max_temporaries, temporaries_in(dir));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "[ kill test ] checkpoint: " << kills << " kills in " << seconds
            << " s (a save: " << save_time.count() / 1000.0 << " ms), " << saves
            << " saves reported; file after a kill: " << old_seen << " last reported version, "
            << new_seen << " next version (renamed, not yet "
            << "reported), " << torn << " torn or missing; at most " << max_temporaries
            << " stale temporaries at once\n";
  EXPECT_EQ(torn, 0) << first_problem;
  EXPECT_GE(saves, kKills) << "every kill should come after at least one save";
  EXPECT_GT(new_seen + old_seen, 0);

  // Temporaries of killed writers: a later writer removes them once they are 2 s old.
  const int left = temporaries_in(dir);
  std::this_thread::sleep_for(milliseconds(2100));
  ChildProcess last({KILN_CRASH_WRITER, "checkpoint", path.string(), "1"});
  ChildResult r = last.finish(milliseconds(20000));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::string problem;
  EXPECT_EQ(generation_of(path, problem), generation + 1) << problem;
  std::cout << "[ kill test ] stale temporaries: " << left << " before the last writer, "
            << temporaries_in(dir) << " after it\n";
  EXPECT_EQ(temporaries_in(dir), 0);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace kiln
