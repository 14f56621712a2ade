#include "kiln/codegen/object_cache.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>
#include <set>
#include <string_view>

#include "kiln/runtime/file_io.h"
#include "kiln/runtime/knobs.h"
#include "kiln/runtime/log.h"

namespace kiln::codegen {
namespace {

namespace fs = std::filesystem;

// ---- hashing: XXH64 (Yann Collet's xxHash, 64-bit variant), written out here so the cache
// needs no dependency. The key is two XXH64 runs with different seeds; the payload checksum
// is one more.

constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t kPrime3 = 0x165667B19E3779F9ULL;
constexpr uint64_t kPrime4 = 0x85EBCA77C2B2AE63ULL;
constexpr uint64_t kPrime5 = 0x27D4EB2F165667C5ULL;

uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

uint64_t read_le64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

uint32_t read_le32(const unsigned char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

uint64_t xxh_round(uint64_t acc, uint64_t input) {
  acc += input * kPrime2;
  acc = rotl(acc, 31);
  return acc * kPrime1;
}

uint64_t xxh_merge(uint64_t acc, uint64_t v) {
  acc ^= xxh_round(0, v);
  return acc * kPrime1 + kPrime4;
}

uint64_t xxh64(std::string_view data, uint64_t seed) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  const unsigned char* end = p + data.size();
  uint64_t h;
  if (data.size() >= 32) {
    uint64_t v1 = seed + kPrime1 + kPrime2, v2 = seed + kPrime2, v3 = seed, v4 = seed - kPrime1;
    const unsigned char* limit = end - 32;
    do {
      v1 = xxh_round(v1, read_le64(p));
      v2 = xxh_round(v2, read_le64(p + 8));
      v3 = xxh_round(v3, read_le64(p + 16));
      v4 = xxh_round(v4, read_le64(p + 24));
      p += 32;
    } while (p <= limit);
    h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
    h = xxh_merge(h, v1);
    h = xxh_merge(h, v2);
    h = xxh_merge(h, v3);
    h = xxh_merge(h, v4);
  } else {
    h = seed + kPrime5;
  }
  h += uint64_t(data.size());
  for (; p + 8 <= end; p += 8) {
    h ^= xxh_round(0, read_le64(p));
    h = rotl(h, 27) * kPrime1 + kPrime4;
  }
  if (p + 4 <= end) {
    h ^= uint64_t(read_le32(p)) * kPrime1;
    h = rotl(h, 23) * kPrime2 + kPrime3;
    p += 4;
  }
  for (; p < end; ++p) {
    h ^= uint64_t(*p) * kPrime5;
    h = rotl(h, 11) * kPrime1;
  }
  h ^= h >> 33;
  h *= kPrime2;
  h ^= h >> 29;
  h *= kPrime3;
  h ^= h >> 32;
  return h;
}

constexpr uint64_t kKeySeedHigh = 0x6B696C6E2D6B6579ULL;  // "kiln-key"
constexpr uint64_t kKeySeedLow = 0x3141592653589793ULL;
constexpr uint64_t kChecksumSeed = 0x6B696C6E2D6F626AULL;  // "kiln-obj"

// ---- the file format: a 60-byte header, then the payload (the object bytes).
//   0  magic "KILNOBJ1"          8 bytes
//   8  format version            u32 little-endian
//  12  key                       32 ASCII hex digits
//  44  payload size              u64 little-endian
//  52  payload checksum (XXH64)  u64 little-endian
//  60  payload
constexpr std::string_view kMagic = "KILNOBJ1";
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kKeyLength = 32;
constexpr size_t kHeaderSize = 8 + 4 + kKeyLength + 8 + 8;

void append_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(char((v >> (8 * i)) & 0xFF));
}

bool is_valid_key(const std::string& key) {
  if (key.size() != kKeyLength) return false;
  for (char c : key)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::string object_path(const std::string& dir, const std::string& key) {
  return (fs::path(dir) / (key + ".kobj")).string();
}

// ---- state

struct AtomicStats {
  std::atomic<int64_t> memory_hits{0};
  std::atomic<int64_t> disk_hits{0};
  std::atomic<int64_t> misses{0};
  std::atomic<int64_t> corrupt{0};
  std::atomic<int64_t> disk_writes{0};
};

AtomicStats& stats() {
  static AtomicStats s;
  return s;
}

std::mutex& dir_mutex() {
  static std::mutex m;
  return m;
}

std::optional<std::string>& dir_override() {
  static std::optional<std::string> dir;
  return dir;
}

// Write failures warn once per directory (a read-only cache would otherwise warn for every
// kernel); later failures for the same directory are logged at info level.
void warn_write_failure(const std::string& dir, const std::string& message) {
  static std::mutex m;
  static std::set<std::string> warned;
  bool first;
  {
    std::lock_guard<std::mutex> lock(m);
    first = warned.insert(dir).second;
  }
  std::string text = fmt::format(
      "kernel cache: {} (the kernel is used but not cached; set KILN_CACHE_DIR to a "
      "writable directory, or KILN_CACHE_DIR= to disable the disk cache)",
      message);
  if (first)
    log_warning(text);
  else
    log_info(text);
}

// Reads the whole file at `path`. Returns false with errno set when it cannot be opened (ENOENT
// for a missing file); `read_error` is set when it opened but could not be read. `identity`
// receives the file's device and inode, so that a corrupt file is removed only if it is still
// the one at `path` (another process may have renamed a good one into place meanwhile).
bool read_whole_file(const std::string& path, std::string& bytes, std::string& read_error,
                     struct stat& identity) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  if (::fstat(fd, &identity) != 0) {
    read_error = std::strerror(errno);
    ::close(fd);
    return true;
  }
  bytes.clear();
  if (S_ISREG(identity.st_mode)) bytes.reserve(size_t(identity.st_size));
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      read_error = std::strerror(errno);
      break;
    }
    if (n == 0) break;
    bytes.append(buffer, size_t(n));
  }
  ::close(fd);
  return true;
}

