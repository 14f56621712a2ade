// Zip archives in memory (libzip): the container of Keras 3's `.keras` files.
//
// ZipReader takes the archive's bytes and lists and reads its entries. Every problem is a
// kiln::Error naming `what` (the file) and the entry: bytes that are not a zip archive or whose
// central directory is inconsistent (libzip's ZIP_CHECKCONS), a missing entry, an entry whose
// data does not match its CRC, an unsupported compression or encryption. Before an entry is
// allocated its declared size is checked against kMaxZipEntryBytes and against what its
// compressed bytes can expand to, so a damaged header cannot ask for terabytes.
//
// zip_bytes() builds an archive from (name, bytes) entries in memory (deflated); callers write
// the result with io::write_file_atomically, so a reader never sees a torn archive.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln::io {

// The largest zip entry kiln reads (64 GiB): far beyond any model file, but a bound.
inline constexpr uint64_t kMaxZipEntryBytes = uint64_t(1) << 36;

class ZipReader {
 public:
  // `bytes`: the whole archive; `what`: its name in errors (the file's path).
  ZipReader(std::string bytes, std::string what);
  ~ZipReader();
  ZipReader(const ZipReader&) = delete;
  ZipReader& operator=(const ZipReader&) = delete;

  // The entries' names, in the archive's order.
  const std::vector<std::string>& names() const { return names_; }
  bool contains(const std::string& name) const;
  // The entry's uncompressed bytes; kiln::Error for a missing or damaged entry.
  std::string read(const std::string& name) const;
  const std::string& what() const { return what_; }

 private:
  std::string bytes_, what_;
  void* archive_ = nullptr;  // zip_t*
  std::vector<std::string> names_;
};

// A zip archive (deflated entries, in the given order) holding `entries`; kiln::Error for a
// repeated or empty name.
std::string zip_bytes(const std::vector<std::pair<std::string, std::string>>& entries);

}  // namespace kiln::io
