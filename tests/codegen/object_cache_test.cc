// The kernel object cache (codegen/object_cache.h): keys, the on-disk format, corruption
// handling, concurrent writers and the disabled / unwritable cache.
#include "kiln/codegen/object_cache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kiln/runtime/knobs.h"
#include "kiln/runtime/log.h"

namespace kiln::codegen {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// A fresh cache directory per test (removed afterwards), the cache pointed at it, zeroed
// counters, and log messages captured instead of printed.
class ObjectCache : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    // The run number keeps directories distinct under --gtest_repeat (write failures warn once
    // per directory and process).
    static int run = 0;
    dir_ = fs::temp_directory_path() / (std::string("kiln_object_cache_") + info->name() + "_" +
                                        std::to_string(::getpid()) + "_" + std::to_string(run++));
    fs::remove_all(dir_);
    previous_dir_ = cache_dir();
    set_cache_dir(dir_.string());
    reset_cache_stats();
    previous_sink_ = set_log_sink([this](LogLevel level, std::string_view message) {
      std::lock_guard<std::mutex> lock(log_mutex_);
      (level == LogLevel::kWarning ? warnings_ : infos_).emplace_back(message);
    });
  }

  void TearDown() override {
    set_log_sink(previous_sink_);
    set_cache_dir(previous_dir_);
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(dir_, ec);
  }

  std::vector<std::string> warnings() {
    std::lock_guard<std::mutex> lock(log_mutex_);
    return warnings_;
  }

  fs::path path_of(const std::string& key) const { return dir_ / (key + ".kobj"); }

  // Files in the cache directory whose name contains ".tmp" (left-over temporaries).
  int temporaries() const {
    int n = 0;
    for (const auto& e : fs::directory_iterator(dir_))
      if (e.path().filename().string().find(".tmp") != std::string::npos) ++n;
    return n;
  }

  fs::path dir_;
  std::string previous_dir_;
  LogSink previous_sink_;
  std::mutex log_mutex_;
  std::vector<std::string> warnings_, infos_;
};

const std::string kIr = "define void @k(ptr noalias %frame, i64 %begin, i64 %end) { ret void }";
const std::string kTarget = "cpu=znver3 features=+avx2,+fma flags=O3 llvm=19.1.7 kiln=0.1";

TEST_F(ObjectCache, KeyIsStableAnd32LowercaseHexDigits) {
  std::string key = cache_key(kIr, kTarget);
  EXPECT_EQ(key, cache_key(kIr, kTarget));
  ASSERT_EQ(key.size(), 32u);
  for (char c : key) EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << key;
  // The same on every build and platform (caches may be shared): changing the hash or the key
  // layout must be deliberate.
  EXPECT_EQ(cache_key("", ""), "134759b199f975919a7be9037f7e20d6");
  EXPECT_EQ(cache_key("abc", "x86-64"), "645eadc5b3ca406187a4e3dddac82f72");
}

TEST_F(ObjectCache, KeyDependsOnIrTextAndTarget) {
  std::string key = cache_key(kIr, kTarget);
  EXPECT_NE(key, cache_key(kIr + " ", kTarget));
  EXPECT_NE(key, cache_key(kIr, kTarget + " "));
  EXPECT_NE(key, cache_key(kIr, "cpu=skylake features=+avx2,+fma flags=O3 llvm=19.1.7 kiln=0.1"));
  // The separator keeps the two parts apart.
  EXPECT_NE(cache_key("ab", "c"), cache_key("a", "bc"));
  EXPECT_NE(cache_key("", "x"), cache_key("x", ""));
  // Every one-byte change of the IR (short and long texts) gives a different key, in both
  // halves.
  for (size_t length : {5u, 31u, 32u, 100u}) {
    std::string ir(length, 'a');
    std::set<std::string> keys{cache_key(ir, kTarget)};
    std::set<std::string> highs{keys.begin()->substr(0, 16)}, lows{keys.begin()->substr(16)};
    for (size_t i = 0; i < length; ++i) {
      std::string changed = ir;
      changed[i] = 'b';
      std::string k = cache_key(changed, kTarget);
      keys.insert(k);
      highs.insert(k.substr(0, 16));
      lows.insert(k.substr(16));
    }
    EXPECT_EQ(keys.size(), length + 1);
    EXPECT_EQ(highs.size(), length + 1);
    EXPECT_EQ(lows.size(), length + 1);
  }
}

