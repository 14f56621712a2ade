// Reading IDX files (MNIST's format, mnist.h) one record at a time: the header parser shared
// with the in-memory decoder, and IdxRecordReader, which reads through zlib's gzopen/gzread
// (plain and gzip files alike) so that only one record is ever held.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct gzFile_s;

namespace kiln::data {

// The dimensions in the IDX header at the start of `bytes` (which may hold more: the data).
// kiln::Error naming `path` for another magic than `magic`, a header cut short, or dimensions
// whose element count overflows or exceeds io::kMaxTensorElements (read_limits.h).
std::vector<int64_t> parse_idx_header(const std::string& bytes, const std::string& path,
                                      uint32_t magic);

// Contract: opens `path` and reads its header (parse_idx_header); then next() reads records
// (the elements of one index along axis 0: rows x cols bytes for images, one byte for labels)
// until dims()[0] have been read. Every failure is a kiln::Error naming the path: a missing
// file; a plain file whose length differs from the header's promise (checked on opening); a
// gzip file that is corrupt, ends inside a record or holds more than the header promises
// (checked when reached); a record larger than io::kMaxDecompressedBytes (refused before it
// is allocated; a record's buffer grows with the data read, 1 MiB at a time). Not thread-safe;
// one reader per pass.
class IdxRecordReader {
 public:
  IdxRecordReader(const std::string& path, uint32_t magic);

  const std::string& path() const { return path_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t num_records() const { return dims_[0]; }
  size_t record_bytes() const { return record_bytes_; }

  // The next record's bytes in `out` (resized to record_bytes()); false after the last one,
  // once the file is known to hold nothing more.
  bool next(std::string& out);

 private:
  [[noreturn]] void fail(const std::string& why) const;
  // zlib's message after a failed or short gzread ("" when there is none), and the error to
  // report for it ("corrupt gzip data (...)" or "cannot read: ...").
  std::string zlib_message() const;
  std::string zlib_error() const;

  struct Close {
    void operator()(gzFile_s* f) const;
  };
  std::string path_;
  std::unique_ptr<gzFile_s, Close> file_;
  std::vector<int64_t> dims_;
  size_t record_bytes_ = 0;
  int64_t read_ = 0;
  bool end_checked_ = false;
};

}  // namespace kiln::data
