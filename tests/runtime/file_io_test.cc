// runtime::write_file_atomically: contents replaced whole, errors named, and the stale
// temporaries of killed writers removed (only those). The kill tests (tests/crash/) check the
// atomicity against SIGKILL.
#include "kiln/runtime/file_io.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "kiln/ir/error.h"

namespace kiln::runtime {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A fresh directory per test, removed afterwards.
class FileIo : public ::testing::Test {
 protected:
  void SetUp() override {
    static int run = 0;
    dir_ = fs::temp_directory_path() /
           (std::string("kiln_file_io_") +
            ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" +
            std::to_string(::getpid()) + "_" + std::to_string(run++));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::set<std::string> names() const {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.insert(e.path().filename().string());
    return out;
  }
  fs::path dir_;
};

TEST_F(FileIo, ReplacesTheWholeFileAndLeavesNoTemporary) {
  const fs::path path = dir_ / "weights.bin";
  write_file_atomically(path.string(), std::string(10000, 'a'));
  EXPECT_EQ(read_bytes(path), std::string(10000, 'a'));
  write_file_atomically(path.string(), "short");
  EXPECT_EQ(read_bytes(path), "short");
  EXPECT_EQ(names(), std::set<std::string>{"weights.bin"});
}

TEST_F(FileIo, MissingDirectoryIsAnErrorNamingThePath) {
  const std::string path = (dir_ / "no" / "such" / "file").string();
  try {
    write_file_atomically(path, "x");
    FAIL() << "expected kiln::Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(path));
    EXPECT_THAT(e.what(), HasSubstr("does the directory exist"));
  }
}

// A process id that is not running: a child that has exited and been reaped.
pid_t dead_pid() {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

void touch(const fs::path& p, bool old) {
  std::ofstream(p) << "partial";
  if (old) fs::last_write_time(p, fs::file_time_type::clock::now() - std::chrono::hours(1));
}

TEST_F(FileIo, FirstWriteRemovesOnlyStaleTemporariesOfDeadWriters) {
  const pid_t dead = dead_pid();
  ASSERT_GT(dead, 0);
  const std::string d = std::to_string(dead), self = std::to_string(::getpid());
  // Removed: a dead writer's temporaries (of this target or another one), an hour old.
  touch(dir_ / ("ckpt.safetensors.tmp." + d + ".0"), true);
  touch(dir_ / ("0123.kobj.tmp." + d + ".17"), true);
  // Kept: fresh (may be a live writer in another pid namespace), this process's own, a live
  // process's (our parent), names that only look alike, and a directory.
  const std::set<std::string> kept = {
      "ckpt.safetensors.tmp." + d + ".1",
      "ckpt.safetensors.tmp." + self + ".99",
      "ckpt.safetensors.tmp." + std::to_string(::getppid()) + ".3",
      "notes.tmp.txt",
      "x.tmp." + d,
      "x.tmp." + d + ".",
      "x.tmp." + d + ".1a",
      ".tmp." + d + ".4",
  };
  for (const std::string& name : kept)
    touch(dir_ / name, name != "ckpt.safetensors.tmp." + d + ".1");
  fs::create_directory(dir_ / ("dir.tmp." + d + ".5"));
  fs::last_write_time(dir_ / ("dir.tmp." + d + ".5"),
                      fs::file_time_type::clock::now() - std::chrono::hours(1));

  write_file_atomically((dir_ / "ckpt.safetensors").string(), "new");

  std::set<std::string> want = kept;
  want.insert("ckpt.safetensors");
  want.insert("dir.tmp." + d + ".5");
  EXPECT_EQ(names(), want);
  EXPECT_EQ(read_bytes(dir_ / "ckpt.safetensors"), "new");
}

}  // namespace
}  // namespace kiln::runtime