// What is wrong with `bytes` as the cache file of `key`, or "" when it is valid.
std::string check_file(const std::string& bytes, const std::string& key) {
  if (bytes.size() < kHeaderSize)
    return fmt::format("it has {} bytes, fewer than the {}-byte header", bytes.size(), kHeaderSize);
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  if (std::string_view(bytes.data(), kMagic.size()) != kMagic)
    return fmt::format("bad magic (expected \"{}\")", kMagic);
  uint32_t version = read_le32(p + 8);
  if (version != kFormatVersion)
    return fmt::format("format version {} (this kiln reads version {})", version, kFormatVersion);
  std::string_view stored_key(bytes.data() + 12, kKeyLength);
  if (stored_key != key)
    return fmt::format("it holds the object of key {} (file renamed or copied?)",
                       is_valid_key(std::string(stored_key)) ? std::string(stored_key)
                                                             : std::string("<not a key>"));
  uint64_t size = read_le64(p + 44);
  if (size != bytes.size() - kHeaderSize)
    return fmt::format("the header says {} payload bytes but the file has {} (truncated?)", size,
                       bytes.size() - kHeaderSize);
  uint64_t checksum = read_le64(p + 52);
  uint64_t actual = xxh64(std::string_view(bytes).substr(kHeaderSize), kChecksumSeed);
  if (checksum != actual)
    return fmt::format("payload checksum mismatch (stored {:016x}, computed {:016x})", checksum,
                       actual);
  return "";
}

// Removes the corrupt file at `path` if it is still the one that was read.
void remove_corrupt(const std::string& path, const struct stat& identity) {
  struct stat now;
  if (::lstat(path.c_str(), &now) != 0) return;  // already removed or replaced by a rename
  if (now.st_dev != identity.st_dev || now.st_ino != identity.st_ino) return;
  std::error_code ec;
  fs::remove(path, ec);
  if (ec)
    log_warning(
        fmt::format("kernel cache: cannot remove the corrupt file \"{}\": {}", path, ec.message()));
}

}  // namespace