TEST_F(ObjectCache, StoresAndLoadsObjects) {
  std::string key = cache_key(kIr, kTarget);
  EXPECT_EQ(load_cached_object(key), std::nullopt);  // missing: not corrupt, not a hit
  EXPECT_EQ(cache_stats().disk_hits, 0);
  EXPECT_EQ(cache_stats().corrupt, 0);

  std::string object(
      "\x7f"
      "ELF\0\0binary\xff",
      13);
  store_cached_object(key, object);
  EXPECT_TRUE(fs::is_regular_file(path_of(key)));
  EXPECT_EQ(fs::file_size(path_of(key)), 60 + object.size());
  EXPECT_EQ(read_bytes(path_of(key)).substr(0, 8), "KILNOBJ1");
  EXPECT_EQ(load_cached_object(key), object);
  EXPECT_EQ(load_cached_object(key), object);

  // Overwriting and an empty object.
  std::string other_key = cache_key(kIr, "another target");
  store_cached_object(other_key, "");
  EXPECT_EQ(load_cached_object(other_key), std::string());
  store_cached_object(key, std::string(100000, 'z'));
  EXPECT_EQ(load_cached_object(key), std::string(100000, 'z'));

  CacheStats s = cache_stats();
  EXPECT_EQ(s.disk_writes, 3);
  EXPECT_EQ(s.disk_hits, 4);
  EXPECT_EQ(s.corrupt, 0);
  EXPECT_EQ(s.memory_hits, 0);
  EXPECT_EQ(s.misses, 0);
  EXPECT_EQ(temporaries(), 0);
  EXPECT_TRUE(warnings().empty());
}

