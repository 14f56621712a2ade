#include "kiln/keras/data/idx_stream.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <span>

#include "kiln/ir/error.h"
#include "kiln/ir/shape.h"
#include "kiln/keras/io/read_limits.h"

namespace kiln::data {
namespace {

uint32_t be32(const std::string& b, size_t at) {
  return uint32_t(uint8_t(b[at])) << 24 | uint32_t(uint8_t(b[at + 1])) << 16 |
         uint32_t(uint8_t(b[at + 2])) << 8 | uint32_t(uint8_t(b[at + 3]));
}

}  // namespace

std::vector<int64_t> parse_idx_header(const std::string& b, const std::string& path,
                                      uint32_t magic) {
  if (b.size() < 4 || be32(b, 0) != magic)
    throw Error(fmt::format("{}: not an IDX file of this kind: expected magic 0x{:08x}, found {}",
                            path, magic,
                            b.size() < 4 ? std::string("a file shorter than 4 bytes")
                                         : fmt::format("0x{:08x}", be32(b, 0))));
  size_t ndims = magic & 0xff;
  if (b.size() < 4 + 4 * ndims) throw Error(fmt::format("{}: truncated IDX header", path));
  std::vector<int64_t> dims;
  for (size_t i = 0; i < ndims; ++i) dims.push_back(int64_t(be32(b, 4 + 4 * i)));
  io::checked_element_count(dims, path + ": IDX header");
  return dims;
}

void IdxRecordReader::Close::operator()(gzFile_s* f) const { gzclose(f); }

IdxRecordReader::IdxRecordReader(const std::string& path, uint32_t magic) : path_(path) {
  file_.reset(gzopen(path.c_str(), "rb"));
  if (!file_)
    throw Error(fmt::format("cannot open \"{}\" for reading: {}", path, std::strerror(errno)));
  gzbuffer(file_.get(), 1 << 16);
  std::string header(4 + 4 * (magic & 0xff), '\0');
  int got = gzread(file_.get(), header.data(), unsigned(header.size()));
  if (got < 0) fail(zlib_error());
  header.resize(size_t(got));
  dims_ = parse_idx_header(header, path, magic);
  const auto total = uint64_t(io::checked_element_count(dims_, path + ": IDX header"));
  record_bytes_ = size_t(io::checked_element_count(std::span(dims_).subspan(1), path));
  if (dims_[0] > 0 && record_bytes_ > io::kMaxDecompressedBytes)  // (none is read when 0)
    fail(
        fmt::format("one IDX record of {} bytes ({}) exceeds the limit of {} bytes "
                    "(kiln::io::kMaxDecompressedBytes)",
                    record_bytes_, Shape(dims_).to_string(), io::kMaxDecompressedBytes));
  if (gzdirect(file_.get())) {  // a plain file: its length is known now
    std::error_code ec;
    uint64_t size = std::filesystem::file_size(path, ec);
    if (!ec && size - header.size() != total)
      fail(fmt::format("IDX header promises {} bytes of data ({}), but the file has {}", total,
                       Shape(dims_).to_string(), size - header.size()));
  }
}

bool IdxRecordReader::next(std::string& out) {
  if (read_ == num_records()) {
    if (!end_checked_) {
      char extra;
      int got = gzread(file_.get(), &extra, 1);
      // A gzip stream cut after its last data byte shows only now (zlib: unexpected end).
      if (got < 0 || (got == 0 && !zlib_message().empty())) fail(zlib_error());
      if (got > 0)
        fail(
            fmt::format("the file holds more data than its IDX header promises ({} records of "
                        "{} bytes, {})",
                        num_records(), record_bytes_, Shape(dims_).to_string()));
      end_checked_ = true;
    }
    return false;
  }
  // In pieces of at most 1 MiB, so that a gzip header's promise is not allocated before the
  // data is there (MNIST's records are one piece).
  out.clear();
  while (out.size() < record_bytes_) {
    const size_t have = out.size(), piece = std::min<size_t>(record_bytes_ - have, 1 << 20);
    out.resize(have + piece);
    int got = gzread(file_.get(), out.data() + have, unsigned(piece));
    if (got < 0) fail(zlib_error());
    out.resize(have + size_t(got));
    if (size_t(got) < piece) break;
  }
  if (out.size() != record_bytes_) {
    std::string zlib = zlib_message();
    fail(
        fmt::format("truncated: the IDX header promises {} records of {} bytes ({}), but the "
                    "data ends in record {}{}",
                    num_records(), record_bytes_, Shape(dims_).to_string(), read_,
                    zlib.empty() ? "" : " (zlib: " + zlib + ")"));
  }
  ++read_;
  return true;
}

std::string IdxRecordReader::zlib_message() const {
  int errnum = Z_OK;
  const char* msg = gzerror(file_.get(), &errnum);
  if (errnum == Z_OK) return "";
  if (errnum == Z_ERRNO) return std::strerror(errno);
  std::string m = msg ? msg : "zlib error";
  // zlib prefixes the path it was opened with ("PATH: unexpected end of file").
  if (m.rfind(path_ + ": ", 0) == 0) m.erase(0, path_.size() + 2);
  return m;
}

std::string IdxRecordReader::zlib_error() const {
  int errnum = Z_OK;
  gzerror(file_.get(), &errnum);
  if (errnum == Z_ERRNO) return fmt::format("cannot read: {}", zlib_message());
  return fmt::format("corrupt gzip data ({}); re-download or decompress the file", zlib_message());
}

void IdxRecordReader::fail(const std::string& why) const {
  throw Error(fmt::format("{}: {}", path_, why.empty() ? "read error" : why));
}

}  // namespace kiln::data