CacheStats cache_stats() {
  AtomicStats& s = stats();
  CacheStats out;
  out.memory_hits = s.memory_hits.load();
  out.disk_hits = s.disk_hits.load();
  out.misses = s.misses.load();
  out.corrupt = s.corrupt.load();
  out.disk_writes = s.disk_writes.load();
  return out;
}

void reset_cache_stats() {
  AtomicStats& s = stats();
  s.memory_hits = 0;
  s.disk_hits = 0;
  s.misses = 0;
  s.corrupt = 0;
  s.disk_writes = 0;
}

std::string cache_dir() {
  {
    std::lock_guard<std::mutex> lock(dir_mutex());
    if (dir_override()) return *dir_override();
  }
  if (std::optional<std::string> dir = runtime::knobs::cache_dir()) return *dir;
  if (std::optional<std::string> home = runtime::knobs::home_dir())
    return (fs::path(*home) / ".cache" / "kiln").string();
  return "";
}

void set_cache_dir(std::string dir) {
  std::lock_guard<std::mutex> lock(dir_mutex());
  dir_override() = std::move(dir);
}

std::string cache_key(const std::string& ir_text, const std::string& target_description) {
  std::string input;
  input.reserve(ir_text.size() + 1 + target_description.size());
  input += ir_text;
  input += '\0';
  input += target_description;
  return fmt::format("{:016x}{:016x}", xxh64(input, kKeySeedHigh), xxh64(input, kKeySeedLow));
}

std::optional<std::string> load_cached_object(const std::string& key) {
  std::string dir = cache_dir();
  if (dir.empty()) return std::nullopt;
  if (!is_valid_key(key)) {
    log_warning(fmt::format(
        "kernel cache: \"{}\" is not a cache key (32 lowercase hex digits); not looked up", key));
    return std::nullopt;
  }
  std::string path = object_path(dir, key);
  std::string bytes, read_error;
  struct stat identity {};
  if (!read_whole_file(path, bytes, read_error, identity)) {
    if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;  // not cached (yet)
    read_error = std::strerror(errno);
    if (::lstat(path.c_str(), &identity) != 0) identity = {};
  }
  std::string problem =
      read_error.empty() ? check_file(bytes, key) : fmt::format("cannot read it: {}", read_error);
  if (problem.empty()) {
    stats().disk_hits.fetch_add(1);
    return bytes.substr(kHeaderSize);
  }
  stats().corrupt.fetch_add(1);
  log_warning(fmt::format("kernel cache: ignoring and removing the corrupt file \"{}\": {}", path,
                          problem));
  if (identity.st_ino != 0) remove_corrupt(path, identity);
  return std::nullopt;
}

void store_cached_object(const std::string& key, const std::string& object) {
  std::string dir = cache_dir();
  if (dir.empty()) return;
  if (!is_valid_key(key)) {
    log_warning(fmt::format(
        "kernel cache: \"{}\" is not a cache key (32 lowercase hex digits); not stored", key));
    return;
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    warn_write_failure(
        dir, fmt::format("cannot create the cache directory \"{}\": {}", dir, ec.message()));
    return;
  }
  std::string bytes;
  bytes.reserve(kHeaderSize + object.size());
  bytes += kMagic;
  append_le(bytes, kFormatVersion, 4);
  bytes += key;
  append_le(bytes, object.size(), 8);
  append_le(bytes, xxh64(object, kChecksumSeed), 8);
  bytes += object;
  try {
    runtime::write_file_atomically(object_path(dir, key), bytes);
  } catch (const std::exception& e) {
    warn_write_failure(dir, e.what());
    return;
  }
  stats().disk_writes.fetch_add(1);
}

void count_memory_hit() { stats().memory_hits.fetch_add(1); }
void count_miss() { stats().misses.fetch_add(1); }

}  // namespace kiln::codegen
