// The kernel caches: compiled objects keyed by a hash of the kernel's LLVM IR plus the target
// CPU (codegen/target.h: the host's by default), its features, the compile flags and the LLVM
// and kiln versions (cache_key()).
//
//  - in memory (per process): key -> the kernel's address in the JIT, so a kernel built again
//    (another executable, another trace) is neither compiled nor linked again;
//  - on disk: one file `<key>.kobj` per key in the cache directory (KILN_CACHE_DIR, default
//    ~/.cache/kiln; API set_cache_dir), reused across processes. A file holds a 60-byte header
//    (magic "KILNOBJ1", format version, key, payload size, XXH64 checksum of the payload) and
//    the object bytes. Writes go to a temporary of their own and are renamed into place, so
//    concurrent writers (threads or processes) never leave a torn file; a file whose header or
//    checksum does not match is counted as corrupt, removed (with a warning naming the file
//    and the problem) and the kernel recompiled (and re-stored). Nothing is ever evicted.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace kiln::codegen {

struct CacheStats {
  int64_t memory_hits = 0;  // kernels found already linked in this process
  int64_t disk_hits = 0;    // objects loaded from the cache directory
  int64_t misses = 0;       // kernels compiled (not found in memory or on disk)
  int64_t corrupt = 0;      // cache files rejected (bad header, checksum, or key) and replaced
  int64_t disk_writes = 0;  // objects written to the cache directory
};

// Counters since process start or the last reset (thread-safe).
CacheStats cache_stats();
void reset_cache_stats();

// The cache directory: set_cache_dir() if called, else KILN_CACHE_DIR (even if set to ""),
// else $HOME/.cache/kiln, else "". An empty string disables the disk cache: loads miss and
// stores do nothing. Created (with its parents) on the first store.
std::string cache_dir();
void set_cache_dir(std::string dir);

// 128-bit hash, as 32 lowercase hex digits, of `ir_text` + '\0' + the target description
// (CPU, features, flags, LLVM and kiln versions): two XXH64 runs with different seeds. Stable
// across builds and platforms.
std::string cache_key(const std::string& ir_text, const std::string& target_description);

// The object stored under `key` in the disk cache, or nullopt (missing, or corrupt: then the
// file is removed and counted). Counts a disk hit when found. A `key` that is not 32 lowercase
// hex digits is a miss with a warning (for load and store). Never throws.
std::optional<std::string> load_cached_object(const std::string& key);
// Stores `object` under `key` (atomic: temporary + rename) and counts a disk write. Failures
// to write (read-only directory, full disk) are logged as warnings (the first per directory;
// later ones at info level), never errors: the cache is an optimization.
void store_cached_object(const std::string& key, const std::string& object);

// Counter updates used by the compiler (memory hits and misses are decided there).
void count_memory_hit();
void count_miss();

}  // namespace kiln::codegen
