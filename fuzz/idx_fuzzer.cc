// libFuzzer harness of the MNIST IDX readers on the same arbitrary bytes:
//  - kiln::data::decode_idx_images and decode_idx_labels (raw or gzip-compressed bytes;
//    load_idx_* read a file and call them): what decodes must have the shape its header
//    promises;
//  - the streaming IdxRecordReader (gzopen/gzread on a file; the bytes are put in a memfd and
//    read through /proc/self/fd): it reads exactly dims[0] records of record_bytes() (up to
//    2^16 records: empty ones may be promised by the billion), and on plain (not gzip) bytes
//    it accepts what the in-memory decoder accepts, with the same values.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "fuzz/fuzz_util.h"
#include "kiln/keras/data/idx_stream.h"
#include "kiln/keras/data/mnist.h"

namespace {

// The bytes as a file's path (one memfd, rewritten for each input).
std::string as_file(const std::string& bytes) {
  static int fd = memfd_create("kiln_idx_fuzz", 0);
  if (fd < 0 || ftruncate(fd, 0) != 0 ||
      pwrite(fd, bytes.data(), bytes.size(), 0) != ssize_t(bytes.size()))
    kiln::fuzz::finding("idx: cannot write the memfd", "");
  return "/proc/self/fd/" + std::to_string(fd);
}

// Reads every record; returns the record bytes concatenated, or nothing after a kiln::Error.
std::optional<std::string> stream(const std::string& path, uint32_t magic) {
  try {
    kiln::data::IdxRecordReader reader(path, magic);
    std::string all, record;
    int64_t records = 0;
    // Records of 0 bytes cost nothing to store but a header may promise 2^32 of them: stop at
    // a count no record of data could reach in an input of this size.
    const int64_t cap = int64_t(1) << 16;
    while (records < cap && reader.next(record)) {
      if (record.size() != reader.record_bytes()) kiln::fuzz::finding("idx: record size", "");
      all += record;
      ++records;
    }
    if (records < cap && records != reader.num_records())
      kiln::fuzz::finding("idx: record count", "");
    return all;
  } catch (const kiln::Error& e) {
    kiln::fuzz::check_expected_error(e);
    return std::nullopt;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  const bool gzip = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
  const std::string path = as_file(bytes);
  for (uint32_t magic : {0x00000803u, 0x00000801u}) {
    std::optional<kiln::Tensor> decoded;
    try {
      decoded = magic == 0x803 ? kiln::data::decode_idx_images(bytes, "<fuzz images>")
                               : kiln::data::decode_idx_labels(bytes, "<fuzz labels>");
      if (decoded->rank() != (magic == 0x803 ? 3 : 1))
        kiln::fuzz::finding("IDX result has the wrong rank", decoded->shape().to_string());
    } catch (const kiln::Error& e) {
      kiln::fuzz::check_expected_error(e);
    }
    std::optional<std::string> streamed = stream(path, magic);
    if (gzip) continue;  // (gzip members and trailers are read differently by the two)
    if (decoded.has_value() != streamed.has_value())
      kiln::fuzz::finding("idx: the streaming and in-memory readers disagree on accepting", "");
    if (!decoded || !streamed) continue;
    std::vector<double> values = decoded->to_vector<double>();
    bool same = streamed->size() == values.size();
    for (size_t i = 0; same && i < values.size(); ++i) {
      auto byte = uint8_t((*streamed)[i]);
      same = magic == 0x803 ? float(values[i]) == float(byte) / 255.0f : values[i] == byte;
    }
    if (!same) kiln::fuzz::finding("idx: the streaming reader read other data", "");
  }
  return 0;
}