TEST_F(ObjectCache, CountsAndResets) {
  count_memory_hit();
  count_memory_hit();
  count_miss();
  store_cached_object(cache_key("a", "t"), "obj");
  load_cached_object(cache_key("a", "t"));
  CacheStats s = cache_stats();
  EXPECT_EQ(s.memory_hits, 2);
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.disk_writes, 1);
  EXPECT_EQ(s.disk_hits, 1);
  reset_cache_stats();
  s = cache_stats();
  EXPECT_EQ(s.memory_hits + s.misses + s.disk_writes + s.disk_hits + s.corrupt, 0);

  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([] {
      for (int i = 0; i < 1000; ++i) {
        count_memory_hit();
        count_miss();
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(cache_stats().memory_hits, 4000);
  EXPECT_EQ(cache_stats().misses, 4000);
}

// Each kind of damage: the load is a miss, counted as corrupt, warned about (naming the file
// and the problem), the file is removed, and storing again works.
TEST_F(ObjectCache, RejectsAndRemovesCorruptFiles) {
  struct Damage {
    std::string name;
    std::function<void(const fs::path&)> apply;
    std::string problem;  // in the warning
  };
  const std::string key = cache_key(kIr, kTarget);
  const std::string other = cache_key(kIr, "other target");
  const std::string object = "object bytes of the kernel " + std::string(200, 'k');
  auto edit = [](const fs::path& p, const std::function<void(std::string&)>& f) {
    std::string bytes = read_bytes(p);
    f(bytes);
    write_bytes(p, bytes);
  };
  std::vector<Damage> damages = {
      {"truncated payload",
       [&](const fs::path& p) { edit(p, [](std::string& b) { b.pop_back(); }); }, "truncated"},
      {"truncated header",
       [&](const fs::path& p) { edit(p, [](std::string& b) { b.resize(30); }); },
       "fewer than the 60-byte header"},
      {"empty file", [&](const fs::path& p) { write_bytes(p, ""); }, "has 0 bytes"},
      {"flipped payload byte",
       [&](const fs::path& p) { edit(p, [](std::string& b) { b[60 + 17] ^= 0x20; }); },
       "checksum mismatch"},
      {"flipped checksum byte",
       [&](const fs::path& p) { edit(p, [](std::string& b) { b[52] ^= 1; }); },
       "checksum mismatch"},
      {"wrong magic", [&](const fs::path& p) { edit(p, [](std::string& b) { b[3] = 'X'; }); },
       "bad magic"},
      {"other format version",
       [&](const fs::path& p) { edit(p, [](std::string& b) { b[8] = 2; }); }, "format version 2"},
      {"payload size field",
       [&](const fs::path& p) { edit(p, [](std::string& b) { b[44] ^= 4; }); }, "the header says"},
      {"another key's file",
       [&](const fs::path& p) {
         store_cached_object(other, "the other kernel");
         fs::copy_file(path_of(other), p, fs::copy_options::overwrite_existing);
       },
       "holds the object of key " + other},
      {"a directory in its place",
       [&](const fs::path& p) {
         fs::remove(p);
         fs::create_directory(p);
       },
       "cannot read it"},
  };
  for (const Damage& d : damages) {
    SCOPED_TRACE(d.name);
    reset_cache_stats();
    {
      std::lock_guard<std::mutex> lock(log_mutex_);
      warnings_.clear();
    }
    store_cached_object(key, object);
    ASSERT_EQ(load_cached_object(key), object);
    d.apply(path_of(key));

    EXPECT_EQ(load_cached_object(key), std::nullopt);
    EXPECT_EQ(cache_stats().corrupt, 1);
    EXPECT_FALSE(fs::exists(path_of(key)));
    std::vector<std::string> w = warnings();
    ASSERT_EQ(w.size(), 1u);
    EXPECT_THAT(w[0], HasSubstr(path_of(key).string()));
    EXPECT_THAT(w[0], HasSubstr(d.problem));

    EXPECT_EQ(load_cached_object(key), std::nullopt);  // now simply missing
    EXPECT_EQ(cache_stats().corrupt, 1);
    store_cached_object(key, object);
    EXPECT_EQ(load_cached_object(key), object);
    EXPECT_EQ(cache_stats().disk_hits, 2);
  }
}

// Threads storing (different bytes, as after a compiler change) and loading the same key: every
// load is a miss or one complete object, never a torn or corrupt file.
TEST_F(ObjectCache, ConcurrentThreadsNeverReadATornFile) {
  const std::string key = cache_key(kIr, kTarget);
  constexpr int kThreads = 8, kIterations = 150;
  std::vector<std::string> objects;
  for (int t = 0; t < kThreads; ++t) objects.emplace_back(size_t(3000 * (t + 1)), char('a' + t));
  std::atomic<int> bad{0}, found{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIterations; ++i) {
        store_cached_object(key, objects[t]);
        std::optional<std::string> got = load_cached_object(key);
        if (!got) continue;
        ++found;
        if (got->size() % 3000 != 0 || got->empty() || got->size() > 3000 * kThreads ||
            *got != objects[got->size() / 3000 - 1])
          ++bad;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(found, kThreads * kIterations);  // a file is always there once written
  EXPECT_EQ(cache_stats().corrupt, 0);
  EXPECT_EQ(cache_stats().disk_writes, kThreads * kIterations);
  EXPECT_TRUE(warnings().empty());
  EXPECT_EQ(temporaries(), 0);
}

// The same across processes.
TEST_F(ObjectCache, ConcurrentProcessesNeverReadATornFile) {
  const std::string key = cache_key(kIr, kTarget);
  constexpr int kProcesses = 4, kIterations = 100;
  std::vector<pid_t> children;
  for (int c = 0; c < kProcesses; ++c) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      std::string object(size_t(5000 * (c + 1)), char('p' + c));
      int status = 0;
      for (int i = 0; i < kIterations; ++i) {
        store_cached_object(key, object);
        std::optional<std::string> got = load_cached_object(key);
        if (!got || got->empty() || got->size() % 5000 != 0 || got->size() > 5000 * kProcesses ||
            *got != std::string(got->size(), char('p' + got->size() / 5000 - 1)))
          status = 1;
      }
      if (cache_stats().corrupt != 0) status = 2;
      ::_exit(status);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "1: a torn or missing object, 2: a corrupt count";
  }
  EXPECT_TRUE(load_cached_object(key).has_value());
  EXPECT_EQ(temporaries(), 0);
}

// A cache directory that cannot be created: stores only warn (once per directory; repeated
// failures are logged at info level), loads miss.
TEST_F(ObjectCache, UncreatableDirectoryOnlyWarns) {
  fs::create_directories(dir_);
  write_bytes(dir_ / "a_file", "not a directory");
  fs::path bad = dir_ / "a_file" / "cache";
  set_cache_dir(bad.string());
  LogLevel previous_level = log_level();
  set_log_level(LogLevel::kInfo);
  const std::string key = cache_key(kIr, kTarget);
  EXPECT_NO_THROW(store_cached_object(key, "object"));
  EXPECT_NO_THROW(store_cached_object(cache_key("x", "y"), "object"));
  set_log_level(previous_level);
  EXPECT_EQ(load_cached_object(key), std::nullopt);
  CacheStats s = cache_stats();
  EXPECT_EQ(s.disk_writes, 0);
  EXPECT_EQ(s.corrupt, 0);
  std::vector<std::string> w = warnings();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_THAT(w[0], HasSubstr(bad.string()));
  EXPECT_THAT(w[0], HasSubstr("KILN_CACHE_DIR"));
  std::lock_guard<std::mutex> lock(log_mutex_);
  ASSERT_EQ(infos_.size(), 1u);
  EXPECT_THAT(infos_[0], HasSubstr(bad.string()));
}

// A write that fails after the temporary was written (the rename onto a non-empty directory at
// the object's path; fails even for root): a warning, no count, no temporary left behind.
TEST_F(ObjectCache, FailedWriteOnlyWarns) {
  const std::string key = cache_key(kIr, kTarget);
  fs::create_directories(path_of(key) / "sub");
  EXPECT_NO_THROW(store_cached_object(key, "object"));
  EXPECT_EQ(cache_stats().disk_writes, 0);
  ASSERT_EQ(warnings().size(), 1u);
  EXPECT_THAT(warnings()[0], HasSubstr(path_of(key).string()));
  EXPECT_EQ(temporaries(), 0);
}

// An existing directory without write permission (skipped as root, who may write anywhere).
TEST_F(ObjectCache, ReadOnlyDirectoryOnlyWarns) {
  fs::create_directories(dir_);
  fs::permissions(dir_, fs::perms::owner_read | fs::perms::owner_exec);
  if (::access(dir_.c_str(), W_OK) == 0)
    GTEST_SKIP() << "running as root: every directory is writable";
  const std::string key = cache_key(kIr, kTarget);
  EXPECT_NO_THROW(store_cached_object(key, "object"));
  EXPECT_EQ(cache_stats().disk_writes, 0);
  ASSERT_EQ(warnings().size(), 1u);
  EXPECT_THAT(warnings()[0], HasSubstr(dir_.string()));
  EXPECT_EQ(load_cached_object(key), std::nullopt);
  EXPECT_EQ(cache_stats().corrupt, 0);
}

TEST_F(ObjectCache, EmptyDirectoryDisablesTheDiskCache) {
  set_cache_dir("");
  EXPECT_EQ(cache_dir(), "");
  const std::string key = cache_key(kIr, kTarget);
  store_cached_object(key, "object");
  EXPECT_EQ(load_cached_object(key), std::nullopt);
  CacheStats s = cache_stats();
  EXPECT_EQ(s.disk_writes + s.disk_hits + s.corrupt, 0);
  EXPECT_TRUE(warnings().empty());
  EXPECT_FALSE(fs::exists(dir_));
}

TEST_F(ObjectCache, RejectsMalformedKeys) {
  for (std::string key : {std::string("../../etc/passwd"), std::string(32, 'A'),
                          std::string(31, '0'), std::string()}) {
    SCOPED_TRACE(key);
    EXPECT_NO_THROW(store_cached_object(key, "object"));
    EXPECT_EQ(load_cached_object(key), std::nullopt);
  }
  EXPECT_EQ(cache_stats().disk_writes, 0);
  EXPECT_FALSE(fs::exists(dir_) && !fs::is_empty(dir_));
  EXPECT_EQ(warnings().size(), 8u);
}

TEST_F(ObjectCache, SetCacheDirOverridesTheKnob) {
  const char* old = std::getenv("KILN_CACHE_DIR");
  std::optional<std::string> saved = old ? std::optional<std::string>(old) : std::nullopt;
  ::setenv("KILN_CACHE_DIR", "/somewhere/else", 1);
  EXPECT_EQ(runtime::knobs::cache_dir(), "/somewhere/else");
  EXPECT_EQ(cache_dir(), dir_.string());  // set_cache_dir wins
  ::setenv("KILN_CACHE_DIR", "", 1);
  EXPECT_EQ(runtime::knobs::cache_dir(), "");  // set but empty: disabled
  ::unsetenv("KILN_CACHE_DIR");
  EXPECT_EQ(runtime::knobs::cache_dir(), std::nullopt);
  if (saved) ::setenv("KILN_CACHE_DIR", saved->c_str(), 1);
}

}  // namespace
}  // namespace kiln::codegen
