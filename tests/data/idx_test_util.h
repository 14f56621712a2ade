// Helpers of the IDX (MNIST) reader tests: IDX bytes, and files written plain or gzip.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace kiln::data::test {

// IDX bytes: the magic, big-endian dimensions, then `data`.
inline std::string idx_bytes(uint32_t magic, const std::vector<uint32_t>& dims,
                             const std::string& data) {
  std::string b;
  auto be32 = [&](uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) b += char((v >> s) & 0xff);
  };
  be32(magic);
  for (uint32_t d : dims) be32(d);
  return b + data;
}

// Writes `bytes` to `path`, gzip-compressed (with zlib's gzwrite) when `gz`.
inline void write_bytes(const std::string& path, const std::string& bytes, bool gz) {
  if (!gz) {
    std::ofstream(path, std::ios::binary) << bytes;
    return;
  }
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, bytes.data(), unsigned(bytes.size()));
  gzclose(f);
}

}  // namespace kiln::data::test
